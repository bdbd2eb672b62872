"""LinkGuardian scenarios (LinkGuardian §4), on any topology whose file enables it on a link.

- ``lg-stream``: the sequenced UDP stream of the live cross-check, in either runtime: effective
  loss (1 - D/A), reorder-free delivery, the link's actual loss (1 - C/B, Fig. 7) and both
  engines' counters. The same file and seed give comparable numbers live and in virtual time.
- ``lg-stress``: Fig. 8's "stress test" (§4.1), virtual time: a packet generator inside the
  sending switch keeps the protected link busy with MTU frames (``netstack.sim.pktgen``);
  effective loss, effective link speed (delivered goodput over the line rate) and the
  buffers' occupancy (the paper: < 90 KB at 100G).

:func:`stress_topology` builds the Fig. 7 testbed as a topology document (two hosts, two
switches, the corrupting link between them, LinkGuardian on it or not) for benchmarks and
sweeps; ``netstack/topo/examples/lg-*.toml`` are the same as files.
"""

from __future__ import annotations

from typing import Any

from ..ethernet import wire_bytes
from ..sim.hosts import UdpSink
from ..sim.pktgen import SwitchGenerator
from ..sim.scenario import Context, Scenario
from ..sim.scenarios import (
    SETTLE_NS,
    STREAM_PARAMS,
    link_report,
    measured_link,
    two_switch_topology,
    udp_stream_live,
    udp_stream_sim,
)
from ..stats import loss_estimate
from .feature import status

#: sender/receiver counters every LinkGuardian result carries (the engines' names)
SENDER_KEYS = ("copies", "retransmissions", "retx_frames", "retx_dropped", "holes_not_buffered", "dummies_sent",
               "tx_buffer_max_bytes", "tx_buffer_max_frames", "tx_evictions")
RECEIVER_KEYS = ("retx_rx", "timeouts", "holes_detected", "lost_detected", "loss_notifications_sent",
                 "reorder_buffer_max_bytes", "reorder_drops", "pauses_sent", "resumes_sent", "lacks_explicit",
                 "lacks_piggybacked", "duplicates")


