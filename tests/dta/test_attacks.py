"""Forged and garbage frames on the link between the translator and the collector ("Harden what
exists", finding 1; docs/security.md#dta).

One regression test per finding of the probe (each failed on the code before the fix), then
the legitimate resynchronisation that must keep working (DTA §5.3), then a stateful hypothesis
test with an attacker on the link.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from daemons.collector import CollectorShell, PortGuard
from headers.roce import (
    AETH,
    BTH,
    RETH,
    AethKind,
    AtomicAckETH,
    AtomicETH,
    NakCode,
    Opcode,
    aeth_ack,
    aeth_nak,
    build_roce_frame,
    parse_roce_frame,
)
from netstack.dta import BufferedResponder, DTATranslator, RoceResponder, TranslatorConfig, TranslatorFeature
from netstack.dta.collector import ATOMIC_REPLAY
from netstack.dta.requester import MARKS_PER_WINDOW
from netstack.dta.translator import MAX_OPEN_COLUMNS_FACTOR, MAX_TRACKED_REPORTERS

from . import (
    COLLECTOR_IP,
    COLLECTOR_MAC,
    MS,
    REPORTER_IP,
    REPORTER_MAC,
    TRANSLATOR_IP,
    TRANSLATOR_MAC,
    Rig,
    make_memory,
)

PSN_MASK = 0xFFFFFF
SPORT = 49152  # the translator's UDP source port (TranslatorConfig default); our collector answers from it
STRANGER_MAC = REPORTER_MAC  # h1: a host on the network that is not the translator
STRANGER_IP = REPORTER_IP


def forge_response(rig: Rig, qp_name: str, psn: int, *, nak: int | None = NakCode.PSN_SEQUENCE_ERROR,
                   src_mac: bytes = COLLECTOR_MAC, src_ip: bytes = COLLECTOR_IP, dst_mac: bytes = TRANSLATOR_MAC,
                   dst_ip: bytes = TRANSLATOR_IP, sport: int = SPORT, dqpn: int | None = None) -> bytes:
    """An ACKNOWLEDGE with a correct ICRC, by default exactly as the collector would send it
    (a forger who copies every address); ``nak=None`` makes it a positive ACK."""
    qp = rig.nic.qp(qp_name)
    bth = BTH(opcode=Opcode.ACKNOWLEDGE, migreq=1, dqpn=qp.peer_qpn if dqpn is None else dqpn, psn=psn & PSN_MASK)
    aeth = aeth_ack(0) if nak is None else aeth_nak(nak, 0)
    return build_roce_frame(src_mac, dst_mac, src_ip, dst_ip, sport, bth, [aeth])


def forge_write(rig: Rig, qp_name: str, psn: int, payload: bytes, *, offset: int = 0, src_mac: bytes = STRANGER_MAC,
                src_ip: bytes = STRANGER_IP) -> bytes:
    """An RDMA WRITE Only with a correct ICRC, QPN and rkey (a forger who knows them)."""
    qp = rig.nic.qp(qp_name)
    region = rig.mem.region(qp_name)
    bth = BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, dqpn=qp.qpn, psn=psn & PSN_MASK, padcount=-len(payload) & 3)
    return build_roce_frame(src_mac, COLLECTOR_MAC, src_ip, COLLECTOR_IP, 50000, bth,
                            [RETH(region.base_va + offset, region.rkey, len(payload))], payload)


def keywrite_rig(**config) -> Rig:
    return Rig(lambda m: m.add_keywrite(slots=1 << 14, max_redundancy=1), **config)


def executed(rig: Rig, qp_name: str) -> int:
    c = rig.nic.qp(qp_name).c
    return c.writes + c.fetch_adds


# ---------------------------------------------------------------------------------- finding 1
def test_finding1_a_forged_nak_far_behind_does_not_stop_the_collector_writes():
    """Before: the translator rewound to any NAK up to 2**23 behind, the responder then dropped
    every later WRITE as a duplicate (0 of 5,000 executed)."""
    rig = keywrite_rig(grace_reports=1000)
    rig.send_all(rig.reporter.key_write(k, k, 1) for k in range(100))
    tq = rig.tr.qps["keywrite"]
    rig.deliver(rig.tr.on_roce_response(forge_response(rig, "keywrite", tq.psn - (1 << 22)), 0), 0)
    before = executed(rig, "keywrite")
    rig.send_all(rig.reporter.key_write(10_000 + k, k, 1) for k in range(5000))
    assert executed(rig, "keywrite") - before == 5000
    assert rig.tr.c.resyncs == 0 and rig.tr.c.grace_periods == 0 and not rig.tr.in_grace
    assert rig.tr.c.naks_rejected_window == 1
    assert rig.q.keywrite_get(10_000 + 4999) == (4999,)  # the last one is in memory (nothing wrote after it)


def test_finding1_a_nak_for_a_psn_sent_long_ago_is_outside_the_window():
    """With ACKs off the window is what was sent in the last ``nak_window_ns`` (10 s) plus a
    slack: a PSN sent long ago cannot be NAK'd any more, even by a forger with every address."""
    rig = keywrite_rig(grace_reports=50)
    for i in range(4000):  # 20 s of traffic, one report every 5 ms
        rig.send(rig.reporter.key_write(i, i, 1), now=i * 5 * MS)
    tq = rig.tr.qps["keywrite"]
    now = 4000 * 5 * MS
    old = (tq.psn - 3500) & PSN_MASK  # sent at t = 2.5 s, 17.5 s ago (the slack is 1024 PSNs)
    rig.deliver(rig.tr.on_roce_response(forge_response(rig, "keywrite", old), now), now)
    assert rig.tr.c.resyncs == 0 and not rig.tr.in_grace and rig.tr.c.naks_rejected_window == 1
    assert tq.psn == rig.nic.qp("keywrite").epsn


