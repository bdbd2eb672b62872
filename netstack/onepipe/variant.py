"""Where a switch's 1Pipe processing runs: the three variants of *1Pipe: Scalable Total Order
Communication in Data Center Networks* (Li et al., SIGCOMM 2021), §6.2 "In-Network Processing".

- ``"chip"`` (§6.2.1, "Programmable Switching Chip"): the data plane reads the barrier of every
  1Pipe packet into ``R[input]`` and writes the minimum into it as it forwards it; idle outputs
  get beacons. What :mod:`.feature` has always done, and the default.
- ``"cpu"`` (§6.2.2, "Switch CPU"): "data packets are forwarded by the switching chip directly";
  "received barriers in beacons are stored in registers per input link", and "a thread on the
  CPU periodically computes the minimum of link barriers and broadcasts new beacons to all output
  links", "regardless of whether the link is idle or busy". Receivers deliver "according to
  barriers in beacon packets".
- ``"host"`` (§6.2.3, "Delegate Switch Processing to a Host", the variant of the paper's
  evaluation, §7): each switch has an *end-host representative*; beacons update its registers by
  one-sided RDMA writes, and the beacons it sends cross the real switch link (IP-in-IP when the
  route would not). The paper's expected delay is "base delay + ((RTT between switch and host +
  host processing delay) x number of hops + beacon interval/2 + clock skew)", about 2 us a hop
  on its testbed (§7.2).

Both non-chip variants are the same machine with a different one-way delay ``d`` between the
switch and where its registers live (:func:`.feature.enable`'s ``variant_delay_ns``): a beacon
reaching the switch sets ``R`` ``d`` later, and a beacon the CPU or representative sends leaves
the switch ``d`` after its barrier was computed, so that every hop of a barrier pays ``2 d`` on
top of the link. The data plane forwards 1Pipe data untouched, and hosts beacon every
``T_beacon`` whatever they send (:attr:`.endpoint.Endpoint.beacon_barriers`).

This module holds the names and the default delays (:func:`delay_ns`); the switch side is in
:mod:`.feature`, the host side in :mod:`.endpoint`, the scenario parameter in :mod:`.scenarios`.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..topo.model import Link, NodeKind, Topology

CHIP = "chip"
CPU = "cpu"
HOST = "host"
#: the variants, by the scenario parameter ``variant``'s values
VARIANTS = (CHIP, CPU, HOST)

#: ``"cpu"``: the one-way delay between the switching chip and its CPU at the paper's scale, ns
#: (an assumption: the paper gives no number for it). A punted beacon crosses the chip's CPU port
#: and PCIe into a CPU "typically less powerful (e.g., 4 cores at 1 GHz)" reached "via OS IP
#: stack" (§6.2.2, §6.2.3), and the beacon it sends comes back the same way. The paper's only
#: bound is §7's "with switch CPU, 1Pipe adds less than 15 us delay": less the beacon interval's
#: half and the skew (1.5 + 0.3 us), over its 5-hop testbed, at most about 2.6 us a hop. We take
#: 2.5 us a hop, 1.25 us each way: the switch-CPU variant is then a little slower than the
#: representatives at the paper's ~2 us a hop, as the paper ranks them ("host delegation may
#: have shorter overall delay").
PAPER_CPU_DELAY_NS = 1_250


def host_link_delay_ns(topology: Topology, switch: str) -> int:
    """The propagation delay of a link from ``switch`` to a host: its shortest such link, else
    (a spine has no host) the topology's shortest switch-host link, where its representative is
    assumed to hang off as hosts do ("the host representative is directly connected to the
    switch", §7.1), else its own shortest link."""
    kinds = {n.name: n.kind for n in topology.nodes}

    def to_host(links: Sequence[Link]) -> list[int]:
        return [lk.delay_ns for lk in links if NodeKind.HOST in (kinds[lk.a.node], kinds[lk.b.node])
                and NodeKind.SWITCH in (kinds[lk.a.node], kinds[lk.b.node])]

    own = topology.links_of(switch)
    delays = to_host(own) or to_host(topology.links) or [lk.delay_ns for lk in own]
    return min(delays, default=0)


def delay_ns(variant: str, topology: Topology, switch: str, *, nic_ns: int = 0, scale: float = 1.0) -> int:
    """The default one-way delay between ``switch`` and where its registers live (0 for
    ``"chip"``):

    - ``"host"``: ``host link delay + nic_ns``: the link to the representative
      (:func:`host_link_delay_ns`) and its host stack (``nic_ns``, the scenario's one-way
      host-stack latency, which a simulated host pays on every frame it receives and again on
      every frame it sends). A hop's detour, ``2 d``, is then the switch-host round trip, the
      representative's stack crossed twice, in and out: the paper's "(RTT between switch and
      host + host processing delay)", with the processing inside the stack's time (its polling
      thread, as lib1pipe's). On the bench's calibration (``nic_ns`` = 834 ns, the paper's
      one-hop unordered latency; netstack/bench/onepipe/spec.py) that is 2.17 us a hop, the
      paper's "~2 us" (§7.2). With ``nic_ns`` 0 it is the links alone (500 ns a hop at 250 ns).
    - ``"cpu"``: :data:`PAPER_CPU_DELAY_NS` times the topology's time ``scale``.
    """
    if variant == CHIP:
        return 0
    if variant == CPU:
        return round(PAPER_CPU_DELAY_NS * scale)
    if variant == HOST:
        return host_link_delay_ns(topology, switch) + int(nic_ns)
    raise ValueError(f"unknown 1Pipe variant {variant!r} (one of {', '.join(VARIANTS)})")


__all__ = ["CHIP", "CPU", "HOST", "PAPER_CPU_DELAY_NS", "VARIANTS", "delay_ns", "host_link_delay_ns"]
