"""``netstack reproduce tcd``: "Congestion Detection in Lossless Networks" (TCD, SIGCOMM 2021),
claim by claim.

The paper's numbers and statements are in docs/data/tcd-paper/claims.toml (its abstract and
§2-§3.2: the §3.1 setup, the single and multiple congestion point scenarios of Figs. 3-4, the
ternary states of §3.2.1; its §4-§5 were not available). Ours come from ``netstack bench tcd``
(netstack/bench/tcd.py), read through netstack/tcd/reproduce_read.py:

- ``tcd-sim``: §3.1's two scenarios with the ECN baseline and with TCD, at the paper's own
  40 Gbit/s and 4 us in virtual time (9 s here); ``--full`` adds the FCT comparison on the
  ``tcd-leafspine`` fabric behind the abstract's 3.3x / 2.0x (docs/tcd.md, "FCT on a leaf-spine
  fabric").
- ``tcd-live`` (root): the same two scenarios on the live testbed at 1/1000 of the paper's rates
  (40 Mbit/s, 4 ms: times x1000, bytes unchanged), each run with its own validity checks
  (netstack/tcd/verdict.py); a starved run's rows say "not reproduced" with its failed checks.

Which run answers which claim, and the measurement rules that are ours (the paper gives only the
text), are in each ``_fig*`` function's comments. InfiniBand's claims (FECN, credits) are listed as
not attempted: netstack runs over Ethernet/IP.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any

from ..reproduce.claims import WITHIN_2X, Claim, Experiment, Figure, PaperSpec, Results, Shape, Tolerance, Validity
from ..reproduce.paperdata import PaperClaim, PaperClaims, claim, load
from .paper import ECN_K_BYTES, PAPER_RATE_BPS, XOFF_BYTES
from .reproduce_read import (
    CONGESTION,
    UNDETERMINED,
    Runs,
    burst_start_ns,
    fct_variants,
    flow,
    flow_marks,
    get,
    last_off_ns,
    num,
    scenario_runs,
    series,
    state_ms,
    timeline,
    window,
)
from .scenarios import Workload

SIM, LIVE = "tcd-sim", "tcd-live"
NO_SIM = "not measured: the virtual-time experiment (tcd-sim) did not run or wrote no result"
NO_LIVE = "the live section did not run (it needs root), or wrote no result"
NOT_IB = ("not attempted: InfiniBand (credit-based flow control, FECN) is not modelled; netstack runs over "
          "Ethernet/IP (docs/tcd.md, Limits)")
SIM_SCALE = "the paper's 40 Gbit/s links, 4 us, virtual time (time scale 1)"
LIVE_SCALE = ("1/1000 of the paper's rates: 40 Mbit/s links, 4 ms (times x1000, bytes unchanged; docs/tcd.md); "
              "read back in paper time")
FCT_SCALE = ("the paper's 40 Gbit/s / 4 us on our 16-host 2:1 leaf-spine (tcd-leafspine), persistent incast, "
             "load 0.6; the paper's §5 setup was not available (docs/tcd.md)")
CONFIG = Validity(None, (), "the configuration the runs used, not a measurement")
PORTS3 = ("P0", "P1", "P2")
TITLES = {"single": "single congestion point", "multi": "multiple congestion points"}
#: one MTU: a queue this small is "drained out"
MTU_BYTES = 1500


@dataclass(frozen=True)
class Ours:
    """What we measured for one claim: a number, whether a statement holds, and a note."""

    value: float | None
    check: bool | None = None
    note: str = ""


def _safe(fn: Callable[..., dict[str, Ours]], ids: tuple[str, ...], *args: Any,
          missing: str = "not measured: a value it needs is missing from the result") -> dict[str, Ours]:
    """``fn(*args)`` (claim id -> ours; an id it leaves out gets the note ``missing``), or for every
    claim of ``ids`` a "not measured" when the document is malformed in a way the readers let
    through (the report must be written whatever a bench left behind)."""
    try:
        out = fn(*args)
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError) as exc:
        bad = Ours(None, None, f"not measured: the result document is malformed ({type(exc).__name__}: {exc})")
        return dict.fromkeys(ids, bad)
    return {cid: out.get(cid) or Ours(None, None, missing) for cid in ids}


def _n(x: float | None) -> str:
    """A number for a note: an integer as one, else 3 significant digits; "-" for None."""
    if x is None:
        return "-"
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.3g}"


def _row(pc: PaperClaim, ours: Ours, *, runtime: str, scale: str, validity: Validity, source: str,
         suffix: str = "", **kw: Any) -> Claim:
    c = claim(pc, ours.value, check=ours.check if ours.value is not None else None, note=ours.note,
              runtime=runtime, scale=scale, validity=validity, ours_source=source, **kw)
    return replace(c, claim=f"{c.claim} ({suffix})") if suffix else c


@dataclass(frozen=True)
class Ctx:
    """Everything the figures read: the paper's claims, the sim and live runs, the sim document."""

    pc: PaperClaims
    sim: Runs
    live: Runs
    sim_doc: Any

    def runs(self, runtime: str) -> Runs:
        return self.live if runtime == "live" else self.sim

    def scale(self, runtime: str) -> str:
        return LIVE_SCALE if runtime == "live" else SIM_SCALE


