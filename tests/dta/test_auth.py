"""Authenticated DTA reports (docs/dta.md "Authenticated reports"): reporters seal, the translator
opens with one opener per reporter source address; forged, replayed, truncated, wrong-key,
spoofed and unauthenticated reports are refused with their reason, never translated, and every
report is counted once. Then an attacker on the link between reporters and translator
(hypothesis stateful), and the glue: the switch control handlers, the reporter tool, the CLI's
sealing options, the Scapy layer.
"""

from __future__ import annotations

import argparse
import os
import random
import socket

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from headers.auth import TRAILER_LEN, decode_trailer
from headers.dta import KeyWrite, decode_report, encode_report
from headers.errors import HeaderError
from headers.inet import build_udp_frame, ip_bytes, parse_udp_frame
from headers.registry import UdpPort
from netstack.auth.context import AuthContext
from netstack.auth.frame import REASONS, Sealer
from netstack.auth.keys import PURPOSE_DTA_REPORTER, KeyRing, generate, load
from netstack.dta import DTATranslator, Reporter, RoceResponder, SketchReporter, TranslatorConfig, control, live
from netstack.dta.reportauth import (
    MAX_REPORTERS,
    REFUSALS,
    UNKNOWN_REPORTER,
    ReportAuth,
    next_era,
    report_openers,
    reporter_name,
)
from netstack.engine import Transmit
from netstack.io.control import ControlError
from netstack.runtime import RunState

from . import (
    COLLECTOR_IP,
    COLLECTOR_MAC,
    MS,
    REPORTER_IP,
    REPORTER_MAC,
    TRANSLATOR_IP,
    TRANSLATOR_MAC,
    Rig,
    default_setup,
    make_memory,
)

NOW_S = 1_700_000_000.0
OTHER_IP = ip_bytes("10.0.1.2")  # a second reporter
STRANGER_IP = ip_bytes("10.0.1.3")  # a host that is not among the reporters


def ring(secret: bytes = b"\x11" * 32, kid: int = 1) -> KeyRing:
    return KeyRing({kid: secret}, {kid: None}, kid, "test-keys")


RING = ring()
WRONG_RING = ring(b"\x22" * 32)  # another deployment's key file, same key id


def sealer(ip: bytes = REPORTER_IP, era: int = 100, keyring: KeyRing = RING, name: str | None = None) -> Sealer:
    return Sealer(keyring.derive(PURPOSE_DTA_REPORTER, name or reporter_name(ip), NOW_S), era)


def auth_for(*ips: bytes, keyring: KeyRing = RING) -> ReportAuth:
    ctx = AuthContext.start(keyring, NOW_S)
    return ReportAuth(report_openers(ctx, [reporter_name(ip) for ip in ips]))


def auth_rig(**config) -> Rig:
    """A Rig whose translator authenticates REPORTER_IP and OTHER_IP, and whose reporter seals."""
    rig = Rig(reporter=Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, sealer=sealer()), **config)
    rig.tr.auth = auth_for(REPORTER_IP, OTHER_IP)
    return rig


def frame_from(ip: bytes, payload: bytes, mac: bytes = REPORTER_MAC) -> bytes:
    return build_udp_frame(mac, TRANSLATOR_MAC, ip, COLLECTOR_IP, UdpPort.DTA_SOURCE, UdpPort.DTA, payload)


def offer(rig: Rig, frame: bytes, now: int = 0) -> tuple[list[bytes], list[bytes]]:
    """One frame into the translator: (RoCEv2 frames emitted, NACKs); checks that it counted once."""
    c0 = rig.tr.counters()
    out = rig.tr.on_report(frame, now)
    nacks = rig.deliver(out, now)
    c1 = rig.tr.counters()
    assert c1["reports"] == c0["reports"] + 1
    moved = (c1["auth_ok"] - c0["auth_ok"]) + sum(c1["auth_refused"].values()) - sum(c0["auth_refused"].values()) \
        + (c1["malformed"] - c0["malformed"])
    assert moved == 1, (c0, c1)
    return out, nacks