def test_finding1_responses_not_from_our_collector_or_not_for_us_are_dropped_by_reason():
    rig = keywrite_rig(grace_reports=50)
    rig.send_all(rig.reporter.key_write(k, k, 1) for k in range(10))
    tq = rig.tr.qps["keywrite"]
    psn = tq.psn - 5  # inside the window: only the addresses are wrong
    other_mac, other_ip = bytes.fromhex("020000bad001"), bytes([10, 0, 9, 66])
    cases = {
        "responses_rejected_source": [forge_response(rig, "keywrite", psn, src_mac=other_mac),  # IP spoofed only
                                      forge_response(rig, "keywrite", psn, src_ip=other_ip),
                                      forge_response(rig, "keywrite", psn, sport=50000)],
        "responses_rejected_dest": [forge_response(rig, "keywrite", psn, dst_mac=other_mac),
                                    forge_response(rig, "keywrite", psn, dst_ip=other_ip)],
        "response_unknown_qp": [forge_response(rig, "keywrite", psn, dqpn=0x424242)],
    }
    for frames in cases.values():
        for f in frames:
            assert rig.tr.on_roce_response(f, 0) == []
    assert rig.tr.c.resyncs == 0 and not rig.tr.in_grace and tq.psn == rig.nic.qp("keywrite").epsn
    counters = rig.tr.counters()
    assert {k: counters[k] for k in cases} == {k: len(v) for k, v in cases.items()}


# ---------------------------------------------------------------------------------- finding 2
def test_finding2_requests_from_anyone_but_the_bound_peer_are_dropped_without_a_response():
    """Before: the responder executed a well-formed request from any source."""
    rig = keywrite_rig()
    rig.send(rig.reporter.key_write(1, 1, 1))
    qp = rig.nic.qp("keywrite")
    before, epsn = rig.snapshot(), qp.epsn
    forged = [forge_write(rig, "keywrite", epsn, b"EVIL!!!!"),  # a stranger with the right QPN, PSN, rkey
              forge_write(rig, "keywrite", epsn, b"EVIL!!!!", src_ip=TRANSLATOR_IP),  # IP spoofed, own MAC
              forge_write(rig, "keywrite", epsn, b"EVIL!!!!", src_mac=TRANSLATOR_MAC)]  # MAC spoofed, own IP
    for f in forged:
        assert rig.nic.receive(f, 0) == []
    assert rig.snapshot() == before and qp.epsn == epsn and qp.c.requests == 1
    assert rig.nic.counters()["requests_rejected_source"] == 3
    rig.send(rig.reporter.key_write(2, 2, 1))  # the genuine stream goes on
    assert rig.q.keywrite_get(2) == (2,) and rig.tr.c.resyncs == 0