def _missing(runs: Runs, *keys: tuple[str, str]) -> Ours | None:
    """An :class:`Ours` saying why, when one of the runs ``keys`` is not there."""
    for kind, marker in keys:
        if runs.result(kind, marker) is None:
            return Ours(None, None, runs.why_missing(kind, marker))
    return None


# ------------------------------------------------------------------------------ §3.1 setup
def _f1_rate_gbps(runs: Runs, at_ns: float) -> float | None:
    """F1's rate (Gbit/s at the paper's scale) at paper time ``at_ns``: its steps ``f1_rate``."""
    steps = get(runs.result("single", "ecn"), "f1_rate")
    scale = runs.scale("single", "ecn")
    rate = None
    for step in steps if isinstance(steps, list) else []:
        t, bps = num(get(step, 0)), num(get(step, 1))
        if t is not None and bps is not None and t / scale <= at_ns:
            rate = bps * scale / 1e9
    return rate


def _setup_measured(ctx: Ctx) -> dict[str, Ours]:
    sim, doc = ctx.sim, ctx.sim_doc
    res = sim.result("single", "ecn")
    if res is None:  # the configuration counts only with the runs that used it
        return {}
    rate, delay = num(get(doc, "scale", "rate_bps")), num(get(doc, "scale", "delay_ns"))
    flows = get(res, "flows")
    bursters = [k for k in flows if re.fullmatch(r"A\d+", str(k))] if isinstance(flows, dict) else None
    f0 = {k: flow(sim.result(k, "ecn"), "F0", "rate_bps") for k in TITLES}
    f1 = _f1_rate_gbps(sim, 0.0)
    return {
        "setup-link-rate": Ours(None if rate is None else rate / 1e9),
        "setup-link-delay": Ours(None if delay is None else delay / 1e3),
        "setup-pfc-threshold": Ours(XOFF_BYTES / 1e3, note="XOFF of every lossless port (netstack/tcd/paper.py); "
                                                            "XON 288 KB, 10 % below, is our choice"),
        "setup-ecn-kmax": Ours(ECN_K_BYTES / 1e3, note="the ECN baseline's threshold (netstack/tcd/paper.py)"),
        "setup-bursters": Ours(None if bursters is None else float(len(bursters)),
                               note="our burst senders repeat their 64 KB rounds through the bursts, below the "
                                    "line rate on average (docs/tcd.md); the paper's incast is held back by PFC"),
        "setup-burst-duration": Ours(Workload("single").burst_ns / 1e6),
        "setup-f02-single": Ours(None if f0["single"] is None else f0["single"] * sim.scale("single", "ecn") / 1e9,
                                 note="F0's average rate on the wire, first packet to last"),
        "setup-f02-multi": Ours(None if f0["multi"] is None else f0["multi"] * sim.scale("multi", "ecn") / 1e9,
                                note="F0's average rate on the wire: its host honours PFC (a RoCE NIC) and is "
                                     "paused part of the time, so it is below its 25 Gbit/s plan"),
        "setup-f1-initial": Ours(f1, note="our choice: F1 runs at a fixed 12 Gbit/s from the start (docs/tcd.md, "
                                          "'What depends on F1 at 12 Gbit/s'); the paper's F1 starts at line rate "
                                          "under its congestion control"),
    }


SETUP_IDS = ("setup-link-rate", "setup-link-delay", "setup-pfc-threshold", "setup-ecn-kmax", "setup-ib-buffer",
             "setup-ib-threshold", "setup-bursters", "setup-burst-duration", "setup-f02-single", "setup-f02-multi",
             "setup-f1-initial")