def refusal(rig: Rig, frame: bytes) -> str:
    """Offer ``frame``, expect it refused with nothing emitted; return the reason."""
    before = dict(rig.tr.counters()["auth_refused"])
    snap = rig.snapshot()
    out, nacks = offer(rig, frame)
    assert out == [] and nacks == []
    after = rig.tr.counters()["auth_refused"]
    reasons = [r for r in REFUSALS if after[r] != before[r]]
    assert len(reasons) == 1, (before, after)
    assert rig.snapshot() == snap
    return reasons[0]


def accounted(rig: Rig) -> None:
    c = rig.tr.counters()
    assert c["reports"] == c["auth_ok"] + sum(c["auth_refused"].values()) + c["malformed"]
    assert c["internal_errors"] == 0


# ------------------------------------------------------------------ genuine reports


def test_sealed_reports_of_every_primitive_are_translated():
    rig = auth_rig(append_flush_ns=None)
    r = rig.reporter
    payload = r.key_write(42, 7)
    assert len(payload) == 12 + TRAILER_LEN and decode_trailer(payload).seq == 1
    rig.send(payload)
    rig.send_all(r.append(1, 100 + i) for i in range(4))
    rig.send(r.key_increment(9, 5))
    for rid in (1, 2, 3):  # Sketch-Merge columns sealed by one reporter's key (three logical ids)
        sr = SketchReporter(r, rid, 7, 3, 10)
        sr.start_epoch([[rid] * 10 for _ in range(3)])
        rig.send_all(sr.poll(0))
    assert rig.q.keywrite_get(42) == (7,)
    assert rig.q.append_read(1) == [100, 101, 102, 103]
    assert min(rig.q.counters_of(9, 2)) == 5
    assert rig.q.sketch_matrix(7, 0) == [[6] * 10] * 3
    c = rig.tr.counters()
    assert c["auth_ok"] == c["reports"] == 1 + 4 + 1 + 30 and not any(c["auth_refused"].values())
    assert c["auth"]["reporters"] == 2 and c["auth"]["per_reporter"]["10.0.1.1"]["highest"] == [100, 36]
    assert r.counters()["sealed"] == 36
    accounted(rig)


def test_a_resend_after_a_nack_is_sealed_anew_and_accepted():
    rig = auth_rig()
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, retransmittable=True, sealer=sealer())
    rig.reporter = rep
    first, lost, third = rep.key_write(1, 11), rep.key_write(2, 22), rep.key_write(3, 33)
    assert rig.send(first) == []
    nacks = rig.send(third)  # seqnum 2 after 0: NACK "last in order was 0"
    assert len(nacks) == 1
    resent = rep.on_nack(nacks[0])
    assert [decode_report(p[:-TRAILER_LEN])[1].key for p in resent] == [2, 3]
    assert all(p not in (lost, third) for p in resent)  # new trailers: not replays
    rig.send_all(resent)
    assert [rig.q.keywrite_get(k) for k in (1, 2, 3)] == [(11,), (22,), (33,)]
    assert not any(rig.tr.counters()["auth_refused"].values())
    accounted(rig)


# ------------------------------------------------------------------ refusals


def test_unauthenticated_reports_are_refused():
    rig = auth_rig()
    plain = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    assert refusal(rig, plain.frame(plain.key_write(42, 7))) == "truncated"  # 12 bytes < a trailer
    assert refusal(rig, plain.frame(plain.append(1, 5))) == "truncated"
    # longer ones: their last 17 bytes are read as a trailer, whose MAC (or key id) is wrong
    sk = plain.sketch_merge(1, 7, 0, [1, 2, 3])
    assert len(sk) > TRAILER_LEN and refusal(rig, plain.frame(sk)) in ("forged", "unknown_key")
    wide = plain.key_write(5, list(range(8)))
    assert refusal(rig, plain.frame(wide)) in ("forged", "unknown_key")
    assert rig.q.keywrite_get(42) is None and rig.emitted == []
    accounted(rig)


