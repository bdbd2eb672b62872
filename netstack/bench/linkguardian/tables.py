"""The Markdown tables of ``netstack bench linkguardian``: one per figure, the live cross-check,
and the issue's targets with their verdicts."""

from __future__ import annotations

import math
from typing import Any

from ..output import format_table
from .params import label


def _e(x: float | None, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}e}"


def _ci(ci: list[float]) -> str:
    return f"[{_e(ci[0])}, {_e(ci[1])}]"


def _f1(x: float | None) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.1f}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.2%}"


def fig8_tables(f8: dict[str, Any]) -> tuple[str, str]:
    rows = []
    for r in f8["loss"]:
        e = r["effective"]
        n = r["copies"]
        retx = f"{r['copies_lost']} / {r['copies_sent']:,}" if "copies_sent" in r else "-"
        rows.append([f"{r['nominal_loss']:g}", label(r["mode"]), r["harness"], "-" if n is None else n,
                     f"{e['frames']:,}", _e(r["actual_loss"]), retx, e["lost"], _e(e["rate"]), _ci(e["ci95"]),
                     _e(r["theory"]), "yes" if r["theory_in_ci"] else "NO", f"{r['p_value']:.3g}"])
    loss = format_table(["actual", "mode", "harness", "N", "frames", "measured actual", "copies lost / sent", "lost",
                         "effective loss",
                         "95% CI", "theory actual^(N+1)", "theory in CI", "p (exact test)"], rows)
    rows = []
    for r in f8["speed"]:
        e = r["effective"]
        rows.append([f"{r['nominal_loss']:g}", label(r["mode"]), "-" if r["copies"] is None else r["copies"],
                     f"{r['delay_ns'] / 1e6:g}", r["frame_size"], f"{e['frames']:,}", _e(r["actual_loss"]),
                     f"{e['lost']} ({_e(e['rate'])})", _ci(e["ci95"]), f"{r['goodput_bps'] / 1e6:.2f}",
                     _pct(r["speed_vs_line"]), _pct(r["speed_vs_lossless"]), r.get("pauses_sent", "-"),
                     r.get("timeouts", "-")])
    speed = format_table(["actual", "mode", "N (Eq. 2)", "delay ms", "frame B", "frames", "measured actual",
                          "lost (effective)", "95% CI", "goodput Mbit/s", "vs line rate", "vs lossless", "pauses",
                          "ackNoTimeouts"], rows)
    return loss, speed


def live_table(lc: dict[str, Any]) -> str:
    rows = []
    for name, where in (("live", "live (switch daemons, nft)"), ("sim", "virtual time (netstack.sim)")):
        sm = lc[name + "_summary"]
        e = sm["effective"]
        ro = sm["reordered"]
        rows.append([where, f"{lc['nominal_loss']:g}", lc["copies"], f"{e['frames']:,}", _e(sm["actual_loss"]),
                     e["lost"], _e(e["rate"]), _ci(e["ci95"]), _e(sm["theory"]), "yes" if sm["theory_in_ci"] else "NO",
                     f"{ro['lost']} {_ci(ro['ci95'])}", sm.get("holes", "-"), sm.get("timeouts", "-")])
    return format_table(["where", "actual", "N", "frames", "measured actual", "lost", "effective loss", "95% CI",
                         "theory actual^(N+1)", "theory in CI", "reordered (95% CI)", "holes", "ackNoTimeouts"], rows)


def fig9_table(f9: dict[str, Any]) -> str:
    rows = []
    for r in f9["runs"]:
        ph = r["phases"]
        rt = r["tcp_retransmissions"]
        rx = r["receiver"]
        b = ph["before"]["mean_mbps"]
        lg_vs = ph["lg"]["mean_mbps"] / b if b and not math.isnan(b) else None
        qd = r["sw1_queue_drops"]
        k = r.get("recirc_factor", 1)
        rows.append(["on" if r["backpressure"] else "off", "link" if k == 1 else f"{k}x link", r["copies"],
                     _f1(ph["before"]["mean_mbps"]),
                     _f1(ph["corrupting"]["mean_mbps"]), _f1(ph["lg"]["mean_mbps"]), _pct(lg_vs),
                     f"{rt['corrupting_without_lg']} / {qd['corrupting_without_lg']}",
                     f"{rt['with_lg']} / {qd['with_lg']}", rx.get("holes_detected"), rx.get("timeouts"),
                     rx.get("pauses_sent"), rx.get("reorder_drops"), rx.get("reorder_buffer_max_bytes"),
                     r.get("reorder_buffer_limit_bytes")])
    return format_table(["backpressure", "recirculation port", "N", "Mbit/s before corruption",
                         "Mbit/s corrupting", "Mbit/s with LG", "LG / lossless",
                         "TCP retx / sw1 queue drops, corrupting",
                         "TCP retx / sw1 queue drops, with LG", "holes", "ackNoTimeouts", "pauses sent",
                         "reorder drops", "peak reorder B", "reorder limit B"], rows)


def fig10_table(f10: dict[str, Any]) -> str:
    rows = []
    for p in f10["phases"]:
        f = p["fct_us"]
        rows.append([p["phase"], f"{p['corrupt']:g}", _e(p["actual_loss"]), "-" if p["copies"] is None else p["copies"],
                     f"{p['flows']:,}", f"{f['p50'] / 1e3:.2f}", f"{f['p99'] / 1e3:.2f}", f"{f['p99.9'] / 1e3:.2f}",
                     f"{f['p100'] / 1e3:.1f}", f"{p['p999_vs_lossless']:.2f}x" if p["p999_vs_lossless"] else
                     "INVALID run" if p.get("valid") is False else "-"])
    return format_table(["phase", "corruption", "measured actual", "N", "flows", "p50 ms", "p99 ms", "p99.9 ms",
                         "max ms", "p99.9 / lossless"], rows)


def targets_table(targets: list[dict[str, Any]]) -> str:
    rows = []
    for t in targets:
        v = t["value"]
        if isinstance(v, float):
            v = f"{v:.2%}" if "speed" in t["what"] else f"{v:.2f}"
        tg = t["target"]
        if isinstance(tg, float):
            tg = f">= {tg:.0%}" if "speed" in t["what"] else f"<= {tg:g}x"
        rows.append([t["what"], KINDS.get(t.get("kind", "goal"), ""), v, tg, verdict(t)])
    return format_table(["target", "kind", "measured", "target value", "verdict"], rows)


#: a target's kind: a correctness cross-check (its failure is an error: exit 1) or a performance goal
KINDS = {"check": "cross-check", "goal": "goal"}


def verdict(t: dict[str, Any]) -> str:
    if t["met"] is None:
        return "not judged (invalid run)"
    return "met" if t["met"] else "NOT met"

