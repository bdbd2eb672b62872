"""DTA's part of ``netstack ui`` (the view contract: netstack/ui/__init__.py).

The translator, on the port of the collector's ToR that faces the collector (``dta_status``):
its ingest (reports per second, DTA §5: each becomes RoCEv2 requests to the collector) and its
output window (ours, docs/dta.md "Output window": at most ``window`` un-acknowledged requests per
queue pair; the gauge shows the busiest QP), with what the window dropped and its time-outs. The
collector node (its daemon's ``status``): the RDMA writes and atomics it executed per second.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

SWITCH = "switch"
COLLECTOR = "collector"


def translator_view(st: Mapping[str, Any]) -> dict[str, Any]:
    c = st.get("counters") or {}
    outstanding = max((q.get("outstanding", 0) for q in (c.get("qps") or {}).values()), default=0)
    return {"title": "DTA translator",
            "rows": [["collector", st.get("collector")], ["dropped by the window", c.get("window_dropped")],
                     ["window time-outs", c.get("window_timeouts")], ["in grace period", st.get("in_grace")]],
            "rates": {"ingest (reports)": c.get("reports", 0), "RoCEv2 requests": c.get("roce_frames", 0)},
            "gauge": {"label": "output window, busiest QP", "value": outstanding,
                      "max": (st.get("config") or {}).get("window") or None, "unit": "requests"}}


def collector_view(status: Mapping[str, Any]) -> dict[str, Any]:
    regions = status.get("regions") or {}
    writes = sum(r.get("writes", 0) for r in regions.values())
    atomics = sum(r.get("atomics", 0) for r in regions.values())
    return {"title": "DTA collector",
            "rows": [["responses sent", status.get("responses_sent")], ["kernel drops", status.get("kernel_drops")]],
            "rates": {"RDMA writes": writes, "atomics": atomics}}


def port_views(kind: str, status: Mapping[str, Any], ask: Callable[..., Any]) -> dict[str, list[dict[str, Any]]]:
    """The translator's port of a switch that runs one; the collector as a node (``""``)."""
    if kind == COLLECTOR:
        return {"": [collector_view(status)]}
    if kind != SWITCH:
        return {}
    st = ask("dta_status", quiet=True) or {}
    return {st["port"]: [translator_view(st)]} if st.get("enabled") else {}


__all__ = ["collector_view", "port_views", "translator_view"]