def test_every_single_bit_flip_is_refused_and_moves_no_window():
    rig = auth_rig()
    payload = rig.reporter.key_write(42, 7)
    frame = rig.reporter.frame(payload)
    start = len(frame) - len(payload)
    key_id_bit = (len(frame) - TRAILER_LEN) * 8
    for bit in range(start * 8, len(frame) * 8):
        bad = bytearray(frame)
        bad[bit // 8] ^= 0x80 >> (bit % 8)
        reason = refusal(rig, bytes(bad))
        expected = {"unknown_key"} if key_id_bit <= bit < key_id_bit + 8 else {"forged"}
        assert reason in expected, (bit, reason)
    out, _ = offer(rig, frame)  # the genuine frame still opens: a forgery never touches the window
    assert len(out) == 2 and rig.q.keywrite_get(42) == (7,)
    accounted(rig)


def test_bit_flips_in_the_source_address_are_other_reporters_or_none():
    rig = auth_rig()
    frame = rig.reporter.frame(rig.reporter.key_write(42, 7))
    for bit in range(26 * 8, 30 * 8):  # the IPv4 source address
        bad = bytearray(frame)
        bad[bit // 8] ^= 0x80 >> (bit % 8)
        reason = refusal(rig, bytes(bad))
        assert reason == ("forged" if bytes(bad[26:30]) == OTHER_IP else UNKNOWN_REPORTER)
    accounted(rig)


def test_replays_are_refused_whenever_they_come():
    rig = auth_rig()
    r = rig.reporter
    frames = [r.frame(r.key_increment(7, 1)) for _ in range(100)]
    for f in frames[:50]:
        offer(rig, f)
    assert refusal(rig, frames[10]) == "replayed"  # inside the window, seen
    for f in frames[50:]:
        offer(rig, f)
    assert refusal(rig, frames[0]) == "replayed"  # older than the window
    assert refusal(rig, frames[-1]) == "replayed"
    assert min(rig.q.counters_of(7, 2)) == 100
    # a reporter restarted with an older era (its clock stepped back) is stale
    old = Sealer(RING.derive(PURPOSE_DTA_REPORTER, "10.0.1.1", NOW_S), era=99)
    assert refusal(rig, frame_from(REPORTER_IP, old.seal(r.key_increment(7, 1)[:-TRAILER_LEN]))) == "stale_era"
    # one restarted with a newer era is accepted from its first report
    new = sealer(era=101)
    offer(rig, frame_from(REPORTER_IP, new.seal(encode_report(*decode_report(r.key_write(1, 1)[:-TRAILER_LEN])))))
    assert rig.q.keywrite_get(1) == (1,)
    accounted(rig)


def test_reordered_reports_inside_the_window_are_accepted_once():
    rig = auth_rig()
    r = rig.reporter
    frames = [r.frame(r.append(1, i)) for i in range(8)]
    for f in reversed(frames):
        offer(rig, f)
    for f in frames:
        assert refusal(rig, f) == "replayed"
    assert rig.tr.counters()["append"] == 8
    accounted(rig)


def test_truncated_reports():
    rig = auth_rig()
    payload = rig.reporter.key_write(42, 7)
    for cut in range(len(payload)):
        reason = refusal(rig, frame_from(REPORTER_IP, payload[:cut]))
        assert reason in (("truncated",) if cut < TRAILER_LEN else ("forged", "unknown_key")), (cut, reason)
    # a frame cut short of its own IPv4/UDP lengths does not parse: malformed, counted once
    frame = frame_from(REPORTER_IP, payload)
    c0 = rig.tr.counters()["malformed"]
    offer(rig, frame[:-5])
    assert rig.tr.counters()["malformed"] == c0 + 1
    offer(rig, frame)
    assert rig.q.keywrite_get(42) == (7,)
    accounted(rig)


def test_wrong_keys_and_spoofed_sources():
    rig = auth_rig()
    report = encode_report(*decode_report(rig.reporter.key_write(42, 7)[:-TRAILER_LEN]))
    # another deployment's key, same key id
    assert refusal(rig, frame_from(REPORTER_IP, sealer(keyring=WRONG_RING).seal(report))) == "forged"
    # a key id this translator does not have
    assert refusal(rig, frame_from(REPORTER_IP, sealer(keyring=ring(kid=9)).seal(report))) == "unknown_key"
    # the other reporter's key, sent with this one's source address (and the reverse)
    assert refusal(rig, frame_from(REPORTER_IP, sealer(OTHER_IP).seal(report))) == "forged"
    genuine = sealer(REPORTER_IP, era=5).seal(report)
    assert refusal(rig, frame_from(OTHER_IP, genuine)) == "forged"
    # a key derived for another purpose
    lg = Sealer(RING.derive("lg-link", "10.0.1.1", NOW_S), 5)
    assert refusal(rig, frame_from(REPORTER_IP, lg.seal(report))) == "forged"
    # a host with a valid key of the deployment that is not among the reporters
    assert refusal(rig, frame_from(STRANGER_IP, sealer(STRANGER_IP).seal(report))) == UNKNOWN_REPORTER
    assert rig.q.keywrite_get(42) is None
    offer(rig, frame_from(OTHER_IP, sealer(OTHER_IP).seal(report)))
    assert rig.q.keywrite_get(42) == (7,)
    accounted(rig)


def test_random_source_addresses_cost_no_memory():
    rig = auth_rig()
    rng = random.Random(5)
    payload = rig.reporter.key_write(1, 1)
    for _ in range(5000):
        ip = rng.getrandbits(32).to_bytes(4, "big")
        if ip in (REPORTER_IP, OTHER_IP):
            continue
        rig.tr.on_report(frame_from(ip, payload), 0)
    assert len(rig.tr.auth) == 2
    c = rig.tr.counters()
    assert c["auth_refused"][UNKNOWN_REPORTER] == c["reports"] and c["auth"]["per_reporter"] == {}
    accounted(rig)


def test_the_reporter_set_is_bounded():
    ctx = AuthContext.start(RING, NOW_S)
    many = [f"10.{i >> 8 & 255}.{i & 255}.1" for i in range(MAX_REPORTERS + 1)]
    with pytest.raises(ValueError, match="at most"):
        report_openers(ctx, many)
    assert len(report_openers(ctx, many[:MAX_REPORTERS] + many[:3])) == MAX_REPORTERS  # duplicates count once
    with pytest.raises(ValueError):
        report_openers(ctx, ["not-an-address"])


def test_next_era():
    assert next_era(NOW_S) == int(NOW_S)
    assert next_era(NOW_S, [int(NOW_S), 40]) == int(NOW_S) + 1  # run again within the same second
    assert next_era(NOW_S, [int(NOW_S) + 3, 1]) == int(NOW_S) + 4
    assert next_era(NOW_S, [int(NOW_S) - 9, 1]) == int(NOW_S)
    assert next_era(NOW_S, None) == int(NOW_S)


# ------------------------------------------------------------------ an attacker on the link

REPORTERS = (REPORTER_IP, OTHER_IP)
MACS = (REPORTER_MAC, bytes.fromhex("020000000102"))


def udp_of(frame: bytes):
    try:
        return parse_udp_frame(frame)
    except HeaderError:
        return None


class AttackerOnTheReportLink(RuleBasedStateMachine):
    """Two sealing reporters, the link to the translator, an attacker on it who drops, reorders,
    replays, flips bits, truncates, spoofs sources and injects random frames. A twin translator
    without authentication gets exactly the reports the first one accepted (trailer stripped).

    Invariants: every report accepted is a genuine sealed report, accepted once; the two
    translators emit the same RoCEv2 frames and NACKs and end in the same state (so nothing
    refused changed anything); every frame is counted once; nothing raises; the openers are
    the two reporters' only."""

    @initialize(seed=st.integers(0, 2**16))
    def setup(self, seed):
        info = RoceResponder(make_memory(default_setup), COLLECTOR_MAC, COLLECTOR_IP,
                             rng=random.Random(seed)).connect_info()
        cfg = TranslatorConfig(info, TRANSLATOR_MAC, TRANSLATOR_IP, grace_reports=0, append_flush_ns=MS)
        self.tr = DTATranslator(cfg, auth=auth_for(*REPORTERS))
        self.twin = DTATranslator(cfg)
        self.reporters = [Reporter(MACS[i], TRANSLATOR_MAC, ip, COLLECTOR_IP, retransmittable=bool(i),
                                   sealer=sealer(ip, era=50 + i)) for i, ip in enumerate(REPORTERS)]
        self.columns = [0, 0]
        self.rng = random.Random(seed)
        self.in_flight: list[bytes] = []
        self.seen: list[bytes] = []
        self.genuine: set[bytes] = set()  # sealed UDP payloads the reporters made
        self.accepted: set[bytes] = set()
        self.now = 0
        self.frames = 0

    # -- the reporters
    @rule(who=st.integers(0, 1), kind=st.sampled_from(["kw", "ap", "ki", "sk"]), a=st.integers(0, 50),
          b=st.integers(0, 2**32 - 1))
    def report(self, who, kind, a, b):
        r = self.reporters[who]
        if kind == "kw":
            payload = r.key_write(a, b, 2)
        elif kind == "ap":
            payload = r.append(1, b)
        elif kind == "ki":
            payload = r.key_increment(a, b, 2)
        else:
            payload = r.sketch_merge(who + 1, 7, self.columns[who], [b & 0xFFFF, a, 1])
            self.columns[who] += 1
        self.genuine.add(payload)
        self.in_flight.append(r.frame(payload))

    # -- the link
    @rule(data=st.data())
    def deliver(self, data):
        if self.in_flight:
            self._offer(self.in_flight.pop(data.draw(st.integers(0, len(self.in_flight) - 1))))

    @rule(data=st.data())
    def drop(self, data):
        if self.in_flight:
            self.in_flight.pop(data.draw(st.integers(0, len(self.in_flight) - 1)))

    @rule(data=st.data())
    def replay(self, data):
        if self.seen:
            self._offer(data.draw(st.sampled_from(self.seen)))

    @rule(data=st.data(), flips=st.integers(1, 3))
    def flip(self, data, flips):
        if self.seen:
            bad = bytearray(data.draw(st.sampled_from(self.seen)))
            if not bad:
                return
            for _ in range(flips):
                bit = data.draw(st.integers(0, len(bad) * 8 - 1))
                bad[bit // 8] ^= 0x80 >> (bit % 8)
            self._offer(bytes(bad))

    @rule(data=st.data())
    def truncate(self, data):
        if self.seen:
            f = data.draw(st.sampled_from(self.seen))
            udp = udp_of(f)
            if udp is None or not udp.payload_length:
                return
            payload = f[udp.payload_offset:udp.payload_offset + udp.payload_length]
            cut = data.draw(st.integers(0, len(payload) - 1))
            if data.draw(st.booleans()):
                self._offer(self._reframe(f, payload[:cut]))  # lengths consistent with the cut
            else:
                self._offer(f[:udp.payload_offset + cut])  # just cut short

    @rule(data=st.data(), to=st.sampled_from([*REPORTERS, STRANGER_IP]))
    def spoof(self, data, to):
        if self.seen:
            f = data.draw(st.sampled_from(self.seen))
            udp = udp_of(f)
            if udp is None:
                return
            self._offer(self._reframe(f, f[udp.payload_offset:udp.payload_offset + udp.payload_length], src=to))

    @rule(src=st.sampled_from([*REPORTERS, STRANGER_IP, b"\x01\x02\x03\x04"]), body=st.binary(max_size=80))
    def inject(self, src, body):
        self._offer(frame_from(src, body))

    @rule(junk=st.binary(max_size=120))
    def garbage(self, junk):
        self._offer(junk)

    @rule(ms=st.integers(0, 3))
    def tick(self, ms):
        self.now += ms * MS
        assert self.tr.on_timer(self.now) == self.twin.on_timer(self.now)

    # -- checks
    def _reframe(self, f: bytes, payload: bytes, src: bytes | None = None) -> bytes:
        u = parse_udp_frame(f)
        return build_udp_frame(u.eth.src, u.eth.dst, src or u.ip.src, u.ip.dst, u.udp.sport, u.udp.dport, payload)

    def _offer(self, frame: bytes) -> None:
        self.seen.append(frame)
        if len(self.seen) > 64:
            del self.seen[self.rng.randrange(len(self.seen))]
        c0 = self.tr.counters()
        out = self.tr.on_report(frame, self.now)
        nacks = [a.data for a in self.tr.actions.take_all() if isinstance(a, Transmit)]
        c1 = self.tr.counters()
        self.frames += 1
        ok = c1["auth_ok"] - c0["auth_ok"]
        refused = sum(c1["auth_refused"].values()) - sum(c0["auth_refused"].values())
        assert c1["reports"] - c0["reports"] == 1 and ok + refused + c1["malformed"] - c0["malformed"] == 1
        if not ok:
            assert out == [] and nacks == []
            return
        udp = parse_udp_frame(frame)
        sealed = frame[udp.payload_offset:udp.payload_offset + udp.payload_length]
        assert sealed in self.genuine, "a report nobody sealed was accepted"
        assert sealed not in self.accepted, "a genuine report was accepted twice"
        self.accepted.add(sealed)
        twin_out = self.twin.on_report(self._reframe(frame, sealed[:-TRAILER_LEN]), self.now)
        twin_nacks = [a.data for a in self.twin.actions.take_all() if isinstance(a, Transmit)]
        assert out == twin_out and nacks == twin_nacks

    @invariant()
    def same_state_as_the_twin(self):
        if not hasattr(self, "tr"):
            return
        mine, twin = self.tr.counters(), self.twin.counters()
        for k in ("reports", "malformed", "auth_ok", "auth_refused", "auth"):
            mine.pop(k, None)
            twin.pop(k, None)
        assert mine == twin and mine["internal_errors"] == 0

    @invariant()
    def bounded_and_accounted(self):
        if not hasattr(self, "tr"):
            return
        c = self.tr.counters()
        assert len(self.tr.auth) == 2
        assert c["reports"] == self.frames
        assert c["auth_ok"] == len(self.accepted)


AttackerOnTheReportLink.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TestAttackerOnTheReportLink = AttackerOnTheReportLink.TestCase


# ------------------------------------------------------------------ the switch control handlers


def _switch_with_keys():
    from netstack.switch import PortConfig, Switch, SwitchConfig

    class Shell:
        def __init__(self) -> None:
            self.switch = Switch(SwitchConfig("sw2", (PortConfig("p-c1", mac=bytes.fromhex("02000000aa01")),
                                                      PortConfig("p-h1")), {}))
            self.switch.auth = AuthContext.start(RING, NOW_S)
            self.flushes = 0

        def flush(self) -> None:
            self.flushes += 1

    return Shell()


def test_enable_on_a_switch_with_keys_authenticates_reports():
    from netstack.dta import CollectorMemory
    from netstack.dta import layout as dl

    shell = _switch_with_keys()
    h = control.switch_handlers(shell)
    mem = CollectorMemory("c1", directory=None, rng=random.Random(2))
    dl.build_memory(mem, dl.resolve_layout(None))
    info = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3)).connect_info()
    with pytest.raises(ControlError, match="reporters"):
        h["dta_enable"]({"port": "p-c1", "connect_info": info})
    with pytest.raises(ControlError, match="cannot enable"):
        h["dta_enable"]({"port": "p-c1", "connect_info": info, "reporters": ["10.0.1.1", "nope"]})
    out = h["dta_enable"]({"port": "p-c1", "connect_info": info, "reporters": ["10.0.1.1", "10.0.1.2"]})
    assert out["auth"] == {"keys": "test-keys", "reporters": ["10.0.1.1", "10.0.1.2"]}
    rep = Reporter(REPORTER_MAC, COLLECTOR_MAC, REPORTER_IP, COLLECTOR_IP, sealer=sealer())
    good = rep.frame(rep.key_write(5, 55, 2))
    plain = Reporter(REPORTER_MAC, COLLECTOR_MAC, REPORTER_IP, COLLECTOR_IP)
    for f in (good, good, plain.frame(plain.key_write(5, 66, 2))):
        shell.switch.receive("p-h1", f, 1)
    assert [p for p, _ in shell.switch.transmit(10**9)] == ["p-c1", "p-c1"]  # the genuine one only
    c = h["dta_status"]({})["counters"]
    assert c["auth_ok"] == 1 and c["auth_refused"]["replayed"] == 1 and c["auth_refused"]["truncated"] == 1
    # enabling again keeps every reporter's replay window: the old frame stays refused
    h["dta_enable"]({"port": "p-c1", "connect_info": info, "reporters": ["10.0.1.1"]})
    shell.switch.receive("p-h1", good, 2)
    assert shell.switch.transmit(10**9) == []
    c = h["dta_status"]({})["counters"]
    assert c["auth_refused"]["replayed"] == 1  # this translator's count; the opener's runs on
    assert c["auth"]["per_reporter"]["10.0.1.1"]["refused"] == {"replayed": 2, "truncated": 1}
    shell.switch.receive("p-h1", rep.frame(rep.key_write(6, 1, 1)), 3)
    assert len(shell.switch.transmit(10**9)) == 1


def test_a_switch_without_keys_ignores_the_reporter_list():
    from netstack.dta import CollectorMemory
    from netstack.dta import layout as dl

    shell = _switch_with_keys()
    shell.switch.auth = None
    mem = CollectorMemory("c1", directory=None, rng=random.Random(2))
    dl.build_memory(mem, dl.resolve_layout(None))
    info = RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3)).connect_info()
    out = control.switch_handlers(shell)["dta_enable"]({"port": "p-c1", "connect_info": info, "reporters": ["x"]})
    assert out["auth"] is None


