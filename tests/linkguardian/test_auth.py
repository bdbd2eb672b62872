"""LinkGuardian's control frames authenticated with the link's key (docs/security.md "Keys and
authenticated frames"): with keys, the receiver seals every leading ACK, courier and loss
notification; the sender refuses, drops and counts per reason what is forged, replayed,
unauthenticated or sealed under another key, and LinkGuardian works as before."""

from __future__ import annotations

import base64
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headers.auth import TRAILER_LEN
from headers.fcs import append_fcs
from headers.linkguardian import ETHERTYPE, LGData, LGLeadingAck, LGLossNotification
from netstack.auth import PURPOSE_LG_LINK, Sealer
from netstack.auth.keys import load, parse, rotate
from netstack.linkguardian import LGParams, enable_receiver, enable_sender
from netstack.linkguardian.feature import control_span, unsealed_control
from netstack.linkguardian.sender import LG_CONTROL_MAC
from netstack.switch import ConfigError

from . import GBPS, US
from .fig7 import Fig7
from .test_attacks import LG, courier, notification
from .test_feature import in_order

NOW = 1.7e9


def key_doc(seed: bytes = b"k" * 32) -> bytes:
    return json.dumps({"format": "netstack-keys", "version": 1, "keys": [
        {"id": 1, "secret": base64.b64encode(seed).decode(), "created": NOW, "not_after": None}]}).encode()


def ring(seed: bytes = b"k" * 32):
    return parse(key_doc(seed), "<test>")


def bench(**kw) -> Fig7:
    return Fig7(rate_bps=GBPS, delay_ns=2 * US, seed=3, lg=LGParams(copies=2, ack_no_timeout_ns=300 * US),
                auth=ring(), **kw)


def sender_counters(f: Fig7) -> dict:
    return f.sender.counters()


def inject(f: Fig7, frame: bytes) -> None:
    """A frame arriving at sw1's protected port from the link (what an on-path party can do)."""
    f.sw1.receive("p-sw2", append_fcs(frame), f.net.now)


def test_with_keys_the_stream_is_protected_as_before_and_every_control_frame_is_sealed():
    f = bench(corrupt=0.05)
    f.backlog(3000, size=800)
    f.run()
    rep = f.report()
    assert in_order(f.delivered()) and rep["duplicates"] == 0 and rep["leaked_lg_frames"] == 0
    assert rep["fcs_errors"] > 50 and rep["retransmissions"] > 0
    assert rep["effective_loss"] <= rep["actual_loss"] / 20
    sealed = f.receiver.counters()["auth_sealed"]
    got = sender_counters(f)
    assert got["auth"] and sealed > 0
    assert got["auth_ok"] > 0 and sum(got["auth_refused"].values()) <= sealed - got["auth_ok"]
    # what the link lost of the sealed frames is all that is missing: nothing genuine was refused
    assert got["auth_refused"]["forged"] == 0 and got["auth_refused"]["replayed"] == 0


@pytest.mark.parametrize("kind", ["courier", "notification"])
def test_forged_unauthenticated_and_wrong_key_control_is_refused_and_counted(kind):
    f = bench()
    f.backlog(200, size=400)
    f.run()
    src = b"\x02\x00\x00\x00\x00\x99"  # the sender does not check where control comes from: the MAC does
    before = sender_counters(f)
    leading = f.sender.engine.leading_ack
    frames = {
        "courier": courier(src, leading_ack=(leading + 50) & 0xFFFF),
        "notification": notification(src, leading_ack=leading & 0xFFFF, hole=5, first=(leading + 1) & 0xFFFF),
    }
    bare = frames[kind]
    inject(f, bare)  # no trailer at all
    inject(f, bare + os.urandom(TRAILER_LEN))  # a made-up trailer
    other = Sealer(ring(b"x" * 32).derive(PURPOSE_LG_LINK, "sw1-sw2", NOW), era=5)
    span = control_span(bare)
    inject(f, bare + other.seal(bare[:span])[span:])  # sealed under another key (same key id)
    f.run()
    after = sender_counters(f)
    refused = {r: after["auth_refused"][r] - before["auth_refused"][r] for r in after["auth_refused"]}
    # a bare frame's padding reads as a trailer of key 0 (unknown); the other key's is forged
    assert sum(refused.values()) == 3 and refused["forged"] >= 1
    assert refused["replayed"] == refused["stale_era"] == 0
    assert after["auth_ok"] == before["auth_ok"]
    assert f.sender.engine.leading_ack == leading  # nothing moved the sender
    assert f.sender.engine.counters()["retransmissions"] == before["retransmissions"]


