"""The protocols' per-port views, found through the registry, and the checks each view passes.

Every protocol with a ``ui`` module in ``netstack.protocols`` contributes (the contract is the
package docstring); this module names none of them. A view module that fails (its daemon
refused a command, an answer of another version) costs its own view only: the poll goes on and
the page shows the error in the view's place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from .. import protocols
from ..errors import NetstackError

#: ask(cmd, **args): another control request to the daemon a view is made for
Ask = Callable[..., Any]
#: the tones a state may have, and what the page colours them as (docs/ui.md)
TONES = ("ok", "warn", "bad", "off")
#: the link marks a view may set
LINK_MARKS = ("protected",)
#: the longest text a view may put in one cell (a runaway answer must not flood the page)
MAX_TEXT = 200


def modules() -> dict[str, ModuleType]:
    """Protocol name -> its ``ui`` module, for every protocol that registers one (in registry order)."""
    return {p.name: protocols.load(p.ui) for p in protocols.PROTOCOLS if p.ui}


def port_views(mods: Mapping[str, ModuleType], kind: str, status: Mapping[str, Any],
               ask: Ask) -> dict[str, list[dict[str, Any]]]:
    """Every protocol's views of one daemon's ports: ``{port: [view, ...]}`` (``""``: the node),
    each view checked (:func:`clean`) and tagged with its protocol."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, mod in mods.items():
        try:
            found = mod.port_views(kind, status, ask)
        except (NetstackError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            out.setdefault("", []).append({"protocol": name, "title": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        for port, views in (found or {}).items():
            for view in views:
                out.setdefault(str(port), []).append({"protocol": name, **clean(view)})
    return out


def _text(value: Any) -> Any:
    """A cell: a finite number, a bool, None, or text cut to :data:`MAX_TEXT`."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value if math.isfinite(value) else str(value)
    return str(value)[:MAX_TEXT]


def _number(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else None


def clean(view: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a view the page knows, each of the type it expects; anything else dropped."""
    out: dict[str, Any] = {"title": str(view.get("title") or "?")[:MAX_TEXT]}
    rows = view.get("rows") or []
    out["rows"] = [[str(r[0])[:MAX_TEXT], _text(r[1])] for r in rows if isinstance(r, list | tuple) and len(r) == 2]
    rates = view.get("rates") or {}
    out["rates"] = {str(k)[:MAX_TEXT]: v for k, v in rates.items() if _number(v) is not None}
    state = view.get("state")
    if isinstance(state, Mapping) and state.get("value") is not None:
        tone = state.get("tone")
        out["state"] = {"value": str(state["value"])[:MAX_TEXT], "label": str(state.get("label") or state["value"]),
                        "tone": tone if tone in TONES else "off"}
    gauge = view.get("gauge")
    if isinstance(gauge, Mapping) and _number(gauge.get("value")) is not None:
        out["gauge"] = {"label": str(gauge.get("label") or "")[:MAX_TEXT], "value": gauge["value"],
                        "max": _number(gauge.get("max")), "unit": str(gauge.get("unit") or "")[:20]}
    if view.get("link") in LINK_MARKS:
        out["link"] = view["link"]
    if view.get("error"):
        out["error"] = str(view["error"])[:MAX_TEXT]
    return out


def link_actions(mods: Mapping[str, ModuleType], state: Any, link: str) -> list[dict[str, str]]:
    """The protocols' actions on ``link``: ``[{"id": "<protocol>:<action>", "label"}]``."""
    out = []
    for name, mod in mods.items():
        offer = getattr(mod, "link_actions", None)
        if offer is None:
            continue
        for action, label in offer(state, link).items():
            out.append({"id": f"{name}:{action}", "label": str(label)})
    return out


__all__ = ["Ask", "LINK_MARKS", "TONES", "clean", "link_actions", "modules", "port_views"]
