"""LinkGuardian from a topology file: ``[links.features.<end>] linkguardian = {...}``.

LinkGuardian §3: LinkGuardian runs between the two switches of one link, the *sender* on the
switch that transmits over the corrupting link and the *receiver* on the one that receives.
A topology file marks the two ends; both runtimes (the live daemons and ``netstack.sim``)
enable the same engines with the same settings::

    [links.features.a]
    linkguardian = { role = "sender", copies = 1 }
    [links.features.b]
    linkguardian = { role = "receiver" }

Options (either end may give the shared ones; giving one differently at the two ends is an
error): ``role`` (``sender``/``receiver``, required at both ends), ``mode`` (``blocking`` |
``nb``), ``copies`` (N; default Eq. 2 from ``actual_loss``, else 2), ``target`` (1e-8),
``actual_loss``, ``backpressure`` (true), ``recirc_rate`` (``"link"`` | ``"instant"`` | a rate
such as ``"400Mbit"``), ``recirc_order`` (``"seq"`` | ``"fifo"``: where a frame that starts
waiting joins the recirculating buffer, LGParams), ``paper_gbps`` (100 or 25: whose settings are scaled to the link's
rate) and ``params`` (a table of ``LGParams`` fields that override the result). The settings
are the paper's for ``paper_gbps``, scaled to the link's rate exactly as ``netstack lg enable``
scales them (docs/architecture.md "Time and scale").
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..topo.model import Link, NodeKind, Topology, TopologyError
from .feature import RECEIVER, ROLES, SENDER, enable_receiver, enable_sender
from .params import DEFAULT_TARGET_LOSS, PAPER_SETTINGS, LGParams, link_params, recirc_rate_bps

#: options shared by both ends, with their defaults
SHARED: dict[str, Any] = {"mode": "blocking", "copies": None, "target": DEFAULT_TARGET_LOSS, "actual_loss": None,
                          "backpressure": True, "recirc_rate": "link", "recirc_order": "seq", "paper_gbps": 100,
                          "params": None}
KEYS = {"role", *SHARED}


def validate_link(topology: Topology, link: Link, tables: dict[str, Any], path: str) -> dict[str, Any]:
    """Check both ends' ``linkguardian`` tables; return ``{"a": options, "b": options}`` where
    options are ``{"role": ..., "params": LGParams dict}``."""
    errors: list[tuple[str, str]] = []
    for side, end in (("a", link.a), ("b", link.b)):
        if topology.node(end.node).kind is not NodeKind.SWITCH:
            errors.append((f"{path}.{side}.linkguardian",
                           f"{end.node} is a {topology.node(end.node).kind.value}: LinkGuardian runs between two "
                           "switches (LinkGuardian §3)"))
    shared: dict[str, Any] = {}
    roles: dict[str, str] = {}
    for side in ("a", "b"):
        t = tables.get(side)
        where = f"{path}.{side}.linkguardian"
        if t is None:
            errors.append((where, "missing: LinkGuardian needs a sender at one end of the link and a receiver at "
                                  "the other"))
            continue
        if not isinstance(t, dict):
            errors.append((where, f"must be a table, not {type(t).__name__}"))
            continue
        for key in t:
            if key not in KEYS:
                errors.append((f"{where}.{key}", f"unknown option (known: {', '.join(sorted(KEYS))})"))
        role = t.get("role")
        if role not in ROLES:
            errors.append((f"{where}.role", f"{role!r} is not a role (one of: {', '.join(ROLES)})"))
        else:
            roles[side] = role
        for key in SHARED:
            if key in t:
                if key in shared and shared[key] != t[key]:
                    errors.append((f"{where}.{key}", f"{t[key]!r} differs from the other end's {shared[key]!r}"))
                shared[key] = t[key]
    if len(roles) == 2 and sorted(roles.values()) != sorted(ROLES):
        errors.append((f"{path}.b.linkguardian.role",
                       f"the two ends are both {roles['a']}s: one end sends (sender), the other receives (receiver)"))
    if errors:
        raise TopologyError(errors, topology.source)
    opts = {**SHARED, **shared}
    try:
        gbps = opts["paper_gbps"]
        if gbps not in PAPER_SETTINGS:
            raise ConfigError("paper_gbps", f"the paper gives settings for {sorted(PAPER_SETTINGS)} Gbit/s, "
                                            f"not {gbps!r}")
        if not isinstance(opts["backpressure"], bool):
            raise ConfigError("backpressure", f"must be true or false, got {opts['backpressure']!r}")
        params = link_params(link.rate_bps, opts["mode"], opts["target"], opts["copies"], opts["actual_loss"],
                             opts["backpressure"], recirc_rate_bps(opts["recirc_rate"]), gbps)
        params["recirc_order"] = opts["recirc_order"]
        if opts["params"] is not None:
            if not isinstance(opts["params"], dict):
                raise ConfigError("params", "must be a table of LGParams fields")
            params.update(opts["params"])
        LGParams.from_dict(params)
    except (ConfigError, ValueError, TypeError) as exc:
        field = exc.field.removeprefix("linkguardian.") if isinstance(exc, ConfigError) else ""
        problem = exc.problem if isinstance(exc, ConfigError) else str(exc)
        raise TopologyError([(f"{path}.linkguardian{'.' + field if field else ''}", problem)],
                            topology.source) from None
    return {side: {"role": roles[side], "params": params} for side in ("a", "b")}


def attach(switch: Any, port: str, options: dict[str, Any], now_ns: int | None = None) -> Any:
    """Enable the end ``options["role"]`` on ``port`` with ``options["params"]`` (checked by
    :func:`validate_link`); returns the feature."""
    role = options.get("role")
    if role == SENDER:
        return enable_sender(switch, port, options.get("params"), now_ns)
    if role == RECEIVER:
        return enable_receiver(switch, port, options.get("params"), now_ns)
    raise ConfigError("linkguardian.role", f"must be one of {', '.join(ROLES)}, got {role!r}")


__all__ = ["KEYS", "SHARED", "attach", "validate_link"]