def _fig_setup(ctx: Ctx) -> Figure:
    measured = _safe(_setup_measured, SETUP_IDS, ctx)
    rows = []
    for cid in SETUP_IDS:
        ours = measured[cid]
        kind = "multi" if cid == "setup-f02-multi" else "single"
        if cid in ("setup-ib-buffer", "setup-ib-threshold"):
            ours = Ours(None, None, NOT_IB)
        elif ctx.sim.result(kind, "ecn") is None:  # say which run it would have come from
            ours = Ours(None, None, ctx.sim.why_missing(kind, "ecn"))
        measured_run = cid in ("setup-f02-single", "setup-f02-multi", "setup-f1-initial", "setup-bursters")
        rows.append(_row(ctx.pc[cid], ours, runtime="sim" if measured_run else "computed", scale=SIM_SCALE,
                         validity=ctx.sim.validity((kind, "ecn")) if measured_run else CONFIG,
                         source="bench tcd: the scale and the §3.1 runs (tcd-sim)"))
    return Figure("§3.1 setup", "§3.1 simulation setup: the parameters the paper states", tuple(rows),
                  paper_source="§3.1 text", note="Inputs, not results: they show where our setup is the paper's.")


# --------------------------------------------------------------- Fig. 3: single congestion point
ECN_IDS = ("fig3-paused", "fig3-ecn-f0-p2", "fig3-ecn-f1-p2", "fig3-ecn-p1-p0")


def _ecn_marks(runs: Runs) -> dict[str, Ours]:
    """§3.1's ECN mis-marking in the single scenario, from the ECN run's per-port ``flow_marks``."""
    if (miss := _missing(runs, ("single", "ecn"))) is not None:
        return dict.fromkeys(ECN_IDS, miss)
    res = runs.result("single", "ecn")
    pauses = [num(get(res, "ports", p, "pauses")) for p in PORTS3]
    f0, f1 = flow_marks(res, "P2", "F0", "ce"), flow_marks(res, "P2", "F1", "ce")
    f1_packets = flow(res, "F1", "packets")
    p1, p0 = flow_marks(res, "P1", "F1", "ce"), flow_marks(res, "P0", "F1", "ce")
    least = None if None in pauses else min(p for p in pauses if p is not None)
    return {
        "fig3-paused": Ours(least, None if least is None else least > 0,
                            "PAUSEs received by P0 / P1 / P2: " + " / ".join(_n(p) for p in pauses)),
        "fig3-ecn-f0-p2": Ours(f0, None if f0 is None else f0 > 0, f"of F0's {_n(flow(res, 'F0', 'packets'))} packets"),
        "fig3-ecn-f1-p2": Ours(f1, None if f1 is None or f1_packets is None else 0 < f1 < f1_packets,
                               f"partial: of F1's {_n(f1_packets)} packets"),
        "fig3-ecn-p1-p0": Ours(None if p1 is None or p0 is None else min(p1, p0),
                               None if p1 is None or p0 is None else min(p1, p0) > 0,
                               f"F1's CE marks at P1: {_n(p1)}, at P0: {_n(p0)}"),
    }


def _fig3_series(ctx: Ctx) -> dict[str, Ours]:
    sim = ctx.sim
    if (miss := _missing(sim, ("single", "ecn"))) is not None:
        return {"fig3-p2-queue": miss, "fig3-f1-below-15": miss, "fig3-f1-ideal": miss}
    s = series(ctx.sim_doc, "single", "ecn", "P2")
    bs = burst_start_ns(sim, "single", "ecn")
    # F0 and F2 start 0.2 ms after the bursts (docs/tcd.md): "when F0 and F2 start"
    f1 = _f1_rate_gbps(sim, bs + Workload("single").f02_delay_ns)
    load = num(get(sim.run("single", "ecn"), "params", "burst_load"))
    return {
        "fig3-p2-queue": (Ours(None, None, "not measured: no queue series for P2 in the result") if s is None
                          else Ours(max(s.queue) / 1e3)),
        "fig3-f1-below-15": Ours(f1, note="by our choice F1 runs at a fixed 12 Gbit/s (docs/tcd.md, 'What depends on "
                                          "F1 at 12 Gbit/s'): a check of the setup, not a measurement of a congestion "
                                          "control"),
        # computed: the share our bursts leave F1, C x (1 - burst load); the paper's 2.5 is C / 16
        # senders, which only a backlogged incast gives (docs/tcd.md says so)
        "fig3-f1-ideal": Ours(None if load is None else PAPER_RATE_BPS * (1 - load) / 1e9,
                              note=f"the share our bursts ({_n(None if load is None else 100 * load)} % of the line "
                                   "rate on average) leave F1; the paper's incast is backlogged, held by PFC"),
    }