def test_enable_translator_names_the_topologys_hosts_as_reporters():
    state = RunState("ns", hosts={"h1": "10.0.0.1/24", "h2": "10.0.0.2/24", "c1": "10.0.0.100/24"})
    assert control.reporter_ips(state, "c1") == ["10.0.0.1", "10.0.0.2"]


# ------------------------------------------------------------------ the reporter tool and the CLI


def _args(*argv: str) -> argparse.Namespace:
    return live.report_parser().parse_args(["--dst", "127.0.0.1", *argv])


def test_the_reporter_tool_seals_with_the_key_file(tmp_path):
    path = tmp_path / "keys.json"
    generate(path)
    sealer_, auth = live._sealer(_args("keywrite", "--key-file", str(path), "--reporter-ip", "10.0.1.1",
                                       "--era", "77"))
    assert auth == {"reporter": "10.0.1.1", "key_id": 1, "era": 77} and sealer_.era == 77
    opener = AuthContext.start(load(path), NOW_S).opener(PURPOSE_DTA_REPORTER, "10.0.1.1")
    assert opener.open(sealer_.seal(b"report")) == b"report"
    assert live._sealer(_args("keywrite")) == (None, None)
    assert "--era" in live.check_report_args(_args("keywrite", "--era", "5"))
    assert "IPv4" in live.check_report_args(_args("keywrite", "--key-file", "k", "--reporter-ip", "h1"))
    assert "2^32" in live.check_report_args(_args("keywrite", "--key-file", "k", "--era", "-1"))
    os.chmod(path, 0o644)
    with pytest.raises(SystemExit, match="chmod"):
        live._sealer(_args("keywrite", "--key-file", str(path), "--reporter-ip", "10.0.1.1"))
    assert live.source_ip("127.0.0.1") == "127.0.0.1"


