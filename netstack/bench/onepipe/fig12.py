"""The ``fig12`` section of ``netstack bench onepipe``: 1Pipe's delivery latency beside background
TCP flows (1Pipe: Scalable Total Order Communication in Data Center Networks, §7.1, Fig. 12a) and
on an oversubscribed fabric carrying them (Fig. 12b), in virtual time.

The ``onepipe`` scenario with ``bg_flows`` (netstack/onepipe/background.py): every host of the
paper's 32-host fabric (4 ToRs x 8, 100 Gbit/s) runs one 1Pipe process at Fig. 9a's idle load and
that many backlogged NewReno flows to hosts under other ToRs. Fig. 12a: 0-10 flows a host, no
oversubscription (ToR uplinks at 8 x 100 Gbit/s). Fig. 12b: 10 flows a host, the uplinks at
8 x 100 / ratio Gbit/s for ratios 1-6. Best effort and reliable each, as the paper's series are:
its host-delegate variants (BE-host, R-host), so ours run ``variant = "host"`` with the host stack
calibrated for the fig9a-testbed section (``NIC_NS``). Unlike that section's fat tree this fabric
has one spine: 3 hops between the processes of different ToRs, the paper's testbed 5 at 32.

The fabric is lossless (:data:`FIG12_FABRIC`): PFC on every switch port, thresholds from the
headroom rule (:func:`pfc_xoff_bytes`), the hosts' NICs paused by their ToR (netstack.sim.nic's
``HostNic``). The lossy fabric (tail drops, the flows back off on loss) stays one argument away
(``fig12_points(scale, fabrics=("lossless", "lossy"))``) for comparison.
"""

from __future__ import annotations

from typing import Any

from headers.registry import MIN_FRAME

from ...ethernet import wire_bytes
from ...onepipe.scenarios import fabric_topology
from ...sim.scenario import RunSpec
from ...topo.model import NodeKind, topology_from_dict
from .spec import FANOUT, NIC_NS, SEED, SIZE, T_BEACON_NS, Point

FIG12_PROCS = 32
FIG12_RATE = 20_000.0  # Fig. 9a's idle load: what moves the latency is the flows' queueing
FIG12_DURATION_NS = 200_000
FIG12_FLOWS = (0, 2, 4, 6, 8, 10)
FIG12_RATIOS = (1, 2, 3, 4, 5, 6)
FIG12_RATIO_FLOWS = 10
#: (scenario mode, the rows' system)
FIG12_SYSTEMS = (("onepipe", "1pipe"), ("reliable", "1pipe_reliable"))
#: the paper's Fig. 12 series are its host-delegate variant's
FIG12_VARIANT = "host"
#: The paper's testbed runs RoCEv2 with PFC, and its text puts Fig. 12b's rise in the lossless
#: fabric's core (§7.1: "A higher oversubscription ratio would also increase latency due to
#: increased buffering at the core of the network", "the delay increases due to congestion and PFC
#: pauses in core network"). So the section's fabric is lossless: on a lossy one the flows lose
#: packets at the oversubscribed uplinks and back off, where PFC instead holds them, and 1Pipe's
#: packets with them, in queues back to the hosts (both measured: docs/onepipe.md, Fig. 12).
FIG12_FABRIC = "lossless"
FIG12_FABRICS = ("lossless", "lossy")


