"""Tests of T/C-SACK (netstack.tcsack). Transfers run on netstack.sim: two hosts joined by one link
(no switch), whose two directions a test scripts frame by frame (loss, duplication, extra delay)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from netstack.sim.network import Network
from netstack.tcsack import TcsParams
from netstack.tcsack.simhosts import transfer
from netstack.topo.model import topology_from_dict

#: (lost, duplicated, extra delay in ns) for the i-th frame on a direction
Fate = Callable[[int], tuple[bool, bool, int]]


def lossy(loss: float, seed: int) -> Fate:
    """Each frame lost with probability ``loss``, drawn from its own seeded stream."""
    rnd = random.Random(seed).random
    return lambda i: (rnd() < loss, False, 0)


def run(kind: str, params: TcsParams, data: bytes, *, fwd: Fate | None = None, rev: Fate | None = None,
        delay_ns: int = 1_000_000, rate_bps: int = 100_000_000, start_seq: int = 0,
        max_ns: int = 60_000_000_000) -> dict[str, Any]:
    """``data`` from h1 to h2 over one link of ``rate_bps`` and ``delay_ns`` each way; ``fwd`` and
    ``rev`` script the data and the ACK directions. The result of ``netstack.tcsack.simhosts.transfer``
    plus what each direction lost (``fwd_lost``, ``rev_lost``)."""
    net = Network(topology_from_dict({
        "topology": {"name": "tcsack-direct"},
        "defaults": {"rate": rate_bps, "delay": f"{delay_ns}ns"},
        "nodes": [{"name": "h1", "kind": "host", "ip": "10.0.0.1/24"},
                  {"name": "h2", "kind": "host", "ip": "10.0.0.2/24"}],
        "links": [{"name": "h1-h2", "a": "h1", "b": "h2"}],
    }))
    for src, fate in (("h1", fwd), ("h2", rev)):
        if fate is not None:
            net.channel("h1-h2", src).fate = lambda i, frame, f=fate: f(i)
    res = transfer(net, kind, params, data, start_seq=start_seq, max_ns=max_ns)
    res["fwd_lost"] = net.channel("h1-h2", "h1").lost
    res["rev_lost"] = net.channel("h1-h2", "h2").lost
    return res


__all__ = ["lossy", "run"]
