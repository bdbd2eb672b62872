"""Switch-port features a topology file turns on, for both runtimes.

A topology file names features per link end (docs/topology.md)::

    [links.features.a]
    linkguardian = { role = "sender", copies = 1 }
    [links.features.b]
    linkguardian = { role = "receiver" }

``switch = { ... }`` holds plain port settings (lossless, thresholds; see
``netstack.runtime.port_options``); every other key names a feature here. The live runtime
puts the checked options into each switch daemon's config and the daemon attaches them at
start; the virtual-time runtime (``netstack.sim``) attaches the same options to the same
``Switch`` objects. One file therefore runs either way unchanged.

A feature module provides ``validate_link(topology, link, tables, path) -> {"a": options | None,
"b": options | None}`` (raising ``TopologyError`` with the path of the bad field; it sees both
ends, since a protocol such as LinkGuardian needs a sender at one and a receiver at the other)
and ``attach(switch, port, options, now_ns)``.
"""

from __future__ import annotations

import importlib
from typing import Any

from .. import protocols
from ..topo.model import Topology, TopologyError

#: feature name in a topology file -> the module that checks and attaches it (the protocols' own)
FEATURES: dict[str, str] = protocols.features()
#: keys of a link end's features table that are not features (port settings)
PORT_SETTINGS = "switch"


def _module(name: str) -> Any:
    return importlib.import_module(FEATURES[name])


def port_features(topology: Topology) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """Every feature the file asks for, checked: ``{(node, ifname): {feature: options}}``.

    Raises :class:`TopologyError` naming the field (``links[sw1-sw2].features.a.linkguardian.mode``).
    """
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    errors: list[tuple[str, str]] = []
    for link in topology.links:
        tables = {"a": link.a.features, "b": link.b.features}
        names = sorted({k for t in tables.values() for k in t if k != PORT_SETTINGS})
        for name in names:
            path = f"links[{link.name}].features"
            if name not in FEATURES:
                errors.append((f"{path}.{name}", f"unknown feature (known: {', '.join(sorted(FEATURES))}; "
                                                 f"port settings go in '{PORT_SETTINGS}')"))
                continue
            try:
                checked = _module(name).validate_link(topology, link, {s: t.get(name) for s, t in tables.items()},
                                                      path)
            except TopologyError as exc:
                errors.extend(exc.errors)
                continue
            for side, end in (("a", link.a), ("b", link.b)):
                if checked.get(side) is not None:
                    out.setdefault((end.node, end.ifname), {})[name] = checked[side]
    if errors:
        raise TopologyError(errors, topology.source)
    return out


def attach(switch: Any, features: dict[str, dict[str, dict[str, Any]]] | None, now_ns: int | None = None) -> list[str]:
    """Attach ``{port: {feature: options}}`` (checked by :func:`port_features`) to ``switch``;
    returns ``["port:feature", ...]``."""
    done = []
    for port, feats in sorted((features or {}).items()):
        for name, options in sorted(feats.items()):
            if name not in FEATURES:
                raise ValueError(f"port {port}: unknown feature {name!r} (known: {', '.join(sorted(FEATURES))})")
            _module(name).attach(switch, port, options, now_ns)
            done.append(f"{port}:{name}")
    return done


__all__ = ["FEATURES", "PORT_SETTINGS", "attach", "port_features"]