def _fig3_shape(ctx: Ctx) -> Shape:
    """The figure's point: P2, only paused, queues above ECN's K and ECN marks the victim F0 there,
    while TCD marks F0 undetermined and never CE."""
    text = ("P2, only paused by PFC, queues above ECN's K (200 KB), so ECN marks the victim F0 CE there; TCD marks "
            "F0 undetermined (UE), never CE")
    s = series(ctx.sim_doc, "single", "ecn", "P2")
    ecn, tcd = ctx.sim.result("single", "ecn"), ctx.sim.result("single", "tcd")
    f0_ecn, f0_ce, f0_ue = flow_marks(ecn, "P2", "F0", "ce"), flow(tcd, "F0", "ce"), flow(tcd, "F0", "undetermined")
    if s is None or None in (f0_ecn, f0_ce, f0_ue):
        return Shape(text, None, "not measured (the virtual-time runs or their series are missing)")
    holds = max(s.queue) > ECN_K_BYTES and (f0_ecn or 0) > 0 and f0_ce == 0 and (f0_ue or 0) > 0
    return Shape(text, holds, f"P2's queue up to {max(s.queue) / 1e3:.0f} KB; F0 CE at P2 under ECN: {f0_ecn:.0f}; "
                              f"under TCD F0 CE {f0_ce:.0f}, UE {f0_ue:.0f} (virtual time)")


def _fig3(ctx: Ctx) -> Figure:
    series_ours = _safe(_fig3_series, ("fig3-f1-below-15", "fig3-f1-ideal", "fig3-p2-queue"), ctx)
    pc = ctx.pc
    tol = {"fig3-p2-queue": Tolerance(1.0, 2.0),  # "over 500KB": a lower bound; above it by up to 2x
           "fig3-f1-below-15": Tolerance(0.0, 1.0)}  # "drops below 15Gbps": an upper bound
    rows = [_row(pc[cid], series_ours[cid], runtime="computed" if cid == "fig3-f1-ideal" else "sim", scale=SIM_SCALE,
                 validity=CONFIG if cid == "fig3-f1-ideal" else ctx.sim.validity(("single", "ecn")),
                 source="bench tcd: §3.1 single, ECN (tcd-sim)" + (", series" if cid == "fig3-p2-queue" else ""),
                 tolerance=tol.get(cid, WITHIN_2X))
            for cid in ("fig3-f1-below-15", "fig3-f1-ideal", "fig3-p2-queue")]
    for runtime in ("sim", "live"):
        runs = ctx.runs(runtime)
        marks = _safe(_ecn_marks, ECN_IDS, runs)
        for cid in ECN_IDS:
            rows.append(_row(pc[cid], marks[cid], runtime=runtime, scale=ctx.scale(runtime),
                             validity=runs.validity(("single", "ecn")), suffix=runtime,
                             source=f"bench tcd: §3.1 single, ECN marker, per-port flow_marks ({runtime})"))
    rows += [_row(pc[cid], Ours(None, None, NOT_IB), runtime="sim", scale=SIM_SCALE, validity=CONFIG, source="")
             for cid in ("fig3-fecn-p2", "fig3-fecn-p1")]
    return Figure("Fig. 3", "Fig. 3: single congestion point, queue at P2 and the packets marked there", tuple(rows),
                  shape=_fig3_shape(ctx), images=("bench-tcd-fig3.png", "bench-tcd-marks.png"),
                  paper_source="§3.1 text (the paper's Fig. 3 itself was not available)",
                  note="Our F1 runs at a fixed 12 Gbit/s; ECN's mis-marking of F0 depends on it (docs/tcd.md).")


# ------------------------------------------------------------ Fig. 4: multiple congestion points
FIG4_IDS = ("fig4-onoff-cee", "fig4-persistent-queue", "fig4-single-drained", "fig4-same-queue-cee")