def test_finding2_an_unbound_queue_pair_accepts_nothing():
    """A QP is connected to one peer by the control exchange (the RTR step of a real RC QP);
    before that it drops every request."""
    mem = make_memory(lambda m: m.add_keywrite(slots=1 << 10))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(5))
    info = nic.connect_info()
    tr = DTATranslator(TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP))
    from netstack.dta import Reporter

    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    (frame,) = tr.on_report(rep.frame(rep.key_write(1, 1, 1)), 0)
    assert nic.receive(frame, 0) == [] and nic.qp("keywrite").c.writes == 0
    assert nic.counters()["requests_unbound"] == 1
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP, {"keywrite": tr.qps["keywrite"].local_qpn})
    assert nic.receive(frame, 0) == [] and nic.qp("keywrite").c.writes == 1


# ---------------------------------------------------------------------------------- finding 3
def test_finding3_a_stranger_learns_no_psn_and_cannot_make_a_genuine_write_vanish():
    """Before: a request from anyone with a PSN ahead drew a NAK carrying the expected PSN, and a
    second forged request at that PSN consumed it, so the translator's next WRITE was dropped as
    a duplicate."""
    rig = keywrite_rig()
    rig.send(rig.reporter.key_write(1, 1, 1))
    qp = rig.nic.qp("keywrite")
    probe = forge_write(rig, "keywrite", qp.epsn + 1000, b"probe!!!", offset=8)
    leaked = rig.nic.receive(probe, 0)
    assert leaked == []  # nothing tells the stranger the expected PSN
    guess = qp.epsn if not leaked else parse_roce_frame(leaked[0]).bth.psn
    rig.nic.receive(forge_write(rig, "keywrite", guess, b"EVIL!!!!", offset=16), 0)
    rig.send(rig.reporter.key_write(7, 77, 1))
    assert rig.q.keywrite_get(7) == (77,)
    assert qp.c.naks_psn == 0 and qp.c.duplicates == 0
    assert rig.nic.counters()["requests_rejected_source"] == 2


# ---------------------------------------------------------------------------------- finding 4
def garbage_response(rng: random.Random, rig: Rig) -> bytes:
    """A random response: garbage bytes, or a well-formed ACKNOWLEDGE (correct ICRC) whose
    addresses, QPN, PSN and syndrome are each either right or random."""
    if rng.random() < 0.2:
        return rng.randbytes(rng.randrange(0, 90))
    names = list(rig.tr.qps)
    name = rng.choice(names)

    def pick(right, wrong):
        return right if rng.random() < 0.8 else wrong

    bth = BTH(opcode=pick(Opcode.ACKNOWLEDGE, Opcode.ATOMIC_ACKNOWLEDGE), migreq=1,
              dqpn=pick(rig.tr.qps[name].local_qpn, rng.randrange(1 << 24)), psn=rng.randrange(1 << 24))
    syndrome = pick(AethKind.NAK << 5 | NakCode.PSN_SEQUENCE_ERROR, rng.choice([0, 0x20, 0x61, 0x62, 0x63, 0x1F]))
    ext = [AETH(syndrome, rng.randrange(1 << 24))]
    if bth.opcode == Opcode.ATOMIC_ACKNOWLEDGE:
        ext.append(AtomicAckETH(rng.getrandbits(64)))
    return build_roce_frame(pick(COLLECTOR_MAC, rng.randbytes(6)), pick(TRANSLATOR_MAC, rng.randbytes(6)),
                            pick(COLLECTOR_IP, rng.randbytes(4)), pick(TRANSLATOR_IP, rng.randbytes(4)),
                            pick(SPORT, rng.randrange(1 << 16)), bth, ext)


def two_rigs(**config):
    def setup(m):
        m.add_keywrite(slots=1 << 14, max_redundancy=2)
        m.add_keyincrement(slots=1 << 10)
        m.add_append_list(3, entries=1 << 12, batch=2)

    return Rig(setup, **config), Rig(setup, **config)


