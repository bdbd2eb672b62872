"""Tables (Markdown) and plots (PNG) of ``netstack bench onepipe``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..output import format_table
from ..plot import pyplot, save


def _f(v: Any, fmt: str = "{:.2f}") -> str:
    return "-" if v is None else fmt.format(v)


def _m(v: float | None) -> str:
    """A rate in M msg/s."""
    return "-" if v is None else f"{v / 1e6:.3f}"


def fig8_table(rows: list[dict[str, Any]]) -> str:
    by = {(r["system"], r["procs"]): r for r in rows}
    out = []
    for p in sorted({r["procs"] for r in rows}):
        one, un, seq = by.get(("1pipe", p), {}), by.get(("unordered", p), {}), by.get(("sequencer", p), {})
        out.append([p, _m(one.get("offered_per_proc")), _m(one.get("delivered_per_proc")),
                    _m(seq.get("delivered_per_proc")), _f(un.get("mean_us")), _f(one.get("mean_us")),
                    _f(one.get("p99_us")), _f(one.get("p999_us")), _f(seq.get("mean_us")), _f(seq.get("p99_us")),
                    one.get("send_failed", "-"), one.get("send_unknown", "-"), seq.get("seq_dropped", "-"),
                    "ok" if one.get("order_ok") and seq.get("order_ok", True) else "VIOLATED"])
    return format_table(["P", "offered M msg/s/proc", "1Pipe delivered", "sequencer delivered",
                         "unordered mean us", "1Pipe mean us", "1Pipe p99", "1Pipe p99.9", "sequencer mean us",
                         "sequencer p99", "1Pipe send-fails", "1Pipe send-unknown", "sequencer drops", "order"], out)


#: Fig. 8's systems in the order the paper's legend has them (others after, by name)
FIG8_ORDER = ("1pipe", "1pipe_reliable", "switchseq", "sequencer", "hostseq", "token", "lamport", "unordered")


def _system_key(system: str) -> tuple[int, str]:
    return (FIG8_ORDER.index(system) if system in FIG8_ORDER else len(FIG8_ORDER), system)


def fig8_systems_table(rows: list[dict[str, Any]]) -> str:
    """One row per (system, P): every Fig. 8 system, reliable 1Pipe and the baselines included,
    with its cores' mean utilisation where the host CPU model is on."""
    out = [[r["system"], r["procs"], _m(r.get("offered_per_proc")), _m(r.get("delivered_per_proc")),
            _f(r.get("mean_us")), _f(r.get("p99_us")), _f(r.get("cpu_util_mean")),
            "-" if "order_ok" not in r else "ok" if r["order_ok"] else "VIOLATED"]
           for r in sorted(rows, key=lambda r: (_system_key(r["system"]), r["procs"]))]
    return format_table(["system", "P", "offered M msg/s/proc", "delivered M msg/s/proc", "mean us", "p99 us",
                         "CPU util (mean)", "order"], out)


def reliable_vs_be_table(rows: list[dict[str, Any]]) -> str:
    """sim.reliable_vs_be: per P, reliable's and best effort's rate per process and their ratio,
    then each one's ACKs per delivered message (best effort's repeats among them) and what the CPU
    model charges for them (sim.ack_columns)."""
    return format_table(["P", "BE M msg/s/proc", "R M msg/s/proc", "R/BE", "model", "paper", "BE ACKs/msg",
                         "BE repeats/msg", "BE ACK ns/msg", "R ACKs/msg", "R ACK ns/msg"],
                        [[r["procs"], _m(r["be_per_proc"]), _m(r["reliable_per_proc"]),
                          _f(r["reliable_over_be"], "{:.3f}"), _f(r["model"], "{:.3f}"), _f(r["paper"], "{:.3f}"),
                          _f(r.get("be_acks_per_msg")), _f(r.get("be_ack_repeats_per_msg")),
                          _f(r.get("be_ack_ns_per_msg"), "{:.0f}"), _f(r.get("reliable_acks_per_msg")),
                          _f(r.get("reliable_ack_ns_per_msg"), "{:.0f}")]
                         for r in rows])


def sim_speed_table(rows: list[dict[str, Any]]) -> str:
    """``netstack.bench.onepipe.sim.sim_speed``: events per CPU-second per P and system."""
    out = [[r["procs"], r["system"], r["sim_events"], _f(r["sim_cpu_s"]), _f(r["sim_wall_s"]),
            _f(r["sim_events_per_cpu_s"], "{:,.0f}")] for r in rows]
    return format_table(["P", "run", "events", "CPU s", "wall s", "events per CPU-s"], out)


