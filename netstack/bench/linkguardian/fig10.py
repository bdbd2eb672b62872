"""Fig. 10 live: flow completion times of single-packet (143 B) TCP request/response flows.

Four phases on one testbed: lossless, corrupting without LinkGuardian, LG, LG_NB; the target
is LG's 99.9th percentile within ``TARGET_FCT_RATIO`` of lossless's.
"""

from __future__ import annotations

from typing import Any

from ..output import Progress
from .params import (
    FIG10_CORRUPT,
    FIG10_PHASES,
    FIG10_SIZE,
    FIG10_WHY,
    H2_IP,
    LINK,
    LIVE_TCP_CC,
    SENDER,
    TARGET_FCT_RATIO,
    Sizes,
)
from .testbed import RX_KEYS, TX_KEYS, counter_delta, lg_counters, link_counts, testbed


def run_fig10(prefix: str, sizes: Sizes, say: Progress) -> dict[str, Any]:
    from ...experiment import LagWindow, diff, finish_tool, run_tool, start_tool
    from ...linkguardian.control import disable_link, enable_link
    from ...topo import impair
    from ...validity import Validity

    flows = sizes.flows
    phases: list[dict[str, Any]] = []
    say(f"fig10: bringing up the default topology (prefix {prefix})")
    with testbed(prefix, say) as (state, _tcp_cc):
        ns_sw1 = state.namespaces["sw1"]
        for name, corrupt, mode in FIG10_PHASES:
            if corrupt:
                impair.apply_impairment(prefix, ns_sw1, SENDER[1], corrupt=corrupt, backend="auto")
            else:
                impair.clear_impairment(prefix, ns_sw1, SENDER[1])
            params: dict[str, Any] = {}
            if mode:
                params = enable_link(prefix, LINK, mode=mode, actual=corrupt)["params"]
            rx0, tx0 = lg_counters(prefix)
            link0 = link_counts(prefix)
            say(f"fig10: [{name}] {flows:,} single-packet ({FIG10_SIZE} B) TCP request/response flows h1 -> h2 ...")
            server = start_tool(state, "h2", "rr-server", "--size", str(FIG10_SIZE))
            lag = LagWindow(prefix).start()
            rr = run_tool(state, "h1", "rr-client", "--dst", H2_IP, "--flows", str(flows), "--size", str(FIG10_SIZE),
                          "--progress", str(max(1, flows // 4)), progress=True)
            lag.stop()
            lag.add_tool("h1 rr-client", rr)
            lag.add_tool("h2 rr-server", finish_tool(server))
            # an FCT tail is the network's only if no process waited for the CPU meanwhile
            v = Validity()
            v.planned("flows completed", int(rr["flows"]), flows, share=1.0)
            lag.check(v)
            link = diff(link_counts(prefix), link0)
            rx1, tx1 = lg_counters(prefix)
            if mode:
                disable_link(prefix, LINK)
            fct = rr["fct_us"]
            phases.append({"phase": name, "corrupt": corrupt, "mode": mode, "copies": params.get("n_copies"),
                           "flows": rr["flows"], "fct_us": fct, "link": link,
                           "actual_loss": link["fcs_drops"] / link["sent"] if link["sent"] else 0.0,
                           "receiver": counter_delta(rx1, rx0, RX_KEYS) if mode else None,
                           "sender": counter_delta(tx1, tx0, TX_KEYS) if mode else None, **v.to_dict()})
            say(f"fig10: [{name}] p50 {fct['p50'] / 1e3:.2f} ms, p99 {fct['p99'] / 1e3:.2f} ms, "
                f"p99.9 {fct['p99.9'] / 1e3:.2f} ms, max {fct['p100'] / 1e3:.1f} ms")
    _ratios(phases)
    lg = next(p for p in phases if p["mode"] == "blocking")
    nb = next(p for p in phases if p["mode"] == "nb")
    targets = [_fct_target(f"Fig. 10: LG 99.9th-percentile FCT within {TARGET_FCT_RATIO:g}x of lossless", lg),
               _fct_target(f"Fig. 10 (for reference): LG_NB 99.9th-percentile FCT within {TARGET_FCT_RATIO:g}x of "
                           "lossless", nb)]
    return {"corrupt": FIG10_CORRUPT, "why_this_rate": FIG10_WHY, "size_bytes": FIG10_SIZE, "flows": flows,
            "tcp_cc": LIVE_TCP_CC, "phases": phases, "targets": targets}


def _ratios(phases: list[dict[str, Any]]) -> None:
    """Each phase's FCT percentiles against the lossless phase's; None where either run was
    invalid (starved: netstack.validity), which the tables then list instead of a ratio."""
    base = phases[0]
    ok_base = base.get("valid", True)
    for p in phases:
        ok = ok_base and p.get("valid", True)
        for q, key in (("p99.9", "p999_vs_lossless"), ("p99", "p99_vs_lossless")):
            b = base["fct_us"].get(q)
            p[key] = p["fct_us"][q] / b if ok and b else None


def _fct_target(what: str, phase: dict[str, Any]) -> dict[str, Any]:
    """A performance goal (kind "goal"): reported, never an error; not judged on an invalid run."""
    value = phase["p999_vs_lossless"]
    return {"what": what, "kind": "goal", "value": value, "target": TARGET_FCT_RATIO,
            "met": value <= TARGET_FCT_RATIO if value is not None else None}
