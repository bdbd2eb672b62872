"""1Pipe's part of ``netstack ui`` (the view contract: netstack/ui/__init__.py).

Per switch port with 1Pipe on, from 1Pipe's part of the daemon's ``status`` (``protocols.onepipe``,
:func:`netstack.onepipe.control.switch_status`): each input's barrier register ``R`` (1Pipe §4: the
switch forwards the minimum over its live inputs), shown as its progress (milliseconds of
barrier per second: ~1000 while the input keeps up, 0 when it is stuck), whether it is live,
silent or held (§6; held: reliable 1Pipe's commit side, §5), and each output's barrier. The
port's state is its worst input's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

NS_PER_MS = 1_000_000


def _input_state(inp: Mapping[str, Any]) -> str:
    if inp.get("held"):
        return "held"
    return "live" if inp.get("live") else "silent"


def port_view(port: Mapping[str, Any]) -> dict[str, Any]:
    """One port's view from its part of ``switch_status`` (``direction``, ``inputs``, ``outputs``)."""
    rows: list[list[Any]] = [["direction", f"{port.get('direction')} ({port.get('role')})"]]
    rates: dict[str, int] = {}
    states = []
    for key, inp in sorted((port.get("inputs") or {}).items()):
        state = _input_state(inp)
        states.append(state)
        silent = inp.get("silent_ns")
        heard = f", heard {silent / NS_PER_MS:.1f} ms ago" if silent is not None else ", never heard"
        rows.append([f"input {key}", state + heard])
        if isinstance(inp.get("r"), int):
            rates[f"barrier of {key} (ms)"] = inp["r"] // NS_PER_MS
    for key, out in sorted((port.get("outputs") or {}).items()):
        barrier = out.get("barrier")
        rows.append([f"output {key}", "frozen (a joining input, §4)" if out.get("frozen")
                     else "no barrier yet" if barrier is None else "sending barriers"])
        if isinstance(barrier, int):
            rates[f"barrier to {key} (ms)"] = barrier // NS_PER_MS
    worst = "held" if "held" in states else "silent" if "silent" in states else "live" if states else None
    view: dict[str, Any] = {"title": "1Pipe barriers", "rows": rows, "rates": rates}
    if worst is not None:
        view["state"] = {"value": worst, "label": f"inputs {worst}" if worst != "live" else "inputs live",
                         "tone": {"live": "ok", "silent": "warn", "held": "bad"}[worst]}
    return view


def port_views(kind: str, status: Mapping[str, Any], ask: Callable[..., Any]) -> dict[str, list[dict[str, Any]]]:
    """Every port of a switch running 1Pipe: ``{port: [its barrier view]}``."""
    report = (status.get("protocols") or {}).get("onepipe") or {}
    return {port: [port_view(p)] for port, p in (report.get("ports") or {}).items()}


__all__ = ["port_view", "port_views"]
