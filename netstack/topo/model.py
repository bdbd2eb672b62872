"""Topology model: nodes, links, impairments, and the TOML file that describes them.

A topology is one layer-2 domain: hosts and collectors (single-homed, one IPv4 address each)
hang off software switches, switches are joined to each other by links, and every link is
one veth pair between two network namespaces. Everything that the builder, the daemons and
the tests need to agree on -- interface names, MAC addresses, device MTUs -- is computed here,
purely, so that any process can recompute it from the file and get the same answer.

Validation is total: a file that loads has no unknown keys, no dangling references, no
clashing names, addresses or MACs, and only names that fit the kernel's limits. Every
problem is reported with the path of the offending field (``links[1].rate``) in one
:class:`TopologyError` before anything is built.

Where things are: the classes in :mod:`netstack.topo.classes`, the quantities' parsers and
bounds in :mod:`netstack.topo.values`, the checks of each section of a file in
:mod:`netstack.topo.validate`. This module loads a topology (a file, TOML text, a shipped
topology's name), and the names the rest of netstack uses are imported from here, as before.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import resources
from pathlib import Path

from .classes import (
    DEFAULT_BUFFER_BYTES,
    DEFAULT_DELAY_NS,
    DEFAULT_MTU,
    DEFAULT_PREFIX,
    DEFAULT_RATE_BPS,
    DEFAULT_SWITCH_HEADROOM,
    IFNAME_MAX,
    LINK_NAME_MAX,
    MAX_FLAPS,
    NODE_NAME_MAX,
    PREFIX_MAX,
    Backend,
    Direction,
    Flap,
    Impairment,
    Link,
    LinkEnd,
    Node,
    NodeKind,
    Topology,
    TopologyError,
    derived_mac,
    ip_mac,
    netns_name,
)
from .validate import topology_from_dict
from .validate.topology import METRICS_PORTS, validate_prefix
from .values import (
    MAX_CLOCK_DRIFT_PPM,
    MAX_CLOCK_OFFSET_NS,
    MAX_DELAY_NS,
    MAX_IN_FLIGHT_BYTES,
    MAX_RATE_BPS,
    MAX_SIZE_BYTES,
    NFT_RESOLUTION,
    parse_clock_offset,
    parse_delay,
    parse_drift_ppm,
    parse_probability,
    parse_rate,
    parse_size,
)


def loads_topology(text: str, source: str = "<string>") -> Topology:
    """Parse and validate a topology from TOML text."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TopologyError([("", f"not valid TOML: {exc}")], source) from None
    except ValueError:  # tomllib's int() of a number longer than sys.get_int_max_str_digits()
        raise TopologyError([("", f"not valid TOML: an integer has more than {sys.get_int_max_str_digits()} "
                                  "digits")], source) from None
    except RecursionError:
        raise TopologyError([("", "not valid TOML: arrays or tables nested too deeply")], source) from None
    return topology_from_dict(data, source)


def load_topology(path: str | Path | None = None) -> Topology:
    """Load a topology file; ``None`` gives the default topology."""
    if path is None:
        return default_topology()
    p = Path(path)
    return loads_topology(read_topology_text(p), str(p))


def read_topology_text(path: str | Path) -> str:
    """A topology file's text; a file that cannot be read as UTF-8 text is a TopologyError."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError([("", f"cannot read: {exc.strerror or exc}")], str(path)) from None
    except UnicodeDecodeError:
        raise TopologyError([("", "not UTF-8 text")], str(path)) from None


DEFAULT_TOPOLOGY_RESOURCE = "default.toml"


def default_topology_text() -> str:
    return resources.files(__package__).joinpath(DEFAULT_TOPOLOGY_RESOURCE).read_text(encoding="utf-8")


def default_topology() -> Topology:
    """LinkGuardian's testbed in miniature: h1 - sw1 = sw2 - h2, collector c1 on sw2 (docs/topology.md)."""
    return loads_topology(default_topology_text(), f"<default topology: netstack/topo/{DEFAULT_TOPOLOGY_RESOURCE}>")


#: where the named topologies shipped with netstack live, next to this module
EXAMPLES_RESOURCE = "examples"


def shipped_topologies() -> dict[str, Path]:
    """The topologies shipped with netstack, by name: ``default`` and every
    ``netstack/topo/examples/<name>.toml`` (docs/topology.md "Shipped topologies")."""
    here = Path(__file__).resolve().parent
    named = {p.stem: p for p in (here / EXAMPLES_RESOURCE).glob("*.toml")}
    named["default"] = here / DEFAULT_TOPOLOGY_RESOURCE
    return dict(sorted(named.items()))


def load_topology_spec(spec: str | Path | None) -> Topology:
    """What a command's TOPOLOGY argument names: a file, else a shipped topology's name
    (:func:`shipped_topologies`), ``None`` the default. A file of that name wins over a name."""
    if spec is None:
        return default_topology()
    path = Path(spec)
    if not path.is_file():
        shipped = shipped_topologies()
        if str(spec) == "default":
            return default_topology()
        if str(spec) in shipped:
            return load_topology(shipped[str(spec)])
        if not path.exists():
            raise TopologyError([("", f"no such file, and not a shipped topology (shipped: {', '.join(shipped)})")],
                                str(spec))
    return load_topology(path)


#: every name this module had when it held the classes and the checks too
__all__ = [
    "Backend", "DEFAULT_BUFFER_BYTES", "DEFAULT_DELAY_NS", "DEFAULT_MTU", "DEFAULT_PREFIX", "DEFAULT_RATE_BPS",
    "DEFAULT_SWITCH_HEADROOM", "DEFAULT_TOPOLOGY_RESOURCE", "Direction", "EXAMPLES_RESOURCE", "Flap", "IFNAME_MAX",
    "Impairment", "LINK_NAME_MAX", "Link", "LinkEnd", "MAX_CLOCK_DRIFT_PPM", "MAX_CLOCK_OFFSET_NS", "MAX_DELAY_NS",
    "MAX_FLAPS", "MAX_IN_FLIGHT_BYTES", "MAX_RATE_BPS", "MAX_SIZE_BYTES", "METRICS_PORTS", "NFT_RESOLUTION",
    "NODE_NAME_MAX", "Node", "NodeKind", "PREFIX_MAX", "Topology", "TopologyError", "default_topology",
    "default_topology_text", "derived_mac", "ip_mac", "load_topology", "load_topology_spec", "loads_topology",
    "netns_name", "parse_clock_offset", "parse_delay", "parse_drift_ppm", "parse_probability", "parse_rate",
    "parse_size", "read_topology_text", "shipped_topologies", "topology_from_dict", "validate_prefix",
]
