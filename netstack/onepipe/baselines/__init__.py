"""The total-order baselines 1Pipe is measured against (1Pipe: Scalable Total Order Communication in
Data Center Networks, §7.1, Fig. 8), each a sans-IO engine run on :mod:`netstack.sim` under the same
harness, load and host CPU model as 1Pipe (docs/onepipe-baselines.md):

- ``hostseq`` (also ``sequencer``): a sequencer on a host (:mod:`.hostseq`);
- ``switchseq``: a sequencer in the spine switch, as a switch feature (:mod:`.switchseq`);
- ``token``: a token passed around a ring of the processes (:mod:`.token`);
- ``lamport``: Lamport timestamps with all-to-all heartbeats (:mod:`.lamport`).

Receivers share :mod:`.stamped` (delivery in the order a sequencer or the token numbered). The
simulated hosts, processes and the switch stage are in :mod:`.sim`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: ``sequencer`` and ``hostseq`` are the same baseline: a sequencer on a host
MODES = ("sequencer", "hostseq", "switchseq", "token", "lamport")


def run_baseline(net: Any, p: dict[str, Any], placed: Sequence[tuple[str, str, int]], seq_host: str | None,
                 seed: int, start: int, stop: int, window: tuple[int, int],
                 cpu_costs: Mapping[str, int] | None) -> dict[str, Any]:
    """Run baseline ``p["mode"]`` on ``net`` for the processes ``placed`` (``[(name, host, 1Pipe port)]``),
    sending from ``start`` to ``stop``; raw results with the keys of
    ``netstack.onepipe.sequencer.run_sequencer`` (sent, scatterings, delivered, latency in ns, in_window,
    lost, seq_dropped, violations, duplicates) and the mode's own counters under ``sequencer`` (host
    sequencer), ``switchseq``, ``token`` or ``lamport``.

    ``cpu_costs``: None (no CPU model: work is free) or the ns each operation costs a process's core
    (``send_msg``, ``recv_msg``, ``heartbeat``, ``token``; see :mod:`.sim`). ``mode = "sequencer"`` without
    CPU costs is ``netstack.onepipe.sequencer``'s run, unchanged (its results stay the same to the event).
    A mode that cannot run here (no sequencer host; a switch sequencer with one ToR) raises
    ``netstack.sim.scenario.ScenarioError``.

    Parameters read from ``p`` besides the scenario's load (``scatter_rate``, ``fanout``, ``size``,
    ``drain_ns``, ``t_beacon_ns``, ``cpu_backlog_ns``, ``time_scale``): ``seq_service_ns`` and ``seq_queue``
    (host sequencer; ``seq_queue`` also bounds the switch stage's queue, in messages),
    ``swseq_ns_per_msg`` and ``swseq_switch`` (0 / "": 1.5 ns x ``time_scale``, the spine),
    ``token_batch`` (0: 8) and ``token_queue`` (0: 2 x batch x fanout messages), ``lamport_hb_ns``
    (0: ``t_beacon_ns``) and ``lamport_hb_share`` (0: 0.5). Absent keys take their defaults."""
    from ...sim.scenario import ScenarioError
    from .sim import run_processes

    if p["mode"] not in MODES:
        raise ScenarioError(f"scenario onepipe: no baseline {p['mode']!r} (one of {', '.join(MODES)})")
    if p["mode"] == "sequencer" and cpu_costs is None:
        from ..sequencer import run_sequencer

        if seq_host is None:
            raise ScenarioError("scenario onepipe: mode sequencer needs a host for the sequencer")
        return run_sequencer(net, p, placed, seq_host, seed, start, stop, window)

    return run_processes(net, p, placed, seq_host, seed, start, stop, window, cpu_costs)


__all__ = ["MODES", "run_baseline"]
