"""Fig. 12 on a lossless fabric (netstack/bench/onepipe/fig12.py, netstack/onepipe/background.py;
1Pipe: Scalable Total Order Communication in Data Center Networks, §7.1: its testbed is RoCEv2
with PFC, and Fig. 12b's rise is put down to "congestion and PFC pauses in core network"):
the thresholds keep every port's buffer from overflowing, the hosts' NICs obey their ToR's
pauses, and a short run under the flows drops nothing anywhere and keeps 1Pipe's total order
(where the lossy fabric drops thousands of frames)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from headers.pfc import build_pfc_frame, quanta_to_ns
from netstack.bench.onepipe import fig12
from netstack.onepipe.scenarios import fabric_topology
from netstack.sim.network import Network
from netstack.sim.nic import HostNic, install_nics
from netstack.sim.scenario import resolve_topology, run


def test_thresholds_leave_headroom_in_every_egress_buffer() -> None:
    assert fig12.PFC_XON_BYTES < fig12.PFC_XOFF_BYTES
    # 100 Gbit/s, 250 ns: 2 x 3,125 B in flight, 2 full frames (1,538 B on the line) and the pause (84 B)
    assert fig12.pfc_headroom_bytes(100 * 10**9, 250, 1500) == 6_250 + 2 * 1_538 + 84
    for ratio in {1, *fig12.FIG12_RATIOS}:
        net = Network(resolve_topology(fig12.fabric(ratio)), seed=1)  # the ports as the simulator runs them
        for name, sn in net.switches.items():
            cfgs = [p.cfg for p in sn.switch.ports]
            for egress in cfgs:
                assert egress.lossless and egress.xoff_bytes == fig12.PFC_XOFF_BYTES
                assert egress.xon_bytes == fig12.PFC_XON_BYTES and egress.accepts_pfc
                # every other port may queue XOFF plus its headroom here: it must all fit
                worst = sum(fig12.PFC_XOFF_BYTES + fig12.pfc_headroom_bytes(o.rate_bps or 0, o.delay_ns, o.mtu)
                            for o in cfgs if o is not egress)
                assert worst <= egress.buffer_bytes, (ratio, name, egress.name)
    assert "features" not in fig12.fabric(1, lossless=False)["links"][0]


def test_a_paused_host_nic_holds_its_frames_until_the_resume() -> None:
    doc = fabric_topology(tors=1, hosts_per_tor=2, sequencer=False)
    doc["links"] = [{**lk, "features": {"b": {"switch": {"lossless": True, "xoff": "8000B", "xon": "7000B"}}}}
                    for lk in doc["links"]]
    net = Network(resolve_topology(doc), seed=1)
    nics = install_nics(net)
    assert len(nics) == 2 and all(isinstance(n, HostNic) and n.gate is not None for n in nics)
    h1 = net.host("h1")
    nic = h1.nic
    assert isinstance(nic, HostNic) and nic.gate is not None
    gate = nic.gate
    down = net.channel(nic.channel.link, nic.channel.dst)
    quanta = 100
    down.put(build_pfc_frame(b"\x02" * 6, 1, [quanta] + [0] * 7), 0)  # the ToR pauses class 0 now
    net.run(1)
    h1.send(h1.flow("h2").udp(1, 2, b"x" * 64))
    held = quanta_to_ns(quanta, 100 * 10**9)
    net.run(held - 1)
    assert nic.channel.sent == 0 and gate.c.pauses == 1  # held: paused, and the pause never reached the host
    assert h1.rx_unclaimed == 0
    down.put(build_pfc_frame(b"\x02" * 6, 1, [0] * 8), net.now)  # resumed before the pause ran out
    net.run(net.now + 1)
    assert nic.channel.sent == 1 and gate.c.resumes == 1


def _short(fabric_name: str) -> dict[str, Any]:
    pt = next(p for p in fig12.fig12_points(1.0, (fabric_name,))
              if p.meta["flows"] == 10 and p.meta["ratio"] == 4 and p.meta["system"] == "1pipe")
    doc = run(replace(pt.spec, duration_ns=30_000))
    return {**fig12.fig12_rows(doc, pt.meta)[0], "fabric_counters": doc["result"]["background"]["fabric"]}


def test_a_short_lossless_run_drops_nothing_and_keeps_total_order() -> None:
    row = _short("lossless")
    assert row["fabric"] == "lossless" and row["bg_goodput_gbps"] > 100  # the flows did run, at 4:1
    assert row["fabric_drops"] == 0 and row["fabric_counters"]["drops_by_port"] == {}
    assert row["bg_retransmits"] == 0  # nothing was lost end to end either
    assert row["switch_pauses"] > 0 and row["host_pauses"] > 0  # PFC did the work, hosts included
    assert row["order_ok"] and row["delivered"] == row["sent"] > 0
    lossy = _short("lossy")  # the same run without PFC: the uplinks drop and the flows retransmit
    assert lossy["fabric_drops"] > 0 and lossy["bg_retransmits"] > 0 and lossy["switch_pauses"] == 0