def test_a_control_tag_hidden_behind_a_data_tag_is_refused_with_keys_and_counted():
    """Issue 34, finding 1: the seal covers the control tags at the front of a frame, and the
    sender skips data tags to find a control tag; so with keys, a frame whose control tag sits
    behind a data tag is refused (``unsealed_control``), never acted on."""
    f = bench()
    f.backlog(200, size=400)
    f.run()
    src = b"\x02\x00\x00\x00\x00\x99"
    before = sender_counters(f)
    leading = f.sender.engine.leading_ack
    for tag in (LGLeadingAck((leading + 50) & 0xFFFF, 0).to_bytes(),
                LGLossNotification(leading & 0xFFFF, 5, (leading + 1) & 0xFFFF, 0).to_bytes()):
        hidden = LG_CONTROL_MAC + src + LG + LGData(7, ETHERTYPE).to_bytes() + tag
        inject(f, hidden + bytes(max(0, 60 - len(hidden))))
    f.run()
    after = sender_counters(f)
    assert after["auth_refused"]["unsealed_control"] - before["auth_refused"]["unsealed_control"] == 2
    assert f.sender.engine.leading_ack == leading  # nothing moved the sender
    assert f.sender.engine.counters()["retransmissions"] == before["retransmissions"]


@given(stack=st.lists(st.sampled_from(["data", "ack", "loss"]), min_size=1, max_size=5),
       sealed=st.integers(0, 5))
def test_unsealed_control_finds_every_control_tag_outside_the_sealed_front(stack, sealed):
    """:func:`unsealed_control` over arbitrary tag stacks: true exactly when a control tag lies
    beyond the span a seal would cover (the leading control tags)."""
    tags = {"data": lambda nt: LGData(1, nt).to_bytes(), "ack": lambda nt: LGLeadingAck(1, nt).to_bytes(),
            "loss": lambda nt: LGLossNotification(1, 1, 2, nt).to_bytes()}
    body = b""
    for i, kind in enumerate(stack):
        body += tags[kind](ETHERTYPE if i + 1 < len(stack) else 0x0800)
    frame = LG_CONTROL_MAC + b"\x02" * 6 + LG + body + bytes(20)
    span = control_span(frame)
    lead = next((i for i, k in enumerate(stack) if k == "data"), len(stack))
    assert unsealed_control(frame, span) == any(k != "data" for k in stack[lead:])
    assert not unsealed_control(frame, len(frame))  # everything sealed: nothing outside
    assert unsealed_control(frame[:14] + frame[14:], 0) == any(k != "data" for k in stack)


def test_a_replayed_genuine_control_frame_is_refused():
    f = bench()
    captured: list[bytes] = []
    link = f.net.channel("sw1-sw2", "sw2")  # sw2 -> sw1: the control direction
    deliver = link.fate

    def keep(i, frame):
        if frame[12:14] == b"\xab\xcd" and len(captured) < 5:
            captured.append(bytes(frame))
        return deliver(i, frame) if deliver is not None else (False, False, 0)

    link.fate = keep
    f.backlog(300, size=400)
    f.run()
    assert captured, "no control frame crossed the link"
    before = sender_counters(f)
    for frame in captured:  # as they were on the wire (with the switch's FCS)
        f.sw1.receive("p-sw2", frame, f.net.now)
    f.run()
    after = sender_counters(f)
    assert after["auth_refused"]["replayed"] - before["auth_refused"]["replayed"] == len(captured)
    assert after["auth_ok"] == before["auth_ok"]


def test_both_directions_on_one_link_cannot_be_authenticated():
    f = bench()
    with pytest.raises(ConfigError, match="one direction"):
        enable_sender(f.sw2, "p-sw1", f.params, f.net.now)
    with pytest.raises(ConfigError, match="one direction"):
        enable_receiver(f.sw1, "p-sw2", f.params, f.net.now)


def test_without_keys_nothing_is_sealed():
    f = Fig7(rate_bps=GBPS, delay_ns=2 * US, seed=3, corrupt=0.02, lg=LGParams(copies=2))
    f.backlog(500, size=400)
    f.run()
    assert not f.sender.counters()["auth"] and f.receiver.counters()["auth_sealed"] == 0
    assert in_order(f.delivered())