def _fig4_measured(ctx: Ctx) -> dict[str, Ours]:
    """From the ECN runs' series at P2 (CEE), in paper time from the bursts' start (§3.1: "bursts
    start at time 0"). Our rules: P2 is OFF in a 5-us sample in which it sent under 1 % of the line
    rate with a queue; "persistent queue accumulation" is a queue that stays above ECN's K (200 KB)
    from P2's last OFF until F0 and F2 stop; "drained out" is a queue down to one MTU; "the same"
    queue evolution is a mean queue within 2x (the report's default tolerance) over the paper's
    window, 1.0-1.5 ms."""
    sim = ctx.sim
    if (miss := _missing(sim, ("single", "ecn"), ("multi", "ecn"))) is not None:
        return dict.fromkeys(FIG4_IDS, miss)
    single, multi = series(ctx.sim_doc, "single", "ecn", "P2"), series(ctx.sim_doc, "multi", "ecn", "P2")
    if single is None or multi is None:
        return dict.fromkeys(FIG4_IDS, Ours(None, None, "not measured: no queue series for P2 in the result"))
    out: dict[str, Ours] = {}
    bs_m, bs_s = burst_start_ns(sim, "multi", "ecn"), burst_start_ns(sim, "single", "ecn")
    off_m, off_s = last_off_ns(multi, PAPER_RATE_BPS), last_off_ns(single, PAPER_RATE_BPS)
    if off_m is not None:
        out["fig4-onoff-cee"] = Ours((off_m - bs_m) / 1e6, note="the end of P2's last OFF; our bursts last 3 ms")
        w = Workload("multi")
        after = window(multi, off_m, bs_m + w.traffic_end_ns - w.warmup_ns)
        if after:
            out["fig4-persistent-queue"] = Ours(min(after) / 1e3, min(after) > ECN_K_BYTES,
                                                "P2's smallest queue from its last OFF until F0 and F2 stop; "
                                                "holds above ECN's K (200 KB)")
    if off_s is not None and (after_s := window(single, off_s, float("inf"))):
        out["fig4-single-drained"] = Ours(min(after_s) / 1e3, min(after_s) <= MTU_BYTES,
                                          "P2's smallest queue after its last OFF; holds at or below one MTU")
    q_m, q_s = window(multi, bs_m + 1.0e6, bs_m + 1.5e6), window(single, bs_s + 1.0e6, bs_s + 1.5e6)
    if q_m and q_s and sum(q_s) > 0:
        mean_m, mean_s = sum(q_m) / len(q_m), sum(q_s) / len(q_s)
        out["fig4-same-queue-cee"] = Ours(mean_m / mean_s, WITHIN_2X.holds(mean_m / mean_s),
                                          f"P2's mean queue 1.0-1.5 ms after the bursts start: {mean_m / 1e3:.0f} KB "
                                          f"(multiple) vs {mean_s / 1e3:.0f} KB (single); holds within 2x")
    return out


def _fig4_shape(m: dict[str, Ours]) -> Shape:
    text = ("P2 goes ON-OFF while P3 is congested; once P3 drains it sends continuously with its queue still "
            "built up (multiple congestion points), where in the single scenario its queue drains")
    parts = [m["fig4-onoff-cee"], m["fig4-persistent-queue"], m["fig4-single-drained"]]
    if any(p.value is None for p in parts):
        return Shape(text, None, "not measured")
    holds = bool(parts[1].check and parts[2].check)
    return Shape(text, holds, f"P2 OFF until {parts[0].value:.2f} ms after the bursts start; then its queue at least "
                              f"{parts[1].value:.0f} KB (multiple); drained to {parts[2].value:.1f} KB (single)")


def _fig4(ctx: Ctx) -> Figure:
    # (a value left out with the runs there: the series showed no OFF period, or no sample after it)
    m = _safe(_fig4_measured, FIG4_IDS, ctx, missing="not measured: P2 was never OFF in the series, or never after")
    rows = [_row(ctx.pc[cid], m[cid], runtime="sim", scale=SIM_SCALE,
                 validity=ctx.sim.validity(("single", "ecn"), ("multi", "ecn")),
                 source="bench tcd: §3.1 ECN runs, P2's queue and sending-rate series (tcd-sim)")
            for cid in FIG4_IDS]
    rows.append(_row(ctx.pc["fig4-rate-10g"], Ours(None, None, (
        "not attempted: our single scenario stops F0 and F2 with the bursts (docs/tcd.md), so P2 carries nothing "
        "once P3 has drained")), runtime="sim", scale=SIM_SCALE, validity=CONFIG, source=""))
    rows += [_row(ctx.pc[cid], Ours(None, None, NOT_IB), runtime="sim", scale=SIM_SCALE, validity=CONFIG, source="")
             for cid in ("fig4-onoff-ib", "fig4-same-queue-ib")]
    return Figure("Fig. 4", "Fig. 4: multiple congestion points, P2's sending rate and queue", tuple(rows),
                  shape=_fig4_shape(m), images=("bench-tcd-fig4.png",),
                  paper_source="§3.1 text (the paper's Fig. 4 itself was not available)",
                  note="Times are from the bursts' start, the paper's time 0; ours run 0.5-3.5 ms, so P3 "
                       "drains later than the paper's 1.6 ms.")