def test_finding4_garbage_responses_cause_no_resync_and_lose_no_report():
    """Before: garbage NAKs caused 1,283 resyncs in the probe, and a third of the genuine
    reports were dropped in grace periods. Same reports into two rigs, garbage only into one:
    the collector memory must come out identical."""
    rng = random.Random(4)
    rig, clean = two_rigs(grace_reports=20, ack_every=8)
    for i in range(1500):
        report = [rig.reporter.key_write(i, i * 3, 2), rig.reporter.append(3, i),
                  rig.reporter.key_increment(i % 50, 1, 2)][i % 3]
        rig.send(report)
        clean.send(report)
        for _ in range(2):
            rig.deliver(rig.tr.on_roce_response(garbage_response(rng, rig), 0), 0)
    c = rig.tr.c
    assert c.resyncs == 0 and c.grace_periods == 0 and c.grace_dropped == 0 and c.internal_errors == 0
    assert rig.snapshot() == clean.snapshot()
    assert {n: executed(rig, n) for n in rig.tr.qps} == {n: executed(clean, n) for n in clean.tr.qps}
    rejected = (c.responses_rejected_source + c.responses_rejected_dest + c.naks_rejected_window
                + c.acks_rejected_window + c.response_unknown_qp + c.response_unexpected + c.response_malformed)
    assert rejected == 3000 and c.responses == 3000 + clean.tr.c.responses


# ---------------------------------------------------------------------------------- legitimate resync
def test_a_genuinely_lost_request_still_resyncs_with_acks_on():
    rig = Rig(lambda m: m.add_append_list(5, entries=64, batch=1), grace_reports=3, ack_every=2)
    qp = rig.nic.qp("append-5")
    rig.send_all(rig.reporter.append(5, v) for v in range(4))  # two ACKs: the window starts after them
    rig.send(rig.reporter.append(5, 4), drop=lambda f: True)  # lost on the wire
    rig.send(rig.reporter.append(5, 5))  # PSN sequence error -> NAK -> resync
    assert rig.tr.c.resyncs == 1 and rig.tr.in_grace and rig.tr.qps["append-5"].psn == qp.epsn
    rig.send_all(rig.reporter.append(5, v) for v in range(6, 9))  # the grace period
    rig.send_all(rig.reporter.append(5, v) for v in range(9, 12))
    assert rig.q.append_read(5) == [0, 1, 2, 3, 0, 0, 9, 10, 11]
    assert rig.tr.c.naks_rejected_window == 0 and rig.tr.c.acks_rejected_window == 0


