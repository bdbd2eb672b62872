"""The live part's testbed: h1 (reporter) - sw2 (translator) - c1 (collector), generated, and
where its processes run."""

from __future__ import annotations

import textwrap

from ..proc import pinnable_cpus
from .params import LINK_BUFFER, LINK_RATE, SUBNET


def topology_toml(collector_kind: str) -> str:
    return textwrap.dedent(f"""\
        [topology]
        name = "bench-dta-{collector_kind}"

        [defaults]
        rate = "{LINK_RATE}"
        delay = "0"
        buffer = "{LINK_BUFFER}"

        [[nodes]]
        name = "h1"
        kind = "host"
        ip = "{SUBNET}.1/24"

        [[nodes]]
        name = "c1"
        kind = "{collector_kind}"
        ip = "{SUBNET}.100/24"

        [[nodes]]
        name = "sw2"
        kind = "switch"

        [[links]]
        a = "h1"
        b = "sw2"

        [[links]]
        a = "sw2"
        b = "c1"
        """)


def cpu_plan() -> dict[str, list[int]] | None:
    """{"switch": [...], "collector": [...], "reporter": [...]}, or None (no pinning)."""
    cpus = pinnable_cpus()
    if cpus is None:
        return None
    return {"switch": cpus[1:2], "collector": cpus[:1], "reporter": cpus[:1]}