# ------------------------------------------------------------------ §3.2.1: the ternary states
def _covered(runs: Runs) -> Ours:
    """Multiple scenario, TCD: P2's congestion spells after its last undetermined one (the covered
    root emerging), and whether P3's own congestion had ended before the first of them."""
    p2, p3 = timeline(runs, "multi", "P2"), timeline(runs, "multi", "P3")
    if p2 is None or p3 is None:
        return Ours(None, None, "not measured: no state timeline for P2 / P3 in the result")
    undet = [i for i, (_, st) in enumerate(p2) if st == UNDETERMINED]
    if not undet:
        return Ours(0.0, False, "P2 was never undetermined: nothing covered it")
    cong = [t for t, st in p2[undet[-1]:] if st == CONGESTION]
    if not cong:
        return Ours(0.0, False, "P2 did not enter congestion after its last undetermined spell")
    p3_end = [t for (_, a), (t, b) in pairwise(p3) if a == CONGESTION and b != CONGESTION]
    bs = burst_start_ns(runs, "multi", "tcd")
    p3_text = f"{(p3_end[-1] - bs) / 1e6:.2f} ms" if p3_end else "never"
    return Ours(float(len(cong)), bool(p3_end) and p3_end[-1] <= cong[0],
                f"P2 in congestion again at {(cong[0] - bs) / 1e6:.2f} ms after the bursts start; P3 left "
                f"congestion at {p3_text}; holds if P3 left first")


def _states(runs: Runs, kind: str) -> dict[str, Ours]:
    if (miss := _missing(runs, (kind, "tcd"))) is not None:
        return dict.fromkeys(STATE_IDS, miss)
    p3c, p3u = state_ms(runs, kind, "P3", "congestion"), state_ms(runs, kind, "P3", "undetermined")
    leaves = [state_ms(runs, kind, p, "undetermined") for p in PORTS3]
    least = None if None in leaves else min(x for x in leaves if x is not None)
    p0c = state_ms(runs, kind, "P0", "congestion")
    out = {
        "states-p3-congestion": Ours(p3c, None if p3c is None or p3u is None else p3c > 0 and p3u == 0,
                                     f"P3 undetermined {_n(p3u)} ms (never paused: should be 0)"),
        "states-leaves-undetermined": Ours(least, None if least is None else least > 0,
                                           "ms undetermined at P0 / P1 / P2: "
                                           + " / ".join("-" if x is None else f"{x:.2f}" for x in leaves)),
        "states-p0-never": Ours(p0c, None if p0c is None else p0c == 0),
    }
    if kind == "single":
        p2c = state_ms(runs, kind, "P2", "congestion")
        final = get(runs.result(kind, "tcd"), "ports", "P2", "state")
        out["states-isolated"] = Ours(p2c, None if p2c is None else p2c == 0 and final == "non_congestion",
                                      f"P2's state when the traffic ended: {final}")
    else:
        out["states-covered"] = _covered(runs)
    return out


STATE_IDS = ("states-p3-congestion", "states-leaves-undetermined", "states-p0-never", "states-isolated",
             "states-covered")


def _fig_states(ctx: Ctx) -> Figure:
    rows, sim_checks = [], []
    for runtime in ("sim", "live"):
        runs = ctx.runs(runtime)
        for kind in TITLES:
            m = _safe(_states, STATE_IDS, runs, kind)
            for cid in STATE_IDS:
                if (cid == "states-isolated" and kind != "single") or (cid == "states-covered" and kind != "multi"):
                    continue
                rows.append(_row(ctx.pc[cid], m[cid], runtime=runtime, scale=ctx.scale(runtime),
                                 validity=runs.validity((kind, "tcd")), suffix=f"{TITLES[kind]}, {runtime}",
                                 source=f"bench tcd: §3.1 {kind}, TCD marker, time in state / timeline ({runtime})"))
                if runtime == "sim":
                    sim_checks.append(m[cid].check)
    rows.append(_row(ctx.pc["states-overlapped"], Ours(None, None, (
        "not attempted: no scenario builds two overlapping congestion trees (netstack/tcd/scenarios.py has §3.1's "
        "two)")), runtime="sim", scale=SIM_SCALE, validity=CONFIG, source=""))
    text = "congestion only at the roots (P3; P2 once the deeper tree is gone), the leaves P0-P2 undetermined"
    shape = Shape(text, None, "not measured") if None in sim_checks else \
        Shape(text, all(sim_checks), f"{sum(bool(c) for c in sim_checks)} of {len(sim_checks)} checks hold "
                                     "(virtual time)")
    return Figure("§3.2.1", "§3.2.1: the ternary port states (TCD) in §3.1's scenarios", tuple(rows), shape=shape,
                  images=("bench-tcd-states.png",), paper_source="§3.2.1 text, Fig. 5")


