"""The total-order baselines 1Pipe is measured against (1Pipe §7.1, Fig. 8), each a sans-IO engine
run on :mod:`netstack.sim` under the same harness, load and host CPU model as 1Pipe.

Skeleton: the modes and the entry point the ``onepipe`` scenario dispatches to; the engines follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: ``sequencer`` and ``hostseq`` are the same baseline: a sequencer on a host
MODES = ("sequencer", "hostseq", "switchseq", "token", "lamport")


def run_baseline(net: Any, p: dict[str, Any], placed: Sequence[tuple[str, str, int]], seq_host: str | None,
                 seed: int, start: int, stop: int, window: tuple[int, int],
                 cpu_costs: Mapping[str, int] | None) -> dict[str, Any]:
    """Run baseline ``p["mode"]`` on ``net`` (raw keys as ``netstack.onepipe.sequencer.run_sequencer``)."""
    raise NotImplementedError(p["mode"])


__all__ = ["MODES", "run_baseline"]