def test_key_rotation_mid_stream_keeps_the_link_protected(tmp_path):
    path = tmp_path / "k.json"
    path.write_bytes(key_doc())
    os.chmod(path, 0o600)
    f = bench(corrupt=0.03)
    f.backlog(1500, size=600)
    f.run(f.net.now + 2_000_000)
    rotate(path, overlap_s=60, now=NOW + 10)
    new = load(path)
    f.sw2.auth.reload(new, NOW + 10)  # the receiver seals with the new key first...
    f.run(f.net.now + 2_000_000)
    f.sw1.auth.reload(new, NOW + 11)  # ...the sender follows within the overlap
    f.run()
    got = sender_counters(f)
    assert in_order(f.delivered()) and f.report()["duplicates"] == 0
    assert got["auth_refused"]["unknown_key"] > 0 or f.receiver.sealer.key_id == 2
    assert got["auth_ok"] > 0


# --------------------------------------------- an attacker on the link, authentication on
_CONTROL = st.one_of(
    st.builds(lambda a, e: ("courier", a, e), st.integers(0, 0xFFFF), st.integers(0, 1)),
    st.builds(lambda a, h, f: ("notice", a, h, f), st.integers(0, 0xFFFF), st.integers(1, 255),
              st.integers(0, 0xFFFF)),
)
_TRAILER = st.one_of(st.just(b""), st.binary(min_size=TRAILER_LEN, max_size=TRAILER_LEN),
                     st.binary(min_size=1, max_size=TRAILER_LEN - 1))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(attacks=st.lists(st.tuples(st.integers(0, 4_000_000), _CONTROL, _TRAILER), max_size=30),
       flips=st.lists(st.tuples(st.integers(0, 4_000_000), st.integers(0, 10_000)), max_size=15),
       seed=st.integers(1, 50))
def test_an_attacker_on_the_link_gets_no_forged_control_accepted(attacks, flips, seed):
    """Forged control frames with a valid FCS (the strongest party on the link: it can compute
    CRCs) and bit-flipped copies of genuine sealed ones, interleaved with a corrupted stream:
    every one is refused, nothing is accepted that the receiver did not seal, and the stream
    arrives whole, once and in order."""
    f = Fig7(rate_bps=GBPS, delay_ns=2 * US, seed=seed, corrupt=1e-2,
             lg=LGParams(copies=2, ack_no_timeout_ns=300 * US), auth=ring())
    n = 300
    f.stream(n, 800, rate_bps=0.5e9)
    src = b"\x02\x00\x00\x00\x00\x99"
    injected = {"n": 0}
    genuine: list[bytes] = []
    control = f.net.channel("sw1-sw2", "sw2")  # sw2 -> sw1: where the sealed control travels
    deliver = control.fate

    def keep(i, frame):
        if frame[12:14] == b"\xab\xcd" and len(genuine) < 50:
            genuine.append(bytes(frame))
        return deliver(i, frame) if deliver is not None else (False, False, 0)

    control.fate = keep

    def put(frame: bytes) -> None:
        if control_span(frame):  # still LinkGuardian control (a flip may have made it plain data)
            injected["n"] += 1
        f.sw1.receive("p-sw2", append_fcs(frame), f.net.now)

    def flip(k: int) -> None:
        if genuine:
            g = bytearray(genuine[k % len(genuine)][:-4])  # without its FCS
            g[k % len(g)] ^= 1 << (k % 8)
            put(bytes(g))

    for at, kind, trailer in attacks:
        bare = (courier(src, kind[1], kind[2]) if kind[0] == "courier"
                else notification(src, kind[1], kind[2], kind[3]))
        f.net.loop.call_at(at, put, bare + trailer)
    for at, k in flips:
        f.net.loop.call_at(at, flip, k)
    f.run()
    got = f.delivered()
    assert got == list(range(n))  # whole, once, in order
    c = sender_counters(f)
    sealed = f.receiver.counters()["auth_sealed"]
    # every forgery refused (a flipped copy of a genuine frame outside what the MAC covers is
    # genuine control: it and the original are accepted once between them, the other refused)
    assert sum(c["auth_refused"].values()) == injected["n"]
    assert c["auth_ok"] <= sealed  # ... and nothing accepted that the receiver did not seal
