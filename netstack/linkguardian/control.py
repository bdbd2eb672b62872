"""LinkGuardian's control plug-in: what a switch daemon serves, and what orchestration calls.

Daemon side (:func:`switch_handlers`, loaded by the switch daemon through the protocol
registry, ``netstack.protocols``): three control commands per switch,

- ``lg_enable``: ``{"port", "role": "sender" | "receiver", "params": {...}}`` attaches the
  sender or receiver feature to the port (``LGParams`` fields; see :mod:`.params`);
- ``lg_disable``: ``{"port", ["role"]}`` detaches it (the sender first; held frames are released);
- ``lg_status``: ``{["port"]}`` every LinkGuardian feature's parameters and counters.

Orchestration side (any process holding the run state: the CLI, corruptd, the demo and the
benchmarks): :func:`enable_link` configures both ends of a running switch-to-switch link with
the paper's settings scaled to the link's rate (receiver first, then sender), :func:`disable_link`
undoes it, :func:`status_all` collects every switch's ``lg_status``; :func:`measured_loss` is
the link's corruption loss from the switches' FCS counters (as corruptd sees it).
"""

from __future__ import annotations

import time
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, NetstackError
from ..io.control import ControlError

# (the feature's disable and status under other names: this module's are the control verbs)
from .feature import disable as feature_disable
from .feature import enable_receiver, enable_sender
from .feature import status as feature_status
from .params import LGParams, link_params

if TYPE_CHECKING:
    from ..runtime import RunPort, RunState


class LGControlError(NetstackError, RuntimeError):
    """A LinkGuardian operation on the running testbed cannot be done: the message says why."""


# =========================================================================== switch daemon side
def switch_handlers(shell: Any) -> dict[str, Any]:
    """The control commands LinkGuardian adds to a switch daemon (``shell``: its ``SwitchShell``)."""

    def lg_enable(req: dict[str, Any]) -> dict[str, Any]:
        name = shell.port_of(req)
        role = req.get("role")
        if role not in ("sender", "receiver"):
            raise ControlError('role must be "sender" or "receiver"')
        enable = enable_sender if role == "sender" else enable_receiver
        try:
            feature = enable(shell.switch, name, req.get("params") or {}, time.monotonic_ns())
        except (ConfigError, ValueError, TypeError) as exc:
            raise ControlError(f"cannot enable LinkGuardian {role} on {name}: {exc}") from None
        shell.flush()
        shell.log.info("LinkGuardian %s enabled on %s", role, name)
        return {"port": name, "role": role, "params": feature.params.to_dict()}

    def lg_disable(req: dict[str, Any]) -> list[str]:
        name = shell.port_of(req)
        try:
            roles = feature_disable(shell.switch, name, req.get("role"), time.monotonic_ns())
        except (ConfigError, ValueError) as exc:
            raise ControlError(str(exc)) from None
        shell.flush()
        shell.log.info("LinkGuardian disabled on %s (%s)", name, ", ".join(roles) or "nothing enabled")
        return roles

    def lg_status(req: dict[str, Any]) -> dict[str, Any]:
        port = req.get("port")
        if port is not None:
            shell.port_of(req)
        return feature_status(shell.switch, port)

    return {"lg_enable": lg_enable, "lg_disable": lg_disable, "lg_status": lg_status}


# =========================================================================== orchestration
def link_ends(state: RunState, link: str, direction: str | None) -> tuple[RunPort, RunPort]:
    """(sending end, receiving end) of switch-to-switch ``link`` in a run state; ``direction``
    ``A:B`` (or ``A>B``) names the sending switch first (default: the link's a>b)."""
    ends = state.ends_of(link)
    switches = state.nodes_running("switch")
    if len(ends) != 2:
        raise LGControlError(f"no link {link!r}; links: {', '.join(sorted({p.link for p in state.ports}))}")
    if not all(e.node in switches for e in ends):
        raise LGControlError(f"{link} is not a switch-to-switch link: LinkGuardian runs between two switches")
    a, b = ends
    if direction:
        src, _, dst = direction.replace(">", ":").partition(":")
        if (src, dst) == (b.node, a.node):
            a, b = b, a
        elif (src, dst) != (a.node, b.node):
            raise LGControlError(f"direction {direction!r}: use {a.node}:{b.node} or {b.node}:{a.node}")
    return a, b


def measured_loss(prefix: str, sender: RunPort, receiver: RunPort) -> float | None:
    """FCS drops at the receiver over frames the sender put on the link (since the counters
    were last cleared): the link's actual corruption loss, as corruptd sees it."""
    from ..runtime import status as runtime_status

    st = runtime_status(prefix)["daemons"]
    try:
        tx = st[sender.node]["ports"][sender.ifname]["tx_frames"]
        bad = st[receiver.node]["ports"][receiver.ifname]["fcs_errors"]
    except KeyError:
        return None
    return bad / tx if tx >= 1000 and bad > 0 else None