def test_responses_lagging_behind_the_time_window_still_resync_while_acks_flow():
    """Measured on the live testbed under overload: the ToR took more than a second to get to the
    collector's ATOMIC ACKs. While responses keep moving ``una`` it bounds the window by itself,
    so a late genuine NAK is still believed (here with a 1 ms window and no slack)."""
    rig = Rig(lambda m: m.add_append_list(5, entries=64, batch=1), grace_reports=2, ack_every=1,
              nak_window_ns=MS, nak_window_slack=0)
    held = []
    for v in range(20):
        for f in rig.tr.on_report(rig.reporter.frame(rig.reporter.append(5, v)), v * MS // 10):
            if v != 10:  # request 10 is lost on the wire
                held += rig.nic.receive(f, v * MS // 10)
    for r in held:  # everything comes back 5 ms later, every request older than the window
        rig.tr.on_roce_response(r, 5 * MS)
    assert rig.tr.c.acks == 10 and rig.tr.c.resyncs == 1 and rig.tr.c.naks_rejected_window == 0
    rig.send_all((rig.reporter.append(5, v) for v in range(20, 25)), now=5 * MS)
    assert rig.q.append_read(5)[-3:] == [22, 23, 24] and rig.tr.qps["append-5"].psn == rig.nic.qp("append-5").epsn


def test_a_loss_before_a_long_idle_period_still_resyncs():
    """The window counts from the newest send history entry older than ``nak_window_ns``: a
    request lost just before the QP went idle is still NAK-able when the next one, much later,
    reveals the gap."""
    rig = Rig(lambda m: m.add_append_list(5, entries=64, batch=1), grace_reports=1)
    rig.send(rig.reporter.append(5, 0), now=0)
    rig.send(rig.reporter.append(5, 1), now=MS, drop=lambda f: True)
    later = 60_000 * MS  # a minute later, with the 10 s default window
    rig.send(rig.reporter.append(5, 2), now=later)
    assert rig.tr.c.resyncs == 1 and rig.tr.c.naks_rejected_window == 0
    rig.send(rig.reporter.append(5, 3), now=later)  # the one-report grace period
    rig.send(rig.reporter.append(5, 4), now=later)
    assert rig.q.append_read(5) == [0, 0, 0, 4]


def test_the_window_survives_psn_wrap_around_with_acks_off():
    """With ACKs off ``una`` only moves at a resync; after 2**24 PSNs its age would wrap and
    shrink the window to nothing. It is pulled along every 2**16 new PSNs (white-box: the QP
    is put just before such a boundary, as if 2**24 - 50 requests had gone by unacknowledged)."""
    rig = keywrite_rig(grace_reports=0, nak_window_ns=None)  # no time bound: una alone bounds it
    tq = rig.tr.qps["keywrite"]
    boundary = (tq.psn | 0xFFFF) + 1
    tq.psn = tq.high = (boundary - 100) & PSN_MASK
    tq.una = (boundary + 50) & PSN_MASK  # 2**24 - 50 behind: looks 50 *ahead* modulo 2**24
    for k in range(200):
        rig.tr.on_report(rig.reporter.frame(rig.reporter.key_write(k, k, 1)), 0)  # frames not delivered
    rig.tr.on_roce_response(forge_response(rig, "keywrite", tq.psn - 120), 0)  # sent 120 requests ago
    assert rig.tr.c.resyncs == 1 and rig.tr.c.naks_rejected_window == 0


def test_a_collector_receive_buffer_overflow_resyncs():
    """The loss DTA §5.3 is about: the collector NIC's buffer overflows; the next request it
    takes draws a NAK that the translator believes, and everything after the grace period lands."""
    mem = make_memory(lambda m: m.add_keywrite(slots=1 << 16, max_redundancy=1))
    nic = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(8))
    buf = BufferedResponder(nic, capacity=16, service_ns=10_000)
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, grace_reports=100))
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP, {n: q.local_qpn for n, q in tr.qps.items()})
    from netstack.dta import CollectorQuery, Reporter

    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    now = 0
    for k in range(3000):
        now = k * 5_000 if k < 200 else 200 * 5_000 + (k - 200) * 20_000  # a burst twice too fast, then slower
        for f in tr.on_report(rep.frame(rep.key_write(k, k, 1)), now):
            buf.offer(f, now)
        for _, resp in buf.poll(now):
            tr.on_roce_response(resp, now)
    for _, resp in buf.poll(now + 10**9):
        tr.on_roce_response(resp, now + 10**9)
    assert buf.c.overflow_drops > 0 and tr.c.resyncs >= 1 and tr.c.naks_rejected_window == 0
    assert tr.qps["keywrite"].psn == nic.qp("keywrite").epsn  # in sequence again
    q = CollectorQuery(mem)  # the last 500 keys all landed (a few share a slot with a later key)
    assert sum(q.keywrite_get(k) == (k,) for k in range(2500, 3000)) >= 495


# ---------------------------------------------------------------------------------- attacker on the link
class FakeSwitch:
    """What TranslatorFeature needs of a switch: ports, attach/detach, enqueue (kept per port)."""

    def __init__(self, *names: str) -> None:
        self.ports = [SimpleNamespace(name=n) for n in names]
        self.queued: dict[str, list[bytes]] = {n: [] for n in names}

    def attach_feature(self, port, feature):
        pass

    def detach_feature(self, port, feature):
        pass

    def enqueue(self, port, frame, cls, now_ns=None):
        self.queued[port].append(frame)
        return True

    def take(self, port: str) -> list[bytes]:
        out, self.queued[port] = self.queued[port], []
        return out