def test_cycling_reports_are_sealed_as_they_are_sent():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(2)
        s = sealer()
        payloads = [Reporter().key_write(1, 1), Reporter().append(1, 2)]
        res = live._send_paced(tx, rx.getsockname(), payloads, 0.0, None, s.seal)
        assert res["sent"] == 2 and s.c.sealed == 2
        got = [rx.recv(100) for _ in range(2)]
        assert [g[:-TRAILER_LEN] for g in got] == payloads and [decode_trailer(g).seq for g in got] == [1, 2]
    finally:
        rx.close()
        tx.close()


def test_the_cli_passes_the_key_file_and_a_newer_era(tmp_path, monkeypatch):
    from netstack import runtime

    keys = tmp_path / "keys.json"
    generate(keys)

    class Topo:
        def keys_path(self):
            return keys

    monkeypatch.setattr(runtime, "topology_of", lambda state: Topo())
    state = RunState("ns", hosts={"h1": "10.0.0.1/24", "c1": "10.0.0.100/24"})
    assert control.report_auth_argv(state, "h1", {"counters": {}}) == []  # the translator does not authenticate
    tr = {"counters": {"auth": {"per_reporter": {"10.0.0.1": {"highest": [4_000_000_000, 9]}}}}}
    assert control.report_auth_argv(state, "h1", tr) == ["--key-file", str(keys), "--reporter-ip", "10.0.0.1",
                                                          "--era", "4000000001"]
    fresh = control.report_auth_argv(state, "h1", {"counters": {"auth": {"per_reporter": {}}}})
    assert 0 < int(fresh[-1]) < 4_000_000_000
    Topo.keys_path = lambda self: None
    with pytest.raises(Exception, match="no key file"):
        control.report_auth_argv(state, "h1", tr)


