"""LinkGuardian's part of ``netstack ui`` (the view contract: netstack/ui/__init__.py).

Per switch port with LinkGuardian on, from the daemon's ``lg_status``: a sender's repairs (the
N copies it sends of each frame the receiver reports lost, LinkGuardian §3.4) and its Tx buffer
(the copies kept until the receiver's leading ACK frees them, §3.1); a receiver's holes, the holes
it filled, its ackNoTimeout expiries (§3.5) and its reordering buffer (blocking mode, §3.3). Either end marks
the link protected. Links between two switches offer ``lg enable`` / ``disable``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..runtime import RunState

SWITCH = "switch"


def _name(params: Mapping[str, Any]) -> str:
    return "LinkGuardianNB" if params.get("mode") == "nb" else "LinkGuardian"


def _gauge(label: str, c: Mapping[str, Any], used: str, frames: str, limit: Any) -> dict[str, Any]:
    return {"label": f"{label} ({c.get(frames, 0)} frames)", "value": c.get(used, 0), "max": limit, "unit": "B"}


def sender_view(st: Mapping[str, Any]) -> dict[str, Any]:
    c, p = st.get("counters") or {}, st.get("params") or {}
    return {"title": f"{_name(p)} sender", "link": "protected" if st.get("enabled") else None,
            "rows": [["copies N", p.get("n_copies")], ["loss notifications", c.get("loss_notifications_rx")],
                     ["Tx buffer peak", f"{c.get('tx_buffer_max_bytes', 0)} B"],
                     ["paused by the receiver", c.get("paused_now")]],
            "rates": {"protected frames": c.get("protected_frames", 0),
                      "repairs (retransmitted copies)": c.get("retransmissions", 0)},
            "gauge": _gauge("Tx buffer", c, "tx_buffer_bytes", "tx_buffer_frames", p.get("tx_buffer_limit_bytes"))}


def receiver_view(st: Mapping[str, Any]) -> dict[str, Any]:
    c, p = st.get("counters") or {}, st.get("params") or {}
    return {"title": f"{_name(p)} receiver", "link": "protected" if st.get("enabled") else None,
            "rows": [["holes detected", c.get("holes_detected")], ["ackNoTimeout expiries", c.get("timeouts")],
                     ["open holes", c.get("open_holes")], ["pauses sent", c.get("pauses_sent")]],
            "rates": {"delivered": c.get("delivered", 0), "holes filled (repaired)": c.get("holes_filled", 0)},
            "gauge": _gauge("reordering buffer", c, "reorder_buffer_bytes", "reorder_buffer_frames",
                            p.get("reorder_buffer_limit_bytes"))}


def port_views(kind: str, status: Mapping[str, Any], ask: Callable[..., Any]) -> dict[str, list[dict[str, Any]]]:
    """Every LinkGuardian end of a switch: ``{port: [sender and/or receiver view]}``."""
    if kind != SWITCH:
        return {}
    out: dict[str, list[dict[str, Any]]] = {}
    for port, roles in (ask("lg_status") or {}).items():
        for role, st in roles.items():
            if st.get("enabled"):
                out.setdefault(port, []).append(sender_view(st) if role == "sender" else receiver_view(st))
    return out


#: the link actions, as ``netstack lg enable`` / ``enable --mode nb`` / ``disable`` with their defaults
ACTIONS = {"enable": "LinkGuardian on", "enable-nb": "LinkGuardianNB on", "disable": "LinkGuardian off"}


def link_actions(state: RunState, link: str) -> dict[str, str]:
    """LinkGuardian runs between two switches: those links offer :data:`ACTIONS`."""
    switches = state.nodes_running(SWITCH)
    ends = state.ends_of(link)
    return dict(ACTIONS) if len(ends) == 2 and all(p.node in switches for p in ends) else {}


def link_action(prefix: str, link: str, action: str) -> dict[str, Any]:
    from .control import disable_link, enable_link

    if action == "disable":
        return {"disabled": disable_link(prefix, link)}
    return enable_link(prefix, link, mode="nb" if action == "enable-nb" else "blocking")


__all__ = ["ACTIONS", "link_action", "link_actions", "port_views", "receiver_view", "sender_view"]
