"""What ``netstack ui`` lets a page with the token change, each request checked before anything
changes: a link down or up (``netstack link``), an impairment set or cleared (``netstack impair``)
and a protocol's link actions (``netstack lg enable``: the protocols' ``ui`` modules offer them).

Each function takes the request's JSON body, raises :class:`UIInputError` (a 400 with its
message) for one that is not well formed, and carries it out through the library function the
CLI calls: nothing here re-implements a protocol or shells out. Blocking: the server runs them in
a thread, one at a time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from .. import runtime
from . import UIInputError

#: the longest text a request may give for a name or a direction
MAX_FIELD = 64


def _text(body: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    value = body.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_FIELD:
        raise UIInputError(f"{key!r} must be a non-empty string of at most {MAX_FIELD} characters")
    return value


def _link(state: runtime.RunState, body: Mapping[str, Any]) -> str:
    link = _text(body, "link")
    if link is None or link not in state.links:
        raise UIInputError(f"no link {link!r} in testbed {state.prefix}; links: {', '.join(state.links)}")
    return link


def _probability(body: Mapping[str, Any], key: str) -> float:
    value = body.get(key, 0.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise UIInputError(f"{key!r} must be a number from 0 to 1 (a fraction of frames), not {value!r}")
    return float(value)


def set_link(prefix: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``{"link", "action": "down" | "up", "end"?: "A" | "B" | a node | "both"}``: ``netstack link``."""
    from .. import faults

    link = _link(runtime.load_state(prefix), body)
    action = body.get("action")
    if action not in ("down", "up"):
        raise UIInputError(f"'action' must be \"down\" or \"up\", not {action!r}")
    end = _text(body, "end", "both") or "both"
    try:
        faults.link_ports(faults.run_state(prefix), link, end)  # a bad end fails before any change
    except faults.FaultError as exc:
        raise UIInputError(str(exc)) from None
    return faults.set_link(prefix, link, action == "up", end)


def impair(prefix: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """``{"link", "corrupt"?, "loss"?, "direction"?, "clear"?}``: ``netstack impair`` with the
    backend it picks by itself."""
    from ..impairctl import Impair, impair_link

    link = _link(runtime.load_state(prefix), body)
    clear = body.get("clear", False)
    if not isinstance(clear, bool):
        raise UIInputError(f"'clear' must be true or false, not {clear!r}")
    corrupt, loss = _probability(body, "corrupt"), _probability(body, "loss")
    if not clear and corrupt == 0 and loss == 0:
        raise UIInputError("give 'corrupt' or 'loss' above 0, or 'clear': true")
    direction = _text(body, "direction")
    done = impair_link(prefix, link, direction, Impair(corrupt=corrupt, loss=loss, clear=clear))
    return {"link": link, "ends": done}


def protocol_action(prefix: str, body: Mapping[str, Any], mods: Mapping[str, ModuleType]) -> dict[str, Any]:
    """``{"link", "action": "<protocol>:<action>"}``: an action a protocol's ``ui`` module offers
    on that link (``link_actions``), carried out by its ``link_action``."""
    state = runtime.load_state(prefix)
    link = _link(state, body)
    ident = _text(body, "action") or ""
    proto, _, action = ident.partition(":")
    mod = mods.get(proto)
    offered = mod.link_actions(state, link) if mod is not None and hasattr(mod, "link_actions") else {}
    if action not in offered:
        known = [f"{p}:{a}" for p, m in mods.items() if hasattr(m, "link_actions") for a in m.link_actions(state, link)]
        raise UIInputError(f"no action {ident!r} on link {link}; offered: {', '.join(known) or 'none'}")
    result = mod.link_action(prefix, link, action)  # type: ignore[union-attr]
    return {"link": link, "action": ident, "result": result}


__all__ = ["impair", "protocol_action", "set_link"]
