"""``[topology]``: the name, the namespace prefix, the paper's link rate, the key file, the
metrics port and ECMP; and :func:`validate_prefix`, which a prefix from the command line passes too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..classes import DEFAULT_PREFIX, PREFIX_MAX, TopologyError
from ..values import parse_rate, show
from .fields import PREFIX_RE, Errors, as_table, int_field, parsed, unknown_keys

_TOPOLOGY_KEYS = {"name", "prefix", "paper_rate", "keys", "metrics_port", "ecmp", "ecmp_seed"}
#: ``[topology] metrics_port``: the first daemon's port; the others count up from it
METRICS_PORTS = (1024, 65000)
#: ``ecmp_seed`` (``[topology]`` and a switch's ``[[nodes]]`` entry): as an impairment's seed
ECMP_SEEDS = (0, 2**63 - 1)


def validate_prefix(prefix: Any) -> str:
    """Check a namespace prefix; raise :class:`TopologyError` if it is unusable."""
    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix) or len(prefix) > PREFIX_MAX:
        raise TopologyError(
            [("prefix", f"{show(prefix)} is not a prefix (lower-case letter, then letters/digits, "
                        f"at most {PREFIX_MAX} characters, no '-')")]
        )
    return prefix


def parse_topology_section(errors: Errors, data: Mapping[str, Any]
                            ) -> tuple[str, str, int | None, str | None, int | None]:
    """``[topology]``: name, namespace prefix, paper rate, key file and metrics port (the
    defaults where absent or invalid)."""
    name, prefix = "topology", DEFAULT_PREFIX
    paper_rate: int | None = None
    keys: str | None = None
    metrics_port: int | None = None
    top = as_table(errors, "topology", data.get("topology", {}))
    if top is not None:
        unknown_keys(errors, "topology", top, _TOPOLOGY_KEYS)
        if "name" in top:
            if isinstance(top["name"], str) and top["name"].strip():
                name = top["name"]
            else:
                errors.add("topology.name", f"{show(top['name'])} is not a non-empty string")
        if "paper_rate" in top:
            paper_rate = parsed(errors, "topology.paper_rate", top["paper_rate"], parse_rate)
        if "prefix" in top:
            try:
                prefix = validate_prefix(top["prefix"])
            except TopologyError as exc:
                errors.add("topology.prefix", exc.errors[0][1])
        if "keys" in top:
            value = top["keys"]
            if isinstance(value, str) and value.strip() and "\0" not in value and len(value) <= 4096:
                keys = value
            else:
                errors.add("topology.keys", f"{show(value)} is not a path to a key file")
        if "metrics_port" in top:
            value = top["metrics_port"]
            lo, hi = METRICS_PORTS
            if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
                metrics_port = value
            else:
                errors.add("topology.metrics_port", f"{show(value)} is not a TCP port in {lo}..{hi}")
    return name, prefix, paper_rate, keys, metrics_port


def parse_ecmp_keys(errors: Errors, path: str, table: Mapping[str, Any]) -> tuple[bool | None, int | None]:
    """``ecmp`` (true/false) and ``ecmp_seed`` (an integer) of ``table`` at ``path``: each None
    where absent or invalid ([topology] and a switch's [[nodes]] entry say them alike)."""
    ecmp: bool | None = None
    seed: int | None = None
    if "ecmp" in table:
        if isinstance(table["ecmp"], bool):
            ecmp = table["ecmp"]
        else:
            errors.add(f"{path}.ecmp", f"{show(table['ecmp'])} is not true or false")
    if "ecmp_seed" in table:
        seed = int_field(errors, f"{path}.ecmp_seed", table["ecmp_seed"], *ECMP_SEEDS)
    return ecmp, seed


def parse_topology_ecmp(errors: Errors, data: Mapping[str, Any]) -> tuple[bool, int | None]:
    """``[topology] ecmp`` (default false) and ``ecmp_seed`` (default None: each switch's seed
    comes from its name; docs/topology.md "ECMP")."""
    top = data.get("topology", {})
    if not isinstance(top, dict):
        return False, None  # (parse_topology_section said so)
    ecmp, seed = parse_ecmp_keys(errors, "topology", top)
    return bool(ecmp), seed