# ------------------------------------------------------------------ Scapy


def test_scapy_dissects_a_sealed_report():
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    from headers.layers.auth import NetstackAuth
    from headers.layers.dta import DTA, DTAKeyWrite, sealed_report

    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, sealer=sealer())
    payload = rep.key_write(42, [7, 8, 9])
    raw = rep.frame(payload)
    pkt = sealed_report(raw)
    t = decode_trailer(payload)
    assert pkt[DTAKeyWrite].key == 42 and pkt[DTAKeyWrite].data == (7, 8, 9)
    assert (pkt[NetstackAuth].key_id, pkt[NetstackAuth].era, pkt[NetstackAuth].seq, pkt[NetstackAuth].mac) == \
        (t.key_id, t.era, t.seq, t.mac)
    assert bytes(pkt) == raw and bytes(pkt[DTA]) == payload
    assert sealed_report(Ether(raw))[NetstackAuth].seq == t.seq
    # built with Scapy, opened by the translator's opener
    prim = decode_report(payload[:-TRAILER_LEN])[1]
    assert isinstance(prim, KeyWrite)
    built = (Ether(src=REPORTER_MAC, dst=TRANSLATOR_MAC) / IP(src="10.0.1.1", dst="10.0.9.1")
             / UDP(sport=40041, dport=40040) / DTA(opcode=1) / DTAKeyWrite(redundancy=2, key=42, data=[7, 8, 9])
             / NetstackAuth(key_id=t.key_id, era=t.era, seq=t.seq, mac=t.mac))
    assert bytes(built[UDP].payload) == payload
    with pytest.raises(ValueError, match="trailer"):
        sealed_report(Reporter().frame(Reporter().append(1, 1)[:5]))
    assert set(REASONS) < set(REFUSALS)