def live_table(rows: list[dict[str, Any]]) -> str:
    out = [[r["procs"], _f(r["loss"], "{:g}"), f"{r['offered_per_proc']:.0f}", f"{r['delivered_per_proc']:.0f}",
            r["send_failed"], r.get("send_unknown", "-"), r.get("in_flight_at_end", "-"), r["unaccounted"],
            _f(r["live_mean_ms"]), _f(r["mean_us"]), _f(r["p50_us"]),
            _f(r["p99_us"]), r["late_dropped"], "ok" if r["check_ok"] else "FAILED",
            "yes" if r.get("valid", True) else "INVALID"] for r in rows]
    return format_table(["P", "loss tor1-spine1", "offered msg/s/proc", "delivered msg/s/proc", "send-fails",
                         "send-unknown", "in flight at end", "unaccounted", "mean ms (live)",
                         "mean us (paper scale)", "p50 us", "p99 us", "late drops", "onepipe check", "valid run"], out)


def fig9a_table(rows: list[dict[str, Any]]) -> str:
    out = [[_f(r["t_beacon_us"], "{:g}"), _f(r["skew_us"], "{:g}"), r["switch_beacons"],
            _f(r["mean_abs_offset_us"]), _f(r["over_slowest_us"]), _f(r["unordered_mean_us"]),
            _f(r["latency_mean_us"]), _f(r["overhead_mean_us"]), _f(r["overhead_p99_us"]), _f(r["model_us"]),
            _f(r["ratio"]), "met" if r["met"] else "missed", r["messages"]] for r in rows]
    return format_table(["T_beacon us", "skew us", "switch beacons", "mean abs offset us", "offset over slowest us",
                         "unordered mean us", "1Pipe mean us", "overhead mean us", "barrier wait p99 us",
                         "model T/2+skew us", "overhead/model", "target (1.5x)", "messages"], out)


#: where a fig9b row's loss was (netstack.bench.onepipe.sim: the scenario's ``loss_at``; rows without it: links)
FIG9B_WHERE = {"receivers": "receiving library", "links": "ToR-spine links"}
FIG9B_SYSTEM = {"1pipe": "BE", "1pipe_reliable": "R"}


def retransmits_per_us(row: dict[str, Any]) -> float | None:
    """A fig9b row's retransmissions per microsecond of its run (the run's length from what it
    sent: ``sent`` / (``procs`` x ``offered_per_proc``)). Reliable's rise follows this rate, the
    load times the loss, not the loss alone (docs/onepipe-paper.md, Fig. 9b). None without the
    fields (best effort, live rows)."""
    retx, sent, procs, rate = (row.get(k) for k in ("retransmits", "sent", "procs", "offered_per_proc"))
    if not isinstance(retx, int) or not sent or not procs or not rate:
        return None
    return float(retx / (sent / (procs * rate) * 1e6))


def fig9b_table(rows: list[dict[str, Any]]) -> str:
    out = [[r["runtime"], FIG9B_WHERE.get(r.get("loss_at", "links"), r.get("loss_at")),
            FIG9B_SYSTEM.get(r.get("system", "1pipe"), r.get("system")), r.get("variant", "chip"),
            _f(r.get("load", 1.0), "{:.3g}x") + (", commit in beacons" if r.get("commit") == "beacons" else ""),
            _f(r["loss"], "{:g}"), r["procs"],
            f"{r['delivered']}/{r['sent']}", _f(r["mean_us"]), _f(r["p99_us"]), _f(r.get("unordered_mean_us")),
            _f(r.get("barrier_wait_mean_us")), _f(r.get("rx_dropped"), "{}"), _f(r.get("retransmits"), "{}"),
            _f(retransmits_per_us(r), "{:.3g}"), r["send_failed"],
            r.get("send_unknown", "-"), r["messages_lost"], r["late_dropped"], r["unaccounted"],
            "ok" if r.get("order_ok", r.get("check_ok")) else "VIOLATED"] for r in rows]
    return format_table(["runtime", "loss at", "1Pipe", "variant", "load", "loss", "P", "delivered/sent", "mean us",
                         "p99 us",
                         "unordered mean us", "barrier wait mean us", "datagrams dropped", "retransmits",
                         "retransmits per us", "send-fails", "send-unknown", "lost (NAKed)", "late drops",
                         "unaccounted", "order"], out)