# ------------------------------------------------------------------------------ the abstract
def _abstract(runs: Runs) -> dict[str, Ours]:
    """TCD's accuracy (no congestion state at a port that is only paused: P0, P1 in both scenarios,
    P2 in the single one; P3 in congestion in both) and the victims' marks (single: F0 and F2,
    which only cross paused ports, never CE but UE; the contributor F1 CE)."""
    out: dict[str, Ours] = {}
    if (miss := _missing(runs, ("single", "tcd"), ("multi", "tcd"))) is not None:
        out["abs-accurate"] = miss
    else:
        paused = [state_ms(runs, k, p, "congestion") for k, p in
                  (("single", "P0"), ("single", "P1"), ("single", "P2"), ("multi", "P0"), ("multi", "P1"))]
        roots = [state_ms(runs, k, "P3", "congestion") for k in TITLES]
        if None not in paused and None not in roots:
            total = sum(x for x in paused if x is not None)
            out["abs-accurate"] = Ours(total, total == 0 and all((r or 0) > 0 for r in roots),
                                       "P3 in congestion " + " / ".join(f"{r:.2f}" for r in roots if r is not None)
                                       + " ms (single / multiple)")
    if (miss := _missing(runs, ("single", "tcd"))) is not None:
        out["abs-contributors"] = miss
        return out
    tcd, ecn = runs.result("single", "tcd"), runs.result("single", "ecn")
    ce = [flow(tcd, f, "ce") for f in ("F0", "F1", "F2")]
    ue = [flow(tcd, f, "undetermined") for f in ("F0", "F2")]
    if None not in ce and None not in ue:
        victims = (ce[0] or 0) + (ce[2] or 0)
        out["abs-contributors"] = Ours(victims, victims == 0 and all((u or 0) > 0 for u in ue) and (ce[1] or 0) > 0,
                                       f"single scenario, TCD: F0 CE {ce[0]:.0f} / UE {ue[0]:.0f}, F2 CE {ce[2]:.0f} / "
                                       f"UE {ue[1]:.0f}, the contributor F1 CE {ce[1]:.0f}; under ECN F0 CE "
                                       f"{_n(flow(ecn, 'F0', 'ce'))}")
    return out


def _fct_rows(ctx: Ctx) -> tuple[list[Claim], Shape]:
    """The abstract's FCT gains against every variant of the FCT section (the abstract names no
    workload or congestion control)."""
    doc, text = ctx.sim_doc, "cc + TCD lowers the FCT slowdown: ratio cc / cc+TCD above 1 at the median and p99"
    # --quick's FCT section (6 tiny flows a seed) is a smoke test, not the comparison: never a number here
    quick = get(doc, "quick") is True
    variants = [] if quick else fct_variants(doc)
    why = (NO_SIM if doc is None else
           "not measured in --quick: the FCT comparison needs about 5-10 min at its smallest meaningful size; run "
           "--full" if quick else "not measured: the FCT section did not run")
    if not variants:
        return [_row(ctx.pc[cid], Ours(None, None, why), runtime="sim", scale=FCT_SCALE, validity=CONFIG, source="")
                for cid in ("abs-fct-median", "abs-fct-p99")], Shape(text, None, "not measured")
    rows = []
    for v in variants:
        for cid, q in (("abs-fct-median", "median"), ("abs-fct-p99", "p99")):
            base, tcd = v.slowdowns[q]
            ci = v.ci95[q]
            note = (f"{_n(v.flows)} flows, seeds {', '.join(map(str, v.seeds))}; slowdown {_n(base)} (cc) vs "
                    f"{_n(tcd)} (cc+TCD); 95 % interval {ci if ci else '-'}")
            rows.append(_row(ctx.pc[cid], Ours(v.ratio[q], note=note), runtime="sim", scale=FCT_SCALE,
                             validity=v.validity(), suffix=v.name,
                             source=f"bench tcd: FCT section, {v.name}, ratio of all flows (tcd-sim)"))
    ratios = [v.ratio[q] for v in variants for q in ("median", "p99")]
    if None in ratios:
        return rows, Shape(text, None, "not measured")
    return rows, Shape(text, all((r or 0) > 1 for r in ratios),
                       "; ".join(f"{v.name}: {v.ratio['median']:.2f}x / {v.ratio['p99']:.2f}x" for v in variants))