def summary(by_switch: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """``{switch: lg status}`` (as ``lg_status`` answers) -> the protected link's sender and
    receiver counters, its parameters and N; {} when LinkGuardian is not on."""
    out: dict[str, Any] = {}
    for node, ports in by_switch.items():
        for port, roles in ports.items():
            for role, st in roles.items():
                c = st.get("counters", {})
                keys = SENDER_KEYS if role == "sender" else RECEIVER_KEYS
                out[role] = {"at": f"{node}/{port}", "enabled": st.get("enabled"),
                             **{k: c[k] for k in keys if k in c}}
                if role == "sender":
                    params = st.get("params", {})
                    out["params"] = {k: params.get(k) for k in ("mode", "n_copies", "ack_no_timeout_ns",
                                                                "pause_threshold_bytes", "resume_bytes",
                                                                "recirc_rate_bps", "backpressure", "time_scale")}
    return out


def _sim_status(net: Any) -> dict[str, Any]:
    return summary({name: status(sn.switch) for name, sn in net.switches.items()})


def _with_scale(out: dict[str, Any], lg: dict[str, Any]) -> dict[str, Any]:
    out["linkguardian"] = lg
    if lg.get("params", {}).get("time_scale"):
        out["time_scale"] = lg["params"]["time_scale"]
    return out


# ---------------------------------------------------------------------------- lg-stream
def lg_stream_sim(net: Any, ctx: Context) -> dict[str, Any]:
    out = udp_stream_sim(net, ctx)
    return _with_scale(out, _sim_status(net))


def lg_stream_live(ctx: Context) -> dict[str, Any]:
    from .. import runtime

    def lg(state: runtime.RunState) -> dict[str, Any]:
        by = {d.node: runtime.control(state.prefix, d.node, "lg_status") for d in state.daemons if d.kind == "switch"}
        return {"linkguardian": summary(by)}

    out = udp_stream_live(ctx, extra=lg)
    return _with_scale(out, out.pop("linkguardian"))


# ---------------------------------------------------------------------------- lg-stress
STRESS_PARAMS: dict[str, Any] = {"src": "h1", "dst": "h2", "frames": 100_000, "size": 1500, "depth": 8,
                                 "link": ""}


def lg_stress_sim(net: Any, ctx: Context) -> dict[str, Any]:
    """Closed-loop line-rate offering through the protected link; Fig. 7's counters A-D."""
    p = ctx.params
    where = measured_link(ctx.topology, p["src"], p["dst"], p["link"])
    sink = UdpSink(net.host(p["dst"]), port=5002, expect=p["frames"])
    gen = SwitchGenerator(net, p["src"], p["dst"], count=p["frames"], size=p["size"], depth=p["depth"],
                          switch=where["sender"] if where["sender"] in net.switches else None)
    # bounded like a stream: the offering lasts about frames x frame time, then everything settles
    horizon = gen.frame_ns * p["frames"] * 50 + SETTLE_NS
    net.run(horizon if ctx.duration_ns is None else ctx.duration_ns)
    s = net.switch(where["sender"]).counters()[where["sender_port"]]
    r = net.switch(where["receiver"]).counters()[where["receiver_port"]]
    link = link_report(where, s, r)
    a = gen.injected
    d = sink.unique
    rate = net.switch(where["sender"]).config.port(where["sender_port"]).rate_bps
    duration = max(1, (sink.last_ns or 0) - (gen.first_ns or 0)) if sink.last_ns is not None else None
    # goodput counts each delivered frame's line time (frame + preamble/IFG/FCS), as the paper's
    # "effective link speed" is a share of the line rate
    goodput = d * wire_bytes(p["size"]) * 8e9 / duration if duration else 0.0
    lg = _sim_status(net)
    out: dict[str, Any] = {
        "offered_A": a, "protected_egress_B": link["sent_B"], "protected_ingress_C": link["received_C"],
        "delivered_D": d, "actual_loss": link["actual_loss"], "effective_loss": loss_estimate(a - d, a),
        "duplicates": sink.duplicates, "out_of_order": sink.reordered, "duration_ns": duration,
        "goodput_bps": goodput, "rate_bps": rate, "effective_link_speed": goodput / rate if rate and duration else None,
        "fcs_errors": r["fcs_errors"], "impair_lost": s["impair_lost"], "impair_corrupted": s["impair_corrupted"],
        "egress_queue_drops": s["queue_drops"], "egress_queue_peak_bytes": s["buffer_peak"],
        "pfc_pauses_honoured": sum(s["pauses_rx_class"]), "link": link, "generator": gen.result(),
        "protected": bool(lg),
    }
    if lg:
        n = lg.get("sender", {}).get("copies") or lg.get("params", {}).get("n_copies") or 0
        out["copies"] = n
        out["expected_effective_loss"] = link["actual_loss"] ** (n + 1)
    return _with_scale(out, lg)


# ------------------------------------------------------------------------- topologies
def stress_topology(*, rate_bps: int, delay_ns: int, corrupt: float = 0.0, mode: str | None = "blocking",
                    copies: int | None = None, actual_loss: float | None = None, target: float = 1e-8,
                    backpressure: bool = True, recirc_rate: str = "link", paper_gbps: int = 100,
                    buffer_bytes: int = 4 << 20, name: str = "lg-stress") -> dict[str, Any]:
    """LinkGuardian Fig. 7 as a topology document: h1 - sw1 = sw2 - h2, the sw1 = sw2 link at
    ``rate_bps`` with ``delay_ns`` and the switch's seeded corruption model on sw1 -> sw2, host
    links at the same rate without delay, ``buffer_bytes`` everywhere. ``mode`` None leaves the
    link unprotected; else LinkGuardian (``blocking``/``nb``) with the paper's ``paper_gbps``
    settings scaled to the rate, N = ``copies`` or Eq. 2 from ``actual_loss`` (default: the
    configured ``corrupt``) and ``target``."""
    link: dict[str, Any] = {"delay": f"{delay_ns}ns"}
    if corrupt:
        link["impairment"] = {"corrupt": corrupt, "direction": "a>b", "backend": "switch"}
    if mode is not None:
        shared: dict[str, Any] = {"mode": mode, "target": target, "backpressure": backpressure,
                                  "recirc_rate": recirc_rate, "paper_gbps": paper_gbps}
        if copies is not None:
            shared["copies"] = copies
        elif actual_loss is not None or corrupt:
            shared["actual_loss"] = actual_loss if actual_loss is not None else corrupt
        link["features"] = {"a": {"linkguardian": {"role": "sender", **shared}},
                            "b": {"linkguardian": {"role": "receiver"}}}
    return two_switch_topology(link, name=name, prefix="lgs", rate_bps=rate_bps, buffer_bytes=buffer_bytes,
                               paper_rate_bps=paper_gbps * 10**9)


SCENARIOS = [
    Scenario("lg-stream", "a sequenced UDP stream over a LinkGuardian link (the live cross-check): effective "
             "loss, reorder-free delivery, actual loss (B/C) and the engines' counters",
             STREAM_PARAMS, run_sim=lg_stream_sim, run_live=lg_stream_live),
    Scenario("lg-stress", "LinkGuardian Fig. 8's stress test: a generator in the sending switch keeps the "
             "protected link busy with MTU frames; effective loss, effective link speed, buffer occupancy",
             STRESS_PARAMS, run_sim=lg_stress_sim),
]

__all__ = ["SCENARIOS", "stress_topology", "summary"]
