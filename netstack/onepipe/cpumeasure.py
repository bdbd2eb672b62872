"""Timing our 1Pipe engines for the host CPU model (issue 32): :func:`measure` runs a saturated
``onepipe`` scenario for best effort and reliable side by side and times every engine call
(:class:`.cpucost.Probe`); :func:`.cpucost.calibrate` turns what it measured into costs.

Apart from :mod:`.cpucost` because it runs the scenario, which charges those costs: the costs
are data the simulated processes import, the measurement is a tool that imports them (no cycle).
"""

from __future__ import annotations

import statistics
import sys

from .cpucost import DEFAULT_COSTS, PAPER_BE_MSGS_PER_S, CpuCosts, EngineCost, Measured, Probe

#: the measurement's run: 32 processes, one a host on the paper's 32-host fabric (4 ToRs x 8 under
#: a spine, no oversubscription), so that every message crosses a switch and each receiver hears
#: from as many peers per beacon interval as at scale (what it acknowledges, and repeats, per tick)
MEASURE_PROCS = 32
MEASURE_DURATION_NS = 20_000


def _measure_once(mode: str, seed: int, duration_ns: int, costs: CpuCosts | None) -> EngineCost:
    from ..sim.scenario import RunSpec, run
    from . import simproc
    from .scenarios import fabric_topology

    topo = fabric_topology(tors=4, hosts_per_tor=MEASURE_PROCS // 4, rate="400Gbit", uplink_rate="3200Gbit")
    cap = costs.be_capacity if costs is not None else PAPER_BE_MSGS_PER_S
    # offered: four times best effort's capacity (scatterings of 2 messages): every core saturates
    params = {"procs": MEASURE_PROCS, "mode": mode, "fanout": 2, "size": 64, "t_beacon_ns": 3_000,
              "rate": 4 * cap / 2, "drain_ns": 30_000, "cpu": True}
    probe = Probe()
    with simproc.probing(probe, costs):
        doc = run(RunSpec("onepipe", topo, seed, duration_ns, params))
    # the probe timed the whole run (warm-up and drain too): per second of the run's virtual time
    return probe.costs(MEASURE_PROCS, doc["engine"]["virtual_ns"] / 1e9)


_COSTS = ("send", "data", "deliver", "ack", "barrier", "timer", "timer_tx")
_MIX = ("acks_per_msg", "timers_per_s", "barriers_per_s", "tx_per_timer")


def _measure_into(got: dict[str, EngineCost], mode: str, seed: int, duration_ns: int, costs: CpuCosts | None) -> None:
    got[mode] = _measure_once(mode, seed, duration_ns, costs)


def _least_disturbed(runs: list[EngineCost]) -> EngineCost:
    """Each cost's lowest over the repeats (wall time on a shared machine only ever grows with the
    load of others), the mix's median."""
    low = {k: min(getattr(r, k) for r in runs) for k in _COSTS}
    mix = {k: statistics.median(getattr(r, k) for r in runs) for k in _MIX}
    return EngineCost(**low, **mix, calls=runs[0].calls)


def measure(repeats: int = 5, duration_ns: int = MEASURE_DURATION_NS, costs: CpuCosts | None = None,
            seed: int = 1) -> Measured:
    """Time our engines in a saturated run (module docstring), best effort and reliable side by
    side (so that both see the same load from others), ``repeats`` turns; :func:`calibrate`
    takes the median over the turns. ``costs``: the model the run saturates (default :data:`DEFAULT_COSTS`),
    so that the calls batch as they do in the benchmark."""
    import platform
    import time

    costs = costs or DEFAULT_COSTS
    be: list[EngineCost] = []
    rel: list[EngineCost] = []
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_S)
    try:
        _turns(be, rel, repeats, seed, duration_ns, costs)
    finally:
        sys.setswitchinterval(switch)
    machine = f"{platform.node()} {platform.processor() or platform.machine()} python {platform.python_version()}"
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return Measured(_least_disturbed(be), _least_disturbed(rel), when, machine, list(zip(be, rel, strict=True)))


#: the interpreter's thread switch interval while measuring: long enough that the two runs do not
#: evict each other's data from the caches at every switch, short against a turn (seconds)
SWITCH_S = 0.05


def _turns(be: list[EngineCost], rel: list[EngineCost], repeats: int, seed: int, duration_ns: int,
           costs: CpuCosts | None) -> None:
    import threading

    for i in range(repeats):
        # side by side, in two threads: the interpreter switches between them every few ms, so
        # both see the same load from the machine's other processes (timed calls that a switch
        # interrupted are among the slowest 1 %, left out)
        got: dict[str, EngineCost] = {}
        threads = [threading.Thread(target=_measure_into, args=(got, mode, seed + i, duration_ns, costs))
                   for mode in ("onepipe", "reliable")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        be.append(got["onepipe"])
        rel.append(got["reliable"])


__all__ = ["MEASURE_DURATION_NS", "MEASURE_PROCS", "measure"]
