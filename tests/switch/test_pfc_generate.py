"""Generating PFC from an ingress threshold on lossless ports (802.1Qbb; LinkGuardian Algorithm 2)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.pfc import MAX_QUANTA, parse_pfc_frame
from headers.registry import PFC_DST_MAC
from netstack.switch import CONTROL_CLASS, PortConfig, Switch, SwitchConfig

from . import GBPS, MS, class_tos, mac, make_switch, traced, udp_frame

XOFF, XON = 5000, 2000


def lossless_switch(xoff=XOFF, xon=XON, **p1):
    lossless = {"lossless": True, "xoff_bytes": xoff, "xon_bytes": xon}
    return make_switch(3, p0=lossless, p2=lossless, p1={"rate_bps": GBPS // 10, **p1},
                       static_fdb={"02:00:00:00:00:02": "p1"})


def pfc_out(out, port):
    return [parse_pfc_frame(f) for p, f in out if p == port and f[12:14] == b"\x88\x08"]


def record_pfc(sw):
    log = []
    real = sw._send_pfc

    def spy(p, cls, quanta, t):
        log.append((p.name, cls, quanta, t))
        real(p, cls, quanta, t)

    sw._send_pfc = spy
    return log


def test_pause_at_xoff_resume_at_xon_out_of_the_ingress_port():
    sw = lossless_switch()
    out = []
    for i in range(8):  # 1000 B frames; the 1st starts at once, so the 6th brings the count to 5000
        sw.receive("p0", udp_frame(size=1000, tos=class_tos(3)), i)
        out += sw.transmit(i)
    pauses = pfc_out(out, "p0")
    assert len(pauses) == 1
    assert pauses[0].class_enable == 1 << 3 and pauses[0].quanta[3] == MAX_QUANTA
    frame = next(f for p, f in out if p == "p0")
    assert frame[:6] == PFC_DST_MAC and frame[6:12] == sw.ports[0].mac
    assert sw.counters()["p0"]["pfc_asserted"][3]
    assert sw.counters()["p0"]["ingress_bytes"][3] == 7000
    # draining: 1024 B of line time = 81.92 us each at 100 Mb/s; resume when 2000 B remain
    out = []
    t = 0
    while not pfc_out(out, "p0"):
        t += 10_000
        out += sw.transmit(t)
    resumes = pfc_out(out, "p0")
    assert len(resumes) == 1 and resumes[0].quanta[3] == 0
    assert sw.counters()["p0"]["ingress_bytes"][3] == XON
    state = sw.counters()["p0"]
    assert (state["pauses_tx"], state["resumes_tx"]) == (1, 1)
    assert not state["pfc_asserted"][3]


def test_peer_mac_makes_pfc_unicast():
    sw = make_switch(2, p0={"lossless": True, "xoff_bytes": 100, "xon_bytes": 0, "peer_mac": "02:00:00:00:00:99"},
                     p1={"rate_bps": GBPS})
    sw.receive("p0", udp_frame(size=200), 0)
    sw.receive("p0", udp_frame(size=200), 0)
    frames = [f for p, f in sw.transmit(0) if p == "p0"]
    assert frames[0][:6] == bytes.fromhex("020000000099")


def test_pfc_goes_ahead_of_queued_data_but_after_the_frame_on_the_wire():
    sw = make_switch(2, p0={"lossless": True, "xoff_bytes": 3000, "xon_bytes": 1000, "rate_bps": GBPS},
                     p1={"rate_bps": GBPS // 100})
    tr = traced(sw)
    for _ in range(5):  # a backlog on p0's egress (p1 -> p0)
        sw.receive("p1", udp_frame(src=7, dst=8, size=1000, tos=class_tos(7)), 0)
    for i in range(4):
        sw.receive("p0", udp_frame(src=1, dst=2, size=1000), 100 + i)
    sw.transmit(10 * MS)
    kinds = [d.cls for d in tr.on("p0")]
    # the pause (at 3000 B) goes at the first boundary; the resume (at 1000 B) much later
    assert kinds == [7, CONTROL_CLASS, 7, 7, 7, 7, CONTROL_CLASS]
    pfc = tr.on("p0")[1]
    assert pfc.start == tr.on("p0")[0].end == 8192  # the frame on the wire finished first


def test_pause_is_refreshed_before_it_expires_and_stops_after_resume():
    sw = make_switch(2, p0={"lossless": True, "xoff_bytes": 1500, "xon_bytes": 500, "rate_bps": GBPS},
                     p1={"rate_bps": 1_000_000})  # 1 Mb/s: 1000 B frames take ~8.2 ms each
    for _ in range(4):  # the first starts at once; 3000 B stay queued until ~24.6 ms
        sw.receive("p0", udp_frame(size=1000), 0)
    half_life = 65535 * 512 // 2  # ns at 1 Gb/s
    assert sw.next_deadline() <= half_life
    out = []
    t = 0
    while t < 40 * MS:
        t += MS // 2
        out += sw.transmit(t)
    pfc = pfc_out(out, "p0")
    assert [p.quanta[0] for p in pfc] == [MAX_QUANTA] * (1 + sw.counters()["p0"]["pause_refreshes_tx"]) + [0]
    assert sw.counters()["p0"]["pause_refreshes_tx"] >= 1
    assert sw.counters()["p0"]["resumes_tx"] == 1
    refreshes = sw.counters()["p0"]["pause_refreshes_tx"]
    sw.transmit(200 * MS)
    assert sw.counters()["p0"]["pause_refreshes_tx"] == refreshes


def test_feature_pause_and_threshold_combine():
    sw = make_switch(2, p0={"lossless": True, "xoff_bytes": 1500, "xon_bytes": 500}, p1={"rate_bps": GBPS // 10})
    log = record_pfc(sw)
    sw.pause_class("p0", 0, True, now_ns=0)
    sw.pause_class("p0", 0, True, now_ns=1)  # no state change: no frame
    for i in range(3):  # the 1st starts at once, then 2000 B queued: XOFF reached while already paused
        sw.receive("p0", udp_frame(size=1000), 2 + i)
    sw.pause_class("p0", 0, False, now_ns=5)  # still above XON: stays paused
    assert [q for _, _, q, _ in log] == [MAX_QUANTA]
    sw.transmit(10 * MS)  # drains below XON: resume
    assert [q for _, _, q, _ in log] == [MAX_QUANTA, 0]


def test_disabling_lossless_at_run_time_resumes_the_peer():
    sw = make_switch(2, p0={"lossless": True, "xoff_bytes": 1500, "xon_bytes": 500}, p1={"rate_bps": GBPS // 10})
    log = record_pfc(sw)
    for _ in range(3):
        sw.receive("p0", udp_frame(size=1000), 0)
    sw.update_port("p0", lossless=False)
    assert [q for _, _, q, _ in log] == [MAX_QUANTA, 0]


ops = st.lists(
    st.one_of(
        # a burst of `count` frames from one ingress port and class, back to back at one instant
        st.tuples(st.just("rx"), st.integers(0, 10_000), st.sampled_from(["p0", "p2"]), st.integers(0, 1),
                  st.integers(60, 1514), st.integers(1, 6)),
        st.tuples(st.just("tx"), st.integers(0, 150_000), st.just(""), st.just(0), st.just(0), st.just(0)),
    ),
    min_size=4, max_size=60,
)


@settings(max_examples=120)
@given(ops, st.integers(3000, 60_000), st.sampled_from([(1500, 500), (3000, 1500), (5000, 2000)]))
def test_exactly_one_pause_and_resume_per_threshold_crossing(events, buffer, thresholds):
    xoff, xon = thresholds
    sw = lossless_switch(xoff, xon, buffer_bytes=buffer)
    tr = traced(sw)
    log = record_pfc(sw)
    src_of = {"p0": 1, "p2": 3}
    accepted = {(p, c): 0 for p in src_of for c in range(2)}
    asserted = dict.fromkeys(accepted, False)
    t = 0
    for kind, gap, port, cls, size, count in events:
        t += gap
        for _ in range(max(count, 1)):
            before = len(log)
            added = dict.fromkeys(accepted, 0)
            if kind == "rx":
                drops = sw.counters()["p1"]["queue_drops"]
                sw.receive(port, udp_frame(src=src_of[port], size=size, tos=class_tos(cls)), t)
                if sw.counters()["p1"]["queue_drops"] == drops:
                    accepted[(port, cls)] += size
                    added[(port, cls)] = size
            else:
                sw.transmit(t)
            check(sw, tr, log, before, accepted, added, asserted, xoff, xon)
    for _ in range(40):  # drain to empty: every pause must be followed by exactly one resume
        t += 100_000
        before = len(log)
        sw.transmit(t)
        check(sw, tr, log, before, accepted, dict.fromkeys(accepted, 0), asserted, xoff, xon)
    assert not any(asserted.values())
    assert sum(q == 0 for *_, q, _ in log) == sum(q != 0 for *_, q, _ in log)
    # the scenario stays shorter than a refresh interval (half of 33.5 ms), so every
    # 0xFFFF frame above is a state change, not a refresh
    assert t < 16 * MS


def check(sw, tr, log, before, accepted, added, asserted, xoff, xon):
    """After one operation: exact accounting, alternation, and state consistent with the thresholds."""
    port_of = {mac(1): "p0", mac(3): "p2"}
    departed = dict.fromkeys(accepted, 0)
    for d in tr.on("p1"):
        departed[(port_of[d.frame[6:12]], d.cls)] += len(d.frame)
    for key in accepted:
        p, c = key
        b = accepted[key] - departed[key]
        assert sw.counters()[p]["ingress_bytes"][c] == b  # the switch's accounting is exact
        new = [q for name, cc, q, _ in log[before:] if (name, cc) == key]
        assert len(new) <= 2 and new.count(0) <= 1 and new.count(MAX_QUANTA) <= 1
        for q in new:  # alternation: a pause only when resumed, a resume only when paused
            assert asserted[key] == (q == 0)
            asserted[key] = q != 0
            if q:
                assert b >= xoff  # only at (or after) reaching XOFF
            else:
                assert b - added[key] <= xon  # only after falling to XON
        if b >= xoff:
            assert asserted[key], "above XOFF without a pause"
        if b <= xon:
            assert not asserted[key], "at or below XON without a resume"
        assert sw.counters()[p]["pfc_asserted"][c] == asserted[key]


def test_lossless_hop_pushes_back_instead_of_dropping():
    """Two switches: s2's lossless ingress pauses s1, so s2 never drops (only s1's lossy buffer may)."""
    s1 = Switch(SwitchConfig("s1", (PortConfig("h", rate_bps=GBPS),
                                    PortConfig("up", rate_bps=GBPS // 10, buffer_bytes=40_000))))
    s2 = Switch(SwitchConfig("s2", (
        PortConfig("down", lossless=True, xoff_bytes=20_000, xon_bytes=15_000, buffer_bytes=40_000,
                   rate_bps=GBPS // 10),
        PortConfig("h", rate_bps=GBPS // 50, buffer_bytes=40_000),
    )))
    t = 0
    sent = 0
    while t < 60 * MS:
        if t < 30 * MS:
            s1.receive("h", udp_frame(src=1, dst=2, size=1000), t)  # 80 Mb/s offered, 20 Mb/s drained
            sent += 1
        for port, frame in s1.transmit(t):
            if port == "up":
                s2.receive("down", frame, t)
        for port, frame in s2.transmit(t):
            if port == "down":
                s1.receive("up", frame, t)  # PFC back to s1
        t += 100_000
    c1, c2 = s1.counters(), s2.counters()
    assert c2["down"]["pauses_tx"] >= 1 and c1["up"]["pauses_rx"] >= 1
    assert c2["h"]["queue_drops"] == 0  # lossless hop: no drops
    assert c1["up"]["queue_drops"] > 0  # the lossy hop upstream absorbs the excess
    assert c2["down"]["ingress_bytes"][0] <= 20_000 + 2 * 1000  # XOFF plus in-flight headroom
