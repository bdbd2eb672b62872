"""TCD's part of ``netstack ui`` (the view contract: netstack/ui/__init__.py).

Per switch port with a marker, from TCD's part of the daemon's ``status`` (``protocols.tcd``,
:func:`netstack.tcd.control.switch_status`): the port's ternary state (TCD §3.2: *congestion*,
*non-congestion* or *undetermined*, the most severe of its classes), coloured, with the page's
timeline of the last minute; the time spent in each state and the marks it set (UE: crossed an
undetermined port, CE: congestion; the codepoints are ours, docs/wire-formats.md). An ECN marker
(the §3.1 baseline) shows its marks only: it has no state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: a state's tone on the page: congestion red, undetermined amber, non-congestion green
TONES = {"non_congestion": "ok", "undetermined": "warn", "congestion": "bad"}
LABELS = {"non_congestion": "non-congestion", "undetermined": "undetermined", "congestion": "congestion"}


def port_view(report: Mapping[str, Any]) -> dict[str, Any]:
    """One port's view from its ``switch_status`` report (``{"marker", "state", "counters"}``)."""
    c = report.get("counters") or {}
    marks = {"UE marks": c.get("marked_ue", 0), "CE marks": c.get("marked_ce", 0)}
    if report.get("marker") == "ecn":
        return {"title": "ECN marker", "rates": marks}
    state = report.get("state")
    times = " / ".join(str(c.get(k, 0)) for k in ("t_noncon_ms", "t_undet_ms", "t_cong_ms"))
    view: dict[str, Any] = {"title": "TCD", "rates": marks,
                            "rows": [["class", c.get("class")],
                                     ["ms non-congestion / undetermined / congestion", times],
                                     ["state changes", c.get("transitions")], ["pauses seen", c.get("pauses")]]}
    # no state before the first frame of a lossless class has made a detector
    view["state"] = ({"value": state, "label": LABELS.get(state, state), "tone": TONES.get(state, "off")} if state
                     else {"value": "idle", "label": "no traffic yet", "tone": "off"})
    return view


def port_views(kind: str, status: Mapping[str, Any], ask: Callable[..., Any]) -> dict[str, list[dict[str, Any]]]:
    """Every marked port of a switch: ``{port: [its TCD (or ECN) view]}``."""
    report = (status.get("protocols") or {}).get("tcd") or {}
    return {port: [port_view(r)] for port, r in (report.get("ports") or {}).items()}


__all__ = ["LABELS", "TONES", "port_view", "port_views"]
