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
"""

from __future__ import annotations

from typing import Any

from ...onepipe.scenarios import fabric_topology
from ...sim.scenario import RunSpec
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


def fabric(ratio: int) -> dict[str, Any]:
    """The 32-host fabric with its ToR uplinks at ``8 x 100 / ratio`` Gbit/s (``ratio``:1)."""
    return fabric_topology(tors=4, hosts_per_tor=8, uplink_rate=f"{800 / ratio:g}Gbit",
                           name=f"onepipe-fabric-{ratio}to1")


def fig12_points(scale: float) -> list[Point]:
    """12a (flows at 1:1), then 12b (ratios with FIG12_RATIO_FLOWS flows; its 1:1 is 12a's point)."""
    dur = max(1, round(FIG12_DURATION_NS * scale))
    todo = [(f, 1) for f in FIG12_FLOWS] + [(FIG12_RATIO_FLOWS, r) for r in FIG12_RATIOS if r != 1]
    return [Point("fig12", RunSpec("onepipe", fabric(ratio), SEED, dur,
                                   {"procs": FIG12_PROCS, "rate": FIG12_RATE, "fanout": FANOUT, "size": SIZE,
                                    "t_beacon_ns": T_BEACON_NS, "mode": mode, "bg_flows": flows,
                                    "variant": FIG12_VARIANT, "nic_ns": NIC_NS}),
                  {"system": system, "flows": flows, "ratio": ratio, "variant": FIG12_VARIANT})
            for mode, system in FIG12_SYSTEMS for flows, ratio in todo]


def fig12_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    lat = res["latency_ns"]
    bg = res.get("background") or {}
    return [{**meta, "mean_us": None if lat["mean"] is None else lat["mean"] / 1e3,
             "p99_us": None if lat["p99"] is None else lat["p99"] / 1e3, "delivered": res["delivered"],
             "sent": res["sent"], "order_ok": res["order"]["ok"], "bg_goodput_gbps": bg.get("goodput_gbps", 0.0),
             "bg_retransmits": bg.get("retransmits", 0)}]


def fig12_table(rows: list[dict[str, Any]]) -> str:
    from ..output import format_table

    return format_table(["1Pipe", "flows/host", "oversub.", "mean us", "p99 us", "delivered", "TCP Gbit/s",
                         "TCP retx", "order"],
                        [[r["system"], r["flows"], f"{r['ratio']}:1",
                          "-" if r["mean_us"] is None else f"{r['mean_us']:.2f}",
                          "-" if r["p99_us"] is None else f"{r['p99_us']:.2f}", f"{r['delivered']}/{r['sent']}",
                          f"{r['bg_goodput_gbps']:.0f}", r["bg_retransmits"], "ok" if r["order_ok"] else "BROKEN"]
                         for r in rows])


__all__ = ["FIG12_FLOWS", "FIG12_RATIOS", "FIG12_RATIO_FLOWS", "fig12_points", "fig12_rows", "fig12_table"]