def enable_link(prefix: str, link: str, *, mode: str = "blocking", target: float = 1e-8, copies: int | None = None,
                actual: float | None = None, backpressure: bool = True, direction: str | None = None,
                recirc_rate_bps: int | None = None, recirc_order: str = "seq") -> dict[str, Any]:
    """Protect ``link`` of the testbed running under ``prefix``: the paper's 100G settings scaled
    to the link's rate (``params.link_params``), N = ``copies`` or Eq. 2 from ``actual`` (default:
    :func:`measured_loss`), receiver first so that no stamped frame meets an unready receiver.
    ``recirc_order``: where a newly held frame joins the recirculating buffer (LGParams)."""
    from ..runtime import control, load_state

    state = load_state(prefix)
    sender, receiver = link_ends(state, link, direction)
    if copies is None and actual is None:
        actual = measured_loss(prefix, sender, receiver)
    rate = (state.links[link].rate_bps if link in state.links else 0) or 100_000_000
    params = link_params(rate, mode, target, copies, actual, backpressure, recirc_rate_bps)
    params["recirc_order"] = recirc_order
    LGParams.from_dict(params)  # a clear error here, before either switch sees it
    r = control(prefix, receiver.node, "lg_enable", port=receiver.ifname, role="receiver", params=params)
    s = control(prefix, sender.node, "lg_enable", port=sender.ifname, role="sender", params=params)
    return {"link": link, "sender": f"{sender.node}/{sender.ifname}",
            "receiver": f"{receiver.node}/{receiver.ifname}", "params": s["params"], "receiver_params": r}


def disable_link(prefix: str, link: str) -> list[str]:
    """Turn protection off at both ends of ``link``; ``["node/port:role", ...]`` that were on."""
    from ..runtime import control, load_state

    state = load_state(prefix)
    a, b = link_ends(state, link, None)
    done = []
    for end in (a, b):  # whichever is the sender is disabled first by the engine order anyway
        done += [f"{end.node}/{end.ifname}:{r}" for r in control(prefix, end.node, "lg_disable", port=end.ifname)]
    return done


def after_restart(prefix: str, node: str) -> list[str]:
    """A restarted switch daemon (``runtime.restart_daemon``) comes back with LinkGuardian where
    its peer still runs the other half: the complementary role on its end of each such link,
    with the peer's settings. Its engines are new (counters from 0): the peer follows the new
    counters without a duplicate (receiver.py: RESTART_BEHIND, FRESH_SLACK; docs/faults.md).
    Links protected from the topology file are back already (the daemon attaches them at start).
    Returns ``["node/port:role", ...]`` enabled."""
    from ..io.control import ControlError
    from ..runtime import control, load_state

    state = load_state(prefix)
    switches = state.nodes_running("switch")
    mine = {p.link: p for p in state.ports_of(node)}
    done = []
    for link, end in mine.items():
        peer = next((p for p in state.ends_of(link) if p.node != node), None)
        if peer is None or peer.node not in switches or node not in switches:
            continue
        try:
            there = control(prefix, peer.node, "lg_status", port=peer.ifname).get(peer.ifname, {})
            here = control(prefix, node, "lg_status", port=end.ifname).get(end.ifname, {})
        except (OSError, ControlError):
            continue
        for role, st in there.items():
            want = "receiver" if role == "sender" else "sender"
            if not st.get("enabled") or (here.get(want) or {}).get("enabled"):
                continue
            # the peer's settings, as LGParams fields (its status also shows derived values)
            known = {f.name for f in fields(LGParams)}
            params = {k: v for k, v in (st.get("params") or {}).items() if k in known}
            control(prefix, node, "lg_enable", port=end.ifname, role=want, params=params)
            done.append(f"{node}/{end.ifname}:{want}")
    return done


def status_all(prefix: str) -> dict[str, Any]:
    """``{switch: lg_status}`` for every switch daemon of the run."""
    from ..runtime import control, load_state

    return {d.node: control(prefix, d.node, "lg_status") for d in load_state(prefix).daemons if d.kind == "switch"}


# ----------------------------------------------------------------- the common control verbs
# (docs/architecture.md "Errors and control verbs": every protocol's enable, disable, status)


def enable(prefix: str, link: str, **options: Any) -> dict[str, Any]:
    """Protect ``link``: :func:`enable_link`, under the verb every protocol's control module has."""
    return enable_link(prefix, link, **options)


def disable(prefix: str, link: str) -> list[str]:
    """Turn ``link``'s protection off: :func:`disable_link`."""
    return disable_link(prefix, link)


def status(prefix: str) -> dict[str, Any]:
    """Every switch's LinkGuardian features: :func:`status_all`."""
    return status_all(prefix)


__all__ = ["LGControlError", "after_restart", "disable", "disable_link", "enable", "enable_link", "link_ends",
           "measured_loss", "status", "status_all", "switch_handlers"]
