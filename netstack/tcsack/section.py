"""T/C-SACK from a topology file: ``[tcsack]`` gives the testbed's transfer parameters, the
knobs the paper names ("An Updated ACK mechanism based on RDMA", §2: "the packet sending rate of
the sender is preset, the cumulative acknowledgement time T of the receiver and the cumulative
number of received packets N")::

    [tcsack]
    rate = "60Mbit"     # the sender's preset rate (line rate, resends included)
    t = "2ms"           # T: the receiver ACKs at least this often ...
    n = 16              # N: ... or after this many packets
    payload = 1200      # bytes per packet

Every key is optional (the engines' defaults, :class:`.params.TcsParams`). T/C-SACK is an
end-host transport with no switch part and nothing running between transfers (its control
module's ``VERBS``), so the table starts nothing: ``netstack up`` checks it and records it in
the run state, and ``netstack tcsack transfer`` on that testbed takes its values where no flag
overrides them (its JSON says where each came from). A rate above the slowest link on the way is
allowed: T/C-SACK then loses at that link and resends, which is one of the paper's cases.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..topo.model import Topology, TopologyError, parse_delay, parse_rate
from .params import TcsParamError, TcsParams

#: key in the file -> (the TcsParams field, how to read it)
OPTIONS: dict[str, tuple[str, Callable[[Any], int] | None]] = {
    "rate": ("rate_bps", parse_rate), "t": ("t_ns", parse_delay), "n": ("n", None), "payload": ("payload", None),
}


def validate_section(topology: Topology, table: dict[str, Any], path: str) -> dict[str, Any]:
    """The given settings as TcsParams fields (``{"rate_bps": ..., "t_ns": ...}``, only those the
    table has), checked together with the defaults of the others; a TopologyError naming each bad
    field otherwise."""
    if not isinstance(table, dict):
        raise TopologyError([(path, f"must be a table, not {type(table).__name__}")], topology.source)
    errors = [(f"{path}.{k}", f"unknown key (allowed: {', '.join(OPTIONS)})") for k in table if k not in OPTIONS]
    out: dict[str, Any] = {}
    for key, (name, parse) in OPTIONS.items():
        if key not in table:
            continue
        value = table[key]
        try:
            out[name] = parse(value) if parse is not None else value
        except (TypeError, ValueError) as exc:
            errors.append((f"{path}.{key}", str(exc)))
    if not errors:
        try:
            TcsParams(**out)
        except TcsParamError as exc:
            field = str(exc).split(" ", 1)[0]
            key = next((k for k, (n, _) in OPTIONS.items() if n == field), "")
            errors.append((f"{path}.{key}" if key else path, str(exc)))
    if errors:
        raise TopologyError(errors, topology.source)
    return out


def params_of(options: dict[str, Any]) -> TcsParams:
    return TcsParams(**options)


def on_up(topology: Topology, prefix: str, options: dict[str, Any], say: Callable[[str], Any]) -> str:
    """Nothing to start (module docstring): what transfers on this testbed will use."""
    p = params_of(options)
    return (f"T/C-SACK transfers default to {p.rate_bps / 1e6:g} Mbit/s, T {p.t_ns / 1e6:g} ms, N {p.n}, "
            f"{p.payload} B per packet")


__all__ = ["OPTIONS", "on_up", "params_of", "validate_section"]
