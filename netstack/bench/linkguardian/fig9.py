"""Fig. 9 live: real kernel TCP throughput over time while the link starts corrupting and then
LinkGuardian is enabled.

tcp-send samples its throughput every 0.5 s; corruption starts after 15 % of the run,
LinkGuardian (blocking, Eq. 2's N) is enabled at 45 %; once with backpressure, once without
(the receiver's reorder drops and pauses are reported), and once without but with the paper's
Fig. 9 ratio of recirculation port to link rate.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import toolproc
from ..output import Progress
from .params import (
    FIG9_CC_WHY,
    FIG9_CORRUPT,
    FIG9_CORRUPT_AT,
    FIG9_INTERVAL_S,
    FIG9_LG_AT,
    FIG9_RUNS,
    FIG9_WHY,
    H2_IP,
    LINK,
    LIVE_TCP_CC,
    SENDER,
    Sizes,
)
from .testbed import RX_KEYS, TX_KEYS, lg_counters, link_counts, queue_drops, testbed

_SAMPLE_RE = re.compile(r"t=\s*([\d.]+)s")


def _tcp_retrans(netns_name: str) -> int | None:
    """RetransSegs of a namespace (/proc/thread-self/net follows the thread's netns)."""
    from ...topo.netns import in_netns

    try:
        with in_netns(netns_name):
            lines = Path("/proc/thread-self/net/snmp").read_text().splitlines()
    except OSError:
        return None
    tcp = [ln.split() for ln in lines if ln.startswith("Tcp:")]
    if len(tcp) < 2 or "RetransSegs" not in tcp[0]:
        return None
    return int(tcp[1][tcp[0].index("RetransSegs")])


class _LineReader(threading.Thread):
    """Collects a pipe's lines with their arrival time (tcp-send's progress on stderr)."""

    def __init__(self, pipe: Any) -> None:
        super().__init__(daemon=True)
        self.pipe = pipe
        self.lines: list[tuple[float, str]] = []
        self.first_sample = threading.Event()

    def run(self) -> None:
        for line in self.pipe:
            self.lines.append((time.monotonic(), line.rstrip()))
            if _SAMPLE_RE.search(line):
                self.first_sample.set()

    def origin(self, started: float) -> float:
        """tcp-send's time zero on this clock: its first sample's arrival minus the sample's own
        ``t=``; 0.3 s after ``started`` if no sample comes within 15 s."""
        if self.first_sample.wait(timeout=15):
            arrival, line = next((a, ln) for a, ln in self.lines if _SAMPLE_RE.search(ln))
            return arrival - float(_SAMPLE_RE.search(line).group(1))
        return started + 0.3


@dataclass
class _Timeline:
    """What is done to one Fig. 9 run while tcp-send runs (corruption on, then LinkGuardian on)
    and what is sampled from the testbed meanwhile, on tcp-send's clock (``t0``)."""

    prefix: str
    ns_sw1: str
    ns_h1: str
    corrupt: float
    backpressure: bool
    recirc_rate_bps: int | None
    tag: str
    say: Progress
    events: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    params_used: dict[str, Any] = field(default_factory=dict)

    def follow(self, proc: subprocess.Popen[str], t0: float, pending: list[tuple[str, float]]) -> None:
        """Until tcp-send exits: fire each pending (event, at seconds) when its time comes, and
        sample every ``FIG9_INTERVAL_S``."""
        next_tick = time.monotonic()
        while proc.poll() is None:
            now = time.monotonic()
            while pending and now >= t0 + pending[0][1]:
                what, at = pending.pop(0)
                self.fire(what, at, t0)
            if now >= next_tick:
                self.sample(now, t0)
                next_tick += FIG9_INTERVAL_S
            time.sleep(0.02)

    def fire(self, what: str, at: float, t0: float) -> None:
        from ...linkguardian.control import enable_link
        from ...topo import impair

        if what == "corrupt":
            impair.apply_impairment(self.prefix, self.ns_sw1, SENDER[1], corrupt=self.corrupt, backend="auto")
        else:
            self.params_used = enable_link(self.prefix, LINK, mode="blocking", actual=self.corrupt,
                                           backpressure=self.backpressure,
                                           recirc_rate_bps=self.recirc_rate_bps)["params"]
        self.events.append({"event": what, "planned_s": at, "t": round(time.monotonic() - t0, 3),
                            "tcp_retrans": _tcp_retrans(self.ns_h1), "queue_drops": queue_drops(self.prefix)})
        self.say(f"fig9 ({self.tag}): t={time.monotonic() - t0:4.1f} s {what.replace('_', ' ')}")

    def sample(self, now: float, t0: float) -> None:
        rx, tx = lg_counters(self.prefix)
        self.samples.append({"t": round(now - t0, 3), "tcp_retrans": _tcp_retrans(self.ns_h1),
                             "queue_drops": queue_drops(self.prefix),
                             "reorder_buffer_bytes": rx.get("reorder_buffer_bytes"),
                             "reorder_drops": rx.get("reorder_drops"), "pauses_sent": rx.get("pauses_sent"),
                             "timeouts": rx.get("timeouts"), "retransmissions": tx.get("retransmissions")})


def _tcp_result(proc: subprocess.Popen[str], reader: _LineReader) -> dict[str, Any]:
    """tcp-send's JSON result (its last stdout line), once it has exited."""
    from ...experiment import ExperimentError

    proc.wait(timeout=30)
    reader.join(timeout=5)
    out = proc.stdout.read() if proc.stdout else ""
    doc = toolproc.last_json(out)
    if proc.returncode != 0 or doc is None:
        raise ExperimentError(f"tcp-send failed (exit {proc.returncode}): "
                              f"{' '.join(ln for _, ln in reader.lines)[-500:]}")
    return doc


def run_fig9_once(prefix: str, seconds: float, backpressure: bool, corrupt: float,
                  say: Progress, recirc_factor: int = 1) -> dict[str, Any]:
    from ...experiment import LagWindow, finish_tool, start_tool, tool_argv
    from ...validity import Validity

    tag = ("backpressure on" if backpressure else "backpressure off") + (
        f", recirculation {recirc_factor}x link" if recirc_factor != 1 else "")
    t_corrupt = round(seconds * FIG9_CORRUPT_AT, 1)
    t_lg = round(seconds * FIG9_LG_AT, 1)
    say(f"fig9 ({tag}): bringing up the default topology (prefix {prefix}); TCP {seconds:g} s h1 -> h2, "
        f"corruption {corrupt:g} at {t_corrupt:g} s, LinkGuardian at {t_lg:g} s")
    with testbed(prefix, say) as (state, tcp_cc):
        link_rate = (state.links[LINK].rate_bps if LINK in state.links else 0) or 100_000_000
        # None: the link's own rate, resolved by the switch (as `netstack lg enable` does)
        recirc_rate_bps = None if recirc_factor == 1 else recirc_factor * link_rate
        tl = _Timeline(prefix, state.namespaces["sw1"], state.namespaces["h1"], corrupt, backpressure,
                       recirc_rate_bps, tag, say)
        sink = start_tool(state, "h2", "tcp-sink", "--port", "5001")
        lag = LagWindow(prefix).start()
        proc = toolproc.popen(tool_argv(state, "h1", "tcp-send", "--dst", H2_IP, "--seconds", str(seconds),
                                        "--interval", str(FIG9_INTERVAL_S)))
        try:
            started = time.monotonic()
            reader = _LineReader(proc.stderr)
            reader.start()
            tl.follow(proc, reader.origin(started), [("corrupt", t_corrupt), ("lg_enable", t_lg)])
            tcp = _tcp_result(proc, reader)
        finally:
            toolproc.kill(proc, timeout=5)
        lag.stop()
        lag.add_tool("h2 tcp-sink", finish_tool(sink))
        lag.add_tool("h1 tcp-send", tcp)
        # the counters at the end, read in this order before the testbed goes
        end: dict[str, Any] = {"lg": lg_counters(prefix), "tcp_retrans": _tcp_retrans(tl.ns_h1),
                               "queue_drops": queue_drops(prefix), "link": link_counts(prefix)}
    res = _fig9_result(tl, tcp, end, seconds, t_corrupt, t_lg, recirc_factor, tcp_cc)
    # a throughput timeline is the network's only if no process waited for the CPU meanwhile
    v = Validity()
    fired = sorted({e["event"] for e in tl.events})
    v.happened("timeline events fired", {"corrupt", "lg_enable"} <= set(fired), fired, "corrupt and lg_enable")
    lag.check(v)
    v.annotate(res)
    ph = res["phases"]
    rx = end["lg"][0]
    say(f"fig9 ({tag}): mean Mbit/s before {ph['before']['mean_mbps']:.1f}, corrupting "
        f"{ph['corrupting']['mean_mbps']:.1f}, with LG {ph['lg']['mean_mbps']:.1f}; receiver pauses "
        f"{rx.get('pauses_sent')}, reorder drops {rx.get('reorder_drops')}, peak reorder buffer "
        f"{rx.get('reorder_buffer_max_bytes')} B")
    return res


def _fig9_result(tl: _Timeline, tcp: dict[str, Any], end: dict[str, Any], seconds: float, t_corrupt: float,
                 t_lg: float, recirc_factor: int, tcp_cc: Any) -> dict[str, Any]:
    """One Fig. 9 run's record: throughput and counters per phase, as the events really fell."""
    rx, tx = end["lg"]
    params_used = tl.params_used
    ev = {e["event"]: e for e in tl.events}
    tc = ev.get("corrupt", {}).get("t", t_corrupt)
    tlg = ev.get("lg_enable", {}).get("t", t_lg)
    phases = _fig9_phases(tcp["samples"], tc, tlg, seconds)
    r_c = ev.get("corrupt", {}).get("tcp_retrans")
    r_l = ev.get("lg_enable", {}).get("tcp_retrans")
    retrans = _per_phase(r_c, r_l, end["tcp_retrans"])
    q_c = ev.get("corrupt", {}).get("queue_drops")
    q_l = ev.get("lg_enable", {}).get("queue_drops")
    qdrops = _per_phase(q_c, q_l, end["queue_drops"])
    return {
        "backpressure": tl.backpressure, "recirc_factor": recirc_factor, "recirc_rate_bps": rx.get("recirc_rate_bps"),
        "corrupt": tl.corrupt, "seconds": seconds, "interval_s": FIG9_INTERVAL_S,
        "events": tl.events, "tcp": tcp, "phases": phases, "tcp_retransmissions": retrans,
        "sw1_queue_drops": qdrops,
        "receiver": {k: rx.get(k) for k in (*RX_KEYS, "reorder_buffer_max_bytes", "reorder_buffer_max_frames")},
        "sender": {k: tx.get(k) for k in (*TX_KEYS, "tx_buffer_max_bytes", "pauses_rx")},
        "reorder_buffer_limit_bytes": params_used.get("reorder_buffer_limit_bytes"),
        "pause_threshold_bytes": params_used.get("pause_threshold_bytes"),
        "copies": params_used.get("n_copies"), "params": params_used, "lg_samples": tl.samples, "link": end["link"],
        "tcp_cc": tcp_cc,
    }


def _per_phase(at_corrupt: int | None, at_lg: int | None, at_end: int | None) -> dict[str, int | None]:
    """A cumulative counter split into the three phases of Fig. 9 (it starts at 0 with the testbed)."""
    return {"before_corruption": at_corrupt,
            "corrupting_without_lg": at_lg - at_corrupt if at_lg is not None and at_corrupt is not None else None,
            "with_lg": at_end - at_lg if at_end is not None and at_lg is not None else None}


def _fig9_phases(samples: list[dict[str, Any]], tc: float, tl: float, seconds: float) -> dict[str, Any]:
    """Mean throughput per phase; a sample covers (t - interval, t]. The first sample (the
    socket buffer filling) and samples straddling an event are left out."""
    iv = FIG9_INTERVAL_S
    spans = {"before": (iv, tc), "corrupting": (tc, tl), "lg": (tl, seconds + iv)}
    out: dict[str, Any] = {}
    for name, (a, b) in spans.items():
        vals = [s["mbps"] for s in samples if s["t"] - iv >= a - 1e-9 and s["t"] <= b + 1e-9 and s["t"] > iv + 1e-9]
        out[name] = {"from_s": a, "to_s": b, "samples": len(vals),
                     "mean_mbps": sum(vals) / len(vals) if vals else float("nan"),
                     "min_mbps": min(vals) if vals else float("nan")}
    return out


def run_fig9(prefix: str, sizes: Sizes, say: Progress) -> dict[str, Any]:
    runs = [run_fig9_once(prefix, sizes.fig9_seconds, bp, FIG9_CORRUPT, say, recirc_factor=k)
            for bp, k in FIG9_RUNS]
    return {"corrupt": FIG9_CORRUPT, "why_this_rate": FIG9_WHY, "why_reno": FIG9_CC_WHY, "tcp_cc": LIVE_TCP_CC,
            "timeline": {"corrupt_at_s": round(sizes.fig9_seconds * FIG9_CORRUPT_AT, 1),
                         "lg_at_s": round(sizes.fig9_seconds * FIG9_LG_AT, 1), "seconds": sizes.fig9_seconds},
            "runs": runs}