# ----------------------------------------------------------------------------------- plots
def plot_fig8(sim: list[dict[str, Any]], live: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    if plt is None or not sim:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    styles = {"1pipe": ("o-", "1Pipe/BE"), "1pipe_reliable": ("o--", "1Pipe/R"), "switchseq": ("v-.", "switch seq."),
              "sequencer": ("s--", "sequencer"), "hostseq": ("s-.", "host seq."), "token": ("x-", "token"),
              "lamport": ("d-", "Lamport"), "unordered": ("^:", "unordered")}
    for system, (style, label) in styles.items():
        pts = sorted((r for r in sim if r["system"] == system), key=lambda r: r["procs"])
        if not pts:
            continue
        if system != "unordered":
            a.plot([r["procs"] for r in pts], [r["delivered_per_proc"] / 1e6 for r in pts], style, label=label)
    if any(r["system"] in ("token", "lamport") for r in sim):  # rates two orders of magnitude apart
        a.set_yscale("log")
        pos = [r for r in pts if r["mean_us"]]  # a lone process's loopback arrives at once: none on a log axis
        b.plot([r["procs"] for r in pos], [r["mean_us"] for r in pos], style, label=f"{label} mean")
    if live:
        b.plot([r["procs"] for r in live], [r["mean_us"] for r in live], "D", label="1Pipe live (1000x, rescaled)")
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("processes")
        ax.grid(alpha=0.3)
        ax.legend()
    a.set_ylabel("delivered M msg/s per process")
    if a.get_yscale() == "linear":
        a.set_ylim(bottom=0)
    a.set_title("Fig. 8a: capacity per process (sim, host CPU model)")
    b.set_yscale("log")
    b.set_ylabel("latency (us)")
    b.set_title("Fig. 8b: delivery latency")
    save(plt, fig, path, dpi=110)
    return True


def plot_fig9a(rows: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    built = [r for r in rows if r["switch_beacons"] == "prompt"]
    if plt is None or not built:
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for skew in sorted({r["skew_us"] for r in built}):
        pts = sorted((r for r in built if r["skew_us"] == skew), key=lambda r: r["t_beacon_us"])
        line = a.plot([r["t_beacon_us"] for r in pts], [r["overhead_mean_us"] for r in pts], "o-",
                      label=f"skew {skew:g} us")
        a.plot([r["t_beacon_us"] for r in pts], [r["model_us"] for r in pts], ":", color=line[0].get_color())
    timer = sorted((r for r in rows if r["switch_beacons"] == "timer"), key=lambda r: r["t_beacon_us"])
    if timer:
        a.plot([r["t_beacon_us"] for r in timer], [r["overhead_mean_us"] for r in timer], "k^--",
               label="skew 0, switch beacons on the timer only")
    a.set_xscale("log")
    a.set_yscale("log")
    a.set_xlabel("T_beacon (us)")
    a.set_ylabel("mean overhead over unordered (us)")
    a.set_title("Fig. 9a: overhead vs T_beacon (dotted: T/2 + skew)")
    for t in sorted({r["t_beacon_us"] for r in built}):
        pts = sorted((r for r in built if r["t_beacon_us"] == t), key=lambda r: r["skew_us"])
        b.plot([r["mean_abs_offset_us"] for r in pts], [r["overhead_mean_us"] for r in pts], "o-",
               label=f"T_beacon {t:g} us")
    b.set_xlabel("mean |clock offset| (us)")
    b.set_ylabel("mean overhead (us)")
    b.set_title("overhead vs clock skew")
    for ax in (a, b):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    save(plt, fig, path, dpi=110)
    return True


def plot_fig9b(rows: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    if plt is None or not rows:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    floor = 1e-8
    groups = dict.fromkeys((r.get("loss_at", "links"), r.get("system", "1pipe"), r.get("variant", "chip"),
                            r.get("load", 1.0)) for r in rows if r["runtime"] == "sim")
    for where, system, variant, load in groups:
        sim = sorted((r for r in rows if r["runtime"] == "sim" and (r.get("loss_at", "links"), r.get("system", "1pipe"),
                      r.get("variant", "chip"), r.get("load", 1.0)) == (where, system, variant, load)),
                     key=lambda r: r["loss"])
        xs = [max(r["loss"], floor) for r in sim]
        more = (f", {variant}" if variant != "chip" else "") + (f", {load:.3g}x load" if load != 1.0 else "")
        label = (f"1Pipe/{FIG9B_SYSTEM.get(system, system)}{more}, loss at the {FIG9B_WHERE.get(where, where)} "
                 f"(sim, P={sim[0]['procs']})")
        ax.plot(xs, [r["mean_us"] for r in sim], "o-" if where == "receivers" else "s--", label=label)
        if system == "1pipe" and variant == "chip" and load == 1.0:
            ax.plot(xs, [r["unordered_mean_us"] for r in sim], "^:", label=f"unordered ({FIG9B_WHERE.get(where)})")
    live = [r for r in rows if r["runtime"] == "live"]
    if live:
        ax.plot([max(r["loss"], floor) for r in live], [r["mean_us"] for r in live], "D",
                label="1Pipe live (1000x, rescaled)")
    ax.set_xscale("log")
    ax.set_xlabel(f"loss probability (0 drawn at {floor:g})")
    ax.set_ylabel("mean latency (us)")
    ax.set_title("Fig. 9b: latency vs loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    save(plt, fig, path, dpi=110)
    return True


__all__ = ["fig8_systems_table", "fig8_table", "fig9a_table", "fig9b_table", "live_table", "plot_fig8", "plot_fig9a",
           "plot_fig9b", "reliable_vs_be_table", "retransmits_per_us"]
