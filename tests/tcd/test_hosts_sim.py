"""TCD's end hosts in virtual time: RateSender on EngineSender (ECT(0) data), TcdReceiverApp (the ECN
bits of each frame, CNPs back to each sender's port) through a switch port that marks CE above its
ECN threshold: two DCQCN flows into one 1 Gbit/s port cut their rates; fixed flows keep theirs."""

from __future__ import annotations

from netstack.sim.network import Network
from netstack.sim.transport import EngineSender
from netstack.tcd.dcqcn import DcqcnParams, RateSender
from netstack.tcd.np import TcdReceiver
from netstack.tcd.simhosts import TcdReceiverApp
from netstack.topo.model import loads_topology
from tests.topologies import H1, H2, H3, SW1, header, link

GBIT = 1_000_000_000
PORT = 40300
#: h1, h2 -> sw1 -> h3, 1 Gbit/s everywhere: sw1's port toward h3 is the bottleneck; it marks CE
#: above 30 KB of queue
TOPOLOGY = (header("tcd-hosts", prefix="tcdh", rate="1Gbit", delay="1us", buffer="2MB") + H1 + H2 + H3 + SW1
            + link("h1", "sw1", named=True) + link("h2", "sw1", named=True)
            + link("sw1", "h3", named=True, extra='[links.features.a]\nswitch = { ecn_threshold = "30KB" }\n'))
P = DcqcnParams.scaled(GBIT, 1)  # the paper's timers (55 us, N = 50 us), rates in proportion to 1 Gbit/s


def run(modes: tuple[str, str], *, rate: int | None = None, tcd: bool = True, size: int = 2_000_000,
        tos: int = 0x02) -> tuple[Network, list[RateSender], TcdReceiverApp]:
    net = Network(loads_topology(TOPOLOGY), seed=1)
    app = TcdReceiverApp(net.host("h3"), TcdReceiver(P, tcd=tcd), PORT)
    senders = []
    for i, (host, mode) in enumerate(zip(("h1", "h2"), modes, strict=True)):
        eng = RateSender(P, flow=i + 1, mode=mode, size_bytes=size, rate_bps=rate, now_ns=net.now)
        EngineSender(net.host(host), "h3", eng, dport=PORT, tos=tos)
        senders.append(eng)
    net.run(2_000_000_000)
    return net, senders, app


def test_two_dcqcn_flows_into_one_port_get_cnps_and_cut():
    net, senders, app = run(("dcqcn", "dcqcn"))
    res = app.result()
    assert net.switch("sw1").counters()["p-h3"]["ecn_marked"] > 0
    assert res["cnps_sent"] > 0 and res["cnps_ce"] == res["cnps_sent"] and res["malformed"] == 0
    for i, s in enumerate(senders):
        c = s.counters()
        f = res["flows"][str(i + 1)]
        assert s.done and c["cnps_ce"] > 0 and c["rate_cuts"] == c["cnps_ce"]
        assert c["min_rc_bps"] < GBIT * 0.6  # the DCQCN rate dropped
        assert f["complete"] and f["unique"] == c["packets_sent"] and f["ce"] > 0 and f["fct_ns"] > 0
        assert f["cnps_ce"] == c["cnps_ce"]  # every CNP reached its sender's port
        assert len(s.rate_log) > 2
    # they shared the port: both took clearly longer than one flow alone at line rate (~16 ms)
    assert min(res["flows"][k]["fct_ns"] for k in ("1", "2")) > 20_000_000


def test_fixed_flows_keep_their_rate():
    _, senders, app = run(("fixed", "fixed"), rate=600_000_000)
    res = app.result()
    assert res["cnps_sent"] > 0
    for s in senders:
        c = s.counters()
        assert c["cnps_ce"] > 0 and c["rate_cuts"] == 0 and c["rc_bps"] == c["min_rc_bps"] == 600_000_000


def test_data_goes_out_ect0_and_a_plain_np_sees_ce_only():
    _, _, app = run(("dcqcn", "fixed"), rate=None, tcd=False)
    flows = app.result()["flows"]
    assert flows["1"]["not_ect"] == 0 and flows["1"]["ect"] > 0  # ECT(0) from the EngineSender's TOS


def test_ue_marked_data_gets_cnp_ue_and_a_tcd_sender_holds():
    # packets that leave as ECT(1), the UE codepoint (as if an undetermined port had marked them):
    # the TCD receiver answers CNP-UE; the DCQCN + TCD sender holds, the baseline cuts
    _, senders, app = run(("dcqcn+tcd", "dcqcn"), tos=0x01, size=300_000)
    res = app.result()
    tcd_s, base = (s.counters() for s in senders)
    assert res["cnps_ue"] == res["cnps_sent"] > 0 and res["flows"]["1"]["ue"] == 300
    assert tcd_s["holds"] == tcd_s["cnps_ue"] > 0 and tcd_s["rate_cuts"] == 0 and tcd_s["min_rc_bps"] == GBIT
    assert base["rate_cuts"] == base["cnps_ue"] > 0 and base["min_rc_bps"] < GBIT // 10
    assert res["flows"]["1"]["fct_ns"] < res["flows"]["2"]["fct_ns"]


def test_tcd_receiver_app_counts_garbage():
    net = Network(loads_topology(TOPOLOGY), seed=1)
    app = TcdReceiverApp(net.host("h3"), TcdReceiver(P), PORT)
    h1 = net.host("h1")
    h1.send(h1.flow("h3").udp(40001, PORT, b"junk"))
    net.run(10_000_000)
    assert app.malformed == 1 and app.result()["datagrams"] == 0
