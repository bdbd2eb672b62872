"""What every virtual-time point of ``netstack bench onepipe`` shares: the fabric, the seed, the
paper's parameters, and one point = one run of the ``onepipe`` scenario."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...onepipe.scenarios import fabric_topology
from ...sim.scenario import RunSpec

#: the paper's testbed has 32 servers (the paper's §7): 4 ToRs x 8 hosts under a spine, 100 Gbit/s, 250 ns
#: a link (one-way ~1 us host to host across the spine), and the sequencer's host on tor1
FABRIC = fabric_topology(tors=4, hosts_per_tor=8)
SEED = 1
T_BEACON_NS = 3_000  # the paper's §7
FANOUT = 2
SIZE = 64  # the paper's §7: 64-byte messages
#: the host stack's one-way latency each way (the onepipe scenario's ``nic_ns``: lib1pipe's polling
#: thread, PCIe and the RDMA NIC, which our simulated links leave out), calibrated on one number of
#: the paper's: its unordered latency at one hop, 2.2 us (Fig. 9a, 8 processes under one ToR; file
#: reorder_testbed). Ours without a stack measured 532 ns there (two 100 Gbit/s links of 250 ns and
#: the frames' line time), so each of the two stacks a message crosses takes (2200 - 532) / 2. What
#: it does at 3 and 5 hops, to barriers, ACKs and beacons, is predicted, not fitted.
PAPER_UNORDER_1HOP_NS = 2_200
WIRE_1HOP_NS = 532
NIC_NS = (PAPER_UNORDER_1HOP_NS - WIRE_1HOP_NS) // 2


@dataclass(frozen=True)
class Point:
    """One sim run of a section, with what its rows need to know about it."""

    section: str
    spec: RunSpec
    meta: dict[str, Any]


def _spec(procs: int, rate: float, duration_ns: int, scale: float, **extra: Any) -> RunSpec:
    params = {"procs": procs, "rate": rate, "fanout": FANOUT, "size": SIZE, "t_beacon_ns": T_BEACON_NS, **extra}
    return RunSpec("onepipe", FABRIC, SEED, max(1, round(duration_ns * scale)), params)


__all__ = ["FABRIC", "FANOUT", "NIC_NS", "SEED", "SIZE", "T_BEACON_NS", "Point"]