def _fig_abstract(ctx: Ctx) -> list[Figure]:
    rows = []
    for runtime in ("sim", "live"):
        runs = ctx.runs(runtime)
        m = _safe(_abstract, ("abs-accurate", "abs-contributors"), runs)
        for cid in ("abs-accurate", "abs-contributors"):
            keys = (("single", "tcd"), ("multi", "tcd")) if cid == "abs-accurate" else (("single", "tcd"),)
            rows.append(_row(ctx.pc[cid], m[cid], runtime=runtime, scale=ctx.scale(runtime),
                             validity=runs.validity(*keys), suffix=runtime,
                             source=f"bench tcd: §3.1, TCD marker, states and receivers' marks ({runtime})"))
    fct, shape = _fct_rows(ctx)
    return [Figure("Abstract", "Abstract: TCD detects congested ports and tells contributors from victims",
                   tuple(rows), images=("bench-tcd-marks.png", "bench-tcd-states.png"), paper_source="abstract",
                   note="Measured in §3.1's scenarios: the paper's own evaluation (§5) was not available."),
            Figure("Abstract: FCT", "Abstract: FCT slowdown, cc vs cc + TCD", tuple(fct), shape=shape,
                   images=("bench-tcd-fct.png",), paper_source="abstract (3.3x median, 2.0x p99)",
                   note="Our fabric, workloads and incast are our choices (docs/tcd.md, 'What the fabric gives').")]


# ------------------------------------------------------------------------------------ the paper
def figures(results: Results) -> list[Figure]:
    """The paper's figures with ours beside each claim; never raises on a missing or odd document."""
    sim_doc, live_doc = results.get(SIM), results.get(LIVE)
    sim_doc = sim_doc if isinstance(sim_doc, Mapping) else None
    live_doc = live_doc if isinstance(live_doc, Mapping) else None
    ctx = Ctx(load("tcd"), scenario_runs(sim_doc, "sim", NO_SIM), scenario_runs(live_doc, "live", NO_LIVE), sim_doc)
    return [_fig_setup(ctx), _fig3(ctx), _fig4(ctx), _fig_states(ctx), *_fig_abstract(ctx)]


PAPER = PaperSpec(
    name="tcd",
    title="Congestion Detection in Lossless Networks (TCD, SIGCOMM 2021)",
    experiments=(
        # quick: 9 s here (2026-12-07, load ~3); full: docs/tcd.md's `--only fct` took 5 min 18 s with
        # two workers on a quieter machine, the scenarios 9 s more
        Experiment("tcd", key=SIM, quick=("--quick", "--only", "scenarios"), full=(), workers=True,
                   quick_minutes=0.2, full_minutes=6.0,
                   what="§3.1's single and multiple congestion point scenarios, ECN and TCD, at the paper's "
                        "40 Gbit/s in virtual time; --full adds the FCT comparison on a leaf-spine fabric"),
        # four live runs, one at a time: 58 s here (2026-12-07)
        Experiment("tcd", key=LIVE, quick=("--only", "live", "--live"), full=("--only", "live", "--live"),
                   needs_root=True, quick_minutes=1.0, full_minutes=1.0,
                   what="§3.1's two scenarios, ECN and TCD, on the live testbed at 1/1000 of the paper's rates"),
    ),
    figures=figures,
    summary=(
        "Under PFC a switch port is switched ON and OFF by its downstream neighbour, so its queue no longer says "
        "whether it is congested: the paper shows (§3.1, Figs. 3-4) that ECN marks flows at ports that are only "
        "paused, and defines three port states (§3.2.1), congestion, non-congestion and undetermined, so that end "
        "hosts can tell the flows that cause congestion from those that only suffer it; its abstract claims 3.3x "
        "(median) and 2.0x (p99) better FCT slowdown with TCD. netstack runs §3.1's two scenarios at the paper's "
        "40 Gbit/s in virtual time and at 1/1000 scale on the live testbed, with the ECN baseline and with TCD, "
        "and (--full) the FCT comparison on its own leaf-spine fabric. The paper's §4-§5 were not available: "
        "the detector's details, the end hosts' reactions and the FCT setup are our choices (docs/tcd.md), and "
        "InfiniBand is not modelled."),
    data_sources=("docs/data/tcd-paper/claims.toml", "docs/data/tcd-paper/SOURCE.md"),
)

__all__ = ["LIVE", "PAPER", "SIM", "figures"]