def pfc_headroom_bytes(rate_bps: int, delay_ns: int, mtu: int) -> int:
    """What a lossless ingress still takes after it crosses XOFF, the standard PFC headroom rule
    (IEEE 802.1Qbb: the buffer absorbs what is in flight while the pause takes effect): the pause's
    way to the peer and the data already on its way back (2 x rate x delay), the frame this port is
    sending when XOFF is crossed (the pause waits behind it, netstack.switch) and the one the peer
    has started when the pause arrives (a pause acts at a frame boundary), and the pause frame's own
    line time; frames as the line counts them (preamble, FCS and gap included)."""
    in_flight = -(-2 * rate_bps * delay_ns // 8_000_000_000)
    return in_flight + 2 * wire_bytes(mtu + 14) + wire_bytes(MIN_FRAME)


def pfc_xoff_bytes(docs: list[dict[str, Any]]) -> int:
    """The XOFF that keeps every fabric of ``docs`` lossless: our switch's buffer is per egress port
    (``buffer`` bytes) while XOFF counts what each ingress port has queued anywhere, so no egress
    can overflow when, for every port, its buffer holds XOFF plus its headroom from each other port
    of its switch (any of them may send all it has to it). The least such XOFF over every port of
    every fabric, so that one threshold serves all of them (a ratio's rows differ in the uplinks
    only; the 1:1 fabric's 800 Gbit/s uplinks, with the most bytes in flight, set it)."""
    best: int | None = None
    for doc in docs:
        topo = topology_from_dict(doc)
        for node in topo.nodes:
            if node.kind is not NodeKind.SWITCH:
                continue
            links = topo.links_of(node.name)
            heads = [pfc_headroom_bytes(lk.rate_bps, lk.delay_ns, lk.mtu) for lk in links]
            for i, egress in enumerate(links):
                others = [h for j, h in enumerate(heads) if j != i]
                if others:
                    x = (egress.buffer_bytes - sum(others)) // len(others)
                    best = x if best is None else min(best, x)
    if best is None or best <= 0:
        raise ValueError("no positive XOFF fits these fabrics' buffers")
    return best


def _plain(ratio: int) -> dict[str, Any]:
    return fabric_topology(tors=4, hosts_per_tor=8, uplink_rate=f"{800 / ratio:g}Gbit",
                           name=f"onepipe-fabric-{ratio}to1")


#: XOFF by the headroom rule over the section's fabrics (pfc_xoff_bytes: 7,951 B with 200 KB
#: buffers); XON 10 % below it, as the shipped lossless topologies have it (netstack/tcd/paper.py)
PFC_XOFF_BYTES = pfc_xoff_bytes([_plain(r) for r in sorted({1, *FIG12_RATIOS})])
PFC_XON_BYTES = PFC_XOFF_BYTES * 9 // 10


def fabric(ratio: int, lossless: bool = FIG12_FABRIC == "lossless") -> dict[str, Any]:
    """The 32-host fabric with its ToR uplinks at ``8 x 100 / ratio`` Gbit/s (``ratio``:1); with
    ``lossless`` every switch port has PFC on (:data:`PFC_XOFF_BYTES`, :data:`PFC_XON_BYTES`)."""
    doc = _plain(ratio)
    if not lossless:
        return doc
    doc["topology"]["name"] += "-lossless"
    switches = {n["name"] for n in doc["nodes"] if n["kind"] == "switch"}
    pfc = {"lossless": True, "xoff": f"{PFC_XOFF_BYTES}B", "xon": f"{PFC_XON_BYTES}B"}
    for link in doc["links"]:
        ends = {end: {"switch": dict(pfc)} for end in ("a", "b") if link[end] in switches}
        if ends:
            link["features"] = ends
    return doc


def fig12_points(scale: float, fabrics: tuple[str, ...] = (FIG12_FABRIC,)) -> list[Point]:
    """12a (flows at 1:1), then 12b (ratios with FIG12_RATIO_FLOWS flows; its 1:1 is 12a's point),
    on each of ``fabrics`` in turn (the section's own first: the paper's comparison takes the first
    row that matches)."""
    dur = max(1, round(FIG12_DURATION_NS * scale))
    todo = [(f, 1) for f in FIG12_FLOWS] + [(FIG12_RATIO_FLOWS, r) for r in FIG12_RATIOS if r != 1]
    for fab in fabrics:
        if fab not in FIG12_FABRICS:
            raise ValueError(f"fabric {fab!r}: one of {', '.join(FIG12_FABRICS)}")
    return [Point("fig12", RunSpec("onepipe", fabric(ratio, fab == "lossless"), SEED, dur,
                                   {"procs": FIG12_PROCS, "rate": FIG12_RATE, "fanout": FANOUT, "size": SIZE,
                                    "t_beacon_ns": T_BEACON_NS, "mode": mode, "bg_flows": flows,
                                    "variant": FIG12_VARIANT, "nic_ns": NIC_NS}),
                  {"system": system, "flows": flows, "ratio": ratio, "variant": FIG12_VARIANT, "fabric": fab})
            for fab in fabrics for mode, system in FIG12_SYSTEMS for flows, ratio in todo]


def fig12_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    lat = res["latency_ns"]
    bg = res.get("background") or {}
    fab = bg.get("fabric") or {}
    nics = bg.get("nics") or {}
    return [{**meta, "mean_us": None if lat["mean"] is None else lat["mean"] / 1e3,
             "p99_us": None if lat["p99"] is None else lat["p99"] / 1e3, "delivered": res["delivered"],
             "sent": res["sent"], "order_ok": res["order"]["ok"], "bg_goodput_gbps": bg.get("goodput_gbps", 0.0),
             "bg_retransmits": bg.get("retransmits", 0),
             # what the fabric did: drops at the switches' queues, pauses (XOFF crossings) the switches
             # sent, and the pauses the hosts' NICs obeyed (None: a run without flows has no counters)
             "fabric_drops": fab.get("queue_drops"), "switch_pauses": fab.get("pauses_tx"),
             "host_pauses": nics.get("pauses")}]


def fig12_table(rows: list[dict[str, Any]]) -> str:
    from ..output import format_table

    def n(v: Any) -> str:
        return "-" if v is None else str(v)

    return format_table(["1Pipe", "fabric", "flows/host", "oversub.", "mean us", "p99 us", "delivered", "TCP Gbit/s",
                         "TCP retx", "drops", "pauses (sw/host)", "order"],
                        [[r["system"], r.get("fabric", "lossy"), r["flows"], f"{r['ratio']}:1",
                          "-" if r["mean_us"] is None else f"{r['mean_us']:.2f}",
                          "-" if r["p99_us"] is None else f"{r['p99_us']:.2f}", f"{r['delivered']}/{r['sent']}",
                          f"{r['bg_goodput_gbps']:.0f}", r["bg_retransmits"], n(r.get("fabric_drops")),
                          f"{n(r.get('switch_pauses'))}/{n(r.get('host_pauses'))}", "ok" if r["order_ok"] else "BROKEN"]
                         for r in rows])


__all__ = ["FIG12_FABRIC", "FIG12_FABRICS", "FIG12_FLOWS", "FIG12_RATIOS", "FIG12_RATIO_FLOWS", "PFC_XOFF_BYTES",
           "PFC_XON_BYTES", "fabric", "fig12_points", "fig12_rows", "fig12_table", "pfc_headroom_bytes",
           "pfc_xoff_bytes"]