class FakePort:
    """What the collector daemon's shell needs of its PacketPort."""

    ifname = "eth0"
    send_errors = tx_dropped = kernel_packets = kernel_drops = 0

    def __init__(self) -> None:
        self.inbox: list[bytes] = []
        self.sent: list[bytes] = []

    def recv_batch(self, limit: int) -> list[bytes]:
        out, self.inbox = self.inbox[:limit], self.inbox[limit:]
        return out

    def send_batch(self, frames) -> int:
        self.sent += frames
        return len(frames)

    def read_kernel_stats(self):
        return 0, 0


def attack_setup(m):
    m.add_keywrite(slots=1 << 10, max_redundancy=2)
    m.add_keyincrement(slots=1 << 8, max_redundancy=2)
    m.add_append_list(3, entries=256, batch=4)
    m.add_sketch(7, rows=2, columns=8, reporters=(1, 2), batch_columns=4, epochs=2)


U24 = st.integers(0, PSN_MASK)
REQUEST_OPS = [Opcode.RDMA_WRITE_ONLY, Opcode.FETCH_ADD, Opcode.COMPARE_SWAP, Opcode.SEND_ONLY,
               Opcode.RDMA_READ_REQUEST, Opcode.ACKNOWLEDGE]
SYNDROMES = [0x00, 0x1F, 0x20, 0x3F, 0x60, 0x61, 0x62, 0x63, 0x64, 0x7F, 0x80, 0x40]


class AttackerOnTheLink(RuleBasedStateMachine):
    """The translator in a TranslatorFeature on a switch, the collector NIC in the collector
    daemon's shell, and an attacker on the link between them who injects random bytes,
    genuine frames replayed or blindly corrupted (the ICRC is not recomputed), and frames
    forged from scratch (correct ICRC) whose addresses and QPNs are right or random and whose
    PSNs are random: it can copy every address but does not compute PSNs from what it saw
    (such an on-path forger is what docs/security.md#dta says is left). A twin without the
    attacker gets the same genuine reports; the two must stay identical."""

    @initialize(ack_every=st.sampled_from([0, 3]), nak_policy=st.sampled_from(["once", "every"]))
    def setup(self, ack_every, nak_policy):
        cfg = dict(grace_reports=5, ack_every=ack_every, nak_policy=nak_policy)
        self.twin = Rig(attack_setup, **cfg)
        rig = Rig(attack_setup, **cfg)
        self.rig, self.tr, self.nic, self.now = rig, rig.tr, rig.nic, 0
        self.switch = FakeSwitch("to-c", "p1")
        self.feature = TranslatorFeature(self.switch, "to-c", self.tr)
        self.tap = self.feature._taps[0][1]
        self.port = FakePort()
        self.shell = CollectorShell({"mac": "", "ip": ""}, rig.mem, self.nic, self.port, {}, PortGuard())
        self.requests: list[bytes] = []  # genuine frames seen on the link, for replays and corruption
        self.responses: list[bytes] = []
        self.columns = {1: 0, 2: 0}
        self.qps = len(self.nic.qps)
        self.peer = {(TRANSLATOR_MAC, TRANSLATOR_IP, q.local_qpn) for q in self.tr.qps.values()}

    # -- the link
    def to_collector(self, frames: list[bytes]) -> list[bytes]:
        self.port.inbox += frames
        self.shell.on_readable()
        out, self.port.sent = self.port.sent, []
        for r in out:  # the collector answers its peer only: nothing tells anyone else a PSN
            rf = parse_roce_frame(r)
            assert (rf.eth.dst, rf.ip.dst, rf.bth.dqpn) in self.peer
        return out

    def to_translator(self, frame: bytes) -> None:
        if self.feature.on_ingress(frame, self.now) is not None:  # not for the translator: forwarded
            assert self.tr.on_roce_response(frame, self.now) == []  # and the engine alone refuses it too
        self.pump()

    def pump(self) -> None:
        for _ in range(50):
            requests = self.switch.take("to-c")
            self.switch.take("p1")  # NACKs to the reporter
            self.requests += requests
            responses = self.to_collector(requests) if requests else []
            if not responses:
                return
            self.responses += responses
            for r in responses:
                assert self.feature.on_ingress(r, self.now) is None
        raise AssertionError("the link never went quiet")

    # -- genuine traffic, to both
    @rule(kind=st.sampled_from(["kw", "ki", "ap", "sk"]), key=st.integers(0, (1 << 32) - 1), value=U24,
          rid=st.sampled_from([1, 2]))
    def genuine_report(self, kind, key, value, rid):
        rep = self.twin.reporter
        if kind == "kw":
            payload = rep.key_write(key, value, 2)
        elif kind == "ki":
            payload = rep.key_increment(key, value, 2)
        elif kind == "ap":
            payload = rep.append(3, value)
        else:
            payload = rep.sketch_merge(rid, 7, self.columns[rid], [value, key & 0xFFFF])
            self.columns[rid] += 1
        frame = rep.frame(payload)
        self.twin.deliver(self.twin.tr.on_report(frame, self.now), self.now)
        assert self.tap.on_ingress(frame, self.now) is None
        self.pump()

    @rule(dt=st.sampled_from([0, MS // 2, 2 * MS, 1_500 * MS]))
    def time_passes(self, dt):
        self.now += dt
        self.twin.timer(self.now)
        self.feature.on_timer(self.now)
        self.pump()

    # -- the attacker
    @rule(data=st.data())
    def inject_toward_collector(self, data):
        how = data.draw(st.sampled_from(["bytes", "corrupt", "replay", "forge"]))
        frame = self.attacker_frame(data, how, self.requests)
        if frame is None:
            frame = self.forge_request(data)
        for r in self.to_collector([frame]):
            self.to_translator(r)

    @rule(data=st.data())
    def inject_toward_translator(self, data):
        how = data.draw(st.sampled_from(["bytes", "corrupt", "replay", "forge"]))
        frame = self.attacker_frame(data, how, self.responses)
        self.to_translator(self.forge_response(data) if frame is None else frame)

    def attacker_frame(self, data, how: str, seen: list[bytes]) -> bytes | None:
        if how == "bytes":
            return data.draw(st.binary(max_size=120))
        if how == "forge" or not seen:
            return None
        frame = bytearray(data.draw(st.sampled_from(seen[-30:])))
        if how == "corrupt":
            for pos, xor in data.draw(st.lists(st.tuples(st.integers(0, len(frame) - 1), st.integers(1, 255)),
                                               min_size=1, max_size=3)):
                frame[pos] ^= xor
        return bytes(frame)

    @staticmethod
    def defect(data, *fields: str) -> str:
        """Which one field of a forged frame is wrong ("none": all copied right, PSN random)."""
        return data.draw(st.sampled_from(["none"] * len(fields) + list(fields)))

    def forge_request(self, data) -> bytes:
        wrong = self.defect(data, "src_mac", "src_ip", "dqpn", "rkey")
        src_mac = data.draw(st.binary(min_size=6, max_size=6)) if wrong == "src_mac" else TRANSLATOR_MAC
        src_ip = data.draw(st.binary(min_size=4, max_size=4)) if wrong == "src_ip" else TRANSLATOR_IP
        dqpn = data.draw(U24) if wrong == "dqpn" else data.draw(st.sampled_from([q.qpn for q in self.nic.qps.values()]))
        op = data.draw(st.sampled_from(REQUEST_OPS))
        region = data.draw(st.sampled_from(list(self.rig.mem.regions.values())))
        rkey = data.draw(st.integers(0, 0xFFFFFFFF)) if wrong == "rkey" else region.rkey
        va = region.base_va + data.draw(st.integers(0, region.size + 64)) // 8 * 8
        payload = b""
        if op == Opcode.RDMA_WRITE_ONLY:
            payload = data.draw(st.binary(max_size=16))
            ext = [RETH(va, rkey, len(payload))]
        elif op == Opcode.RDMA_READ_REQUEST:
            ext = [RETH(va, rkey, 8)]
        elif op in (Opcode.FETCH_ADD, Opcode.COMPARE_SWAP):
            ext = [AtomicETH(va, rkey, data.draw(st.integers(0, (1 << 64) - 1)), 0)]
        elif op == Opcode.ACKNOWLEDGE:
            ext = [AETH(data.draw(st.sampled_from(SYNDROMES)), 0)]
        else:
            payload, ext = data.draw(st.binary(max_size=16)), []
        bth = BTH(opcode=op, migreq=1, dqpn=dqpn, psn=data.draw(U24), ackreq=data.draw(st.integers(0, 1)),
                  padcount=-len(payload) & 3)
        return build_roce_frame(src_mac, COLLECTOR_MAC, src_ip, COLLECTOR_IP, SPORT, bth, ext, payload)

    def forge_response(self, data) -> bytes:
        wrong = self.defect(data, "src_mac", "src_ip", "sport", "dst_mac", "dst_ip", "dqpn")
        mac6, ip4 = st.binary(min_size=6, max_size=6), st.binary(min_size=4, max_size=4)
        src_mac = data.draw(mac6) if wrong == "src_mac" else COLLECTOR_MAC
        src_ip = data.draw(ip4) if wrong == "src_ip" else COLLECTOR_IP
        dst_mac = data.draw(mac6) if wrong == "dst_mac" else TRANSLATOR_MAC
        dst_ip = data.draw(ip4) if wrong == "dst_ip" else TRANSLATOR_IP
        sport = data.draw(st.integers(0, 0xFFFF)) if wrong == "sport" else SPORT
        qpns = [q.local_qpn for q in self.tr.qps.values()]
        dqpn = data.draw(U24) if wrong == "dqpn" else data.draw(st.sampled_from(qpns))
        atomic = data.draw(st.booleans())
        nak_seq = AethKind.NAK << 5 | NakCode.PSN_SEQUENCE_ERROR
        ext = [AETH(data.draw(st.sampled_from([nak_seq] * 4 + SYNDROMES)), data.draw(U24))]
        if atomic:
            ext.append(AtomicAckETH(data.draw(st.integers(0, (1 << 64) - 1))))
        bth = BTH(opcode=Opcode.ATOMIC_ACKNOWLEDGE if atomic else Opcode.ACKNOWLEDGE, migreq=1, dqpn=dqpn,
                  psn=data.draw(U24))
        return build_roce_frame(src_mac, dst_mac, src_ip, dst_ip, sport, bth, ext)

    # -- what must hold after every step
    @invariant()
    def nothing_lost_nothing_executed_twice(self):
        assert self.rig.snapshot() == self.twin.snapshot()
        mine, theirs = self.nic.counters()["qps"], self.twin.nic.counters()["qps"]
        for name, c in mine.items():
            assert (c["writes"], c["fetch_adds"], c["cmp_swaps"]) == \
                (theirs[name]["writes"], theirs[name]["fetch_adds"], theirs[name]["cmp_swaps"]), name
        assert {n: q.psn for n, q in self.tr.qps.items()} == {n: q.psn for n, q in self.twin.tr.qps.items()}
        c = self.tr.c
        assert c.resyncs == c.grace_periods == c.grace_dropped == 0 and not self.tr.in_grace
        assert c.internal_errors == 0 and self.nic.c.internal_errors == 0 and self.shell.internal_errors == 0

    @invariant()
    def memory_stays_bounded(self):
        assert len(self.nic.qps) == self.qps and all(len(q.replay) <= ATOMIC_REPLAY for q in self.nic.qps.values())
        assert all(len(q.marks) <= MARKS_PER_WINDOW + 2 for q in self.tr.qps.values())
        assert all(len(x.buf) < x.batch for x in self.tr._lists.values()) and not self.tr._held
        assert all(len(s.agg) <= MAX_OPEN_COLUMNS_FACTOR * s.columns for s in self.tr._sketches.values())
        assert len(self.tr._seq) <= MAX_TRACKED_REPORTERS and not self.tr.actions
        assert not self.port.inbox and not self.port.sent and not any(self.switch.queued.values())


TestAttackerOnTheLink = AttackerOnTheLink.TestCase
TestAttackerOnTheLink.settings = settings(max_examples=100, stateful_step_count=40, deadline=None,
                                          suppress_health_check=[HealthCheck.too_slow])
