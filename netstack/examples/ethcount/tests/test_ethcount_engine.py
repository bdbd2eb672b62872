"""The engine on its own (no switch, no clock: frames and ``now_ns`` are arguments), then as a
feature in a real sans-IO switch. Hypothesis draws the frames: whatever the bytes, the counts
equal what a plain reading of bytes 12-13 says, and the frames pass unchanged.

Run: ``.venv/bin/python -m pytest netstack/examples/ethcount`` (these tests use absolute imports:
pytest imports this folder's test files by their own names)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.errors import ConfigError
from netstack.examples.ethcount.engine import EthCounter, check_ethertype
from netstack.examples.ethcount.feature import EthCountBothWays, EthCountFeature, counters_on, make_feature
from netstack.examples.ethcount.header import DEFAULT_ETHERTYPE, probe_frame
from netstack.switch import PortConfig, Switch, SwitchConfig
from netstack.switch.feature import implements

H1 = bytes.fromhex("020000000001")
H2 = bytes.fromhex("020000000002")
#: a frame: any bytes at all (too short, garbage), or a frame whose EtherType is drawn from a few
#: values, the counted one among them, so that matches are common
FRAMES = st.one_of(
    st.binary(max_size=40),
    st.builds(lambda et, rest: H2 + H1 + et.to_bytes(2, "big") + rest,
              st.sampled_from([DEFAULT_ETHERTYPE, 0x88B6, 0x0800, 0x8100, 0xB588]), st.binary(max_size=60)),
)


def is_counted(frame: bytes, ethertype: int = DEFAULT_ETHERTYPE) -> bool:
    """The oracle: the frame has bytes 12-13 and they are the EtherType."""
    return len(frame) >= 14 and frame[12] << 8 | frame[13] == ethertype


def test_counts_a_probe_and_not_another_ethertype() -> None:
    c = EthCounter()
    assert c.count(probe_frame(H2, H1, 0), 10) is True
    assert c.count(probe_frame(H2, H1, 1, 0x88B6), 20) is False
    assert c.count(probe_frame(H2, H1, 2), 30, egress=True) is True
    assert c.counters() == {"ethertype": "0x88b5", "ingress": {"frames": 1, "bytes": 60, "last_ns": 10},
                            "egress": {"frames": 1, "bytes": 60, "last_ns": 30}}


def test_the_engine_contract_holds() -> None:
    """netstack.engine.Engine: an action queue (always empty here) and no timer."""
    c = EthCounter(0x0806)
    c.count(probe_frame(H2, H1, 0, 0x0806), 1)
    assert c.actions == [] and c.next_deadline() is None
    c.reset()
    assert c.counters()["ingress"] == {"frames": 0, "bytes": 0, "last_ns": None}
    assert c.ethertype == 0x0806


@pytest.mark.parametrize("bad", [0, 0x05FF, 0x10000, -1, True, "0x88b5", 1.5, None])
def test_an_ethertype_that_is_none_is_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigError) as exc:
        check_ethertype(bad)
    assert exc.value.field == "ethertype"
    with pytest.raises(ConfigError):
        EthCounter(bad)  # type: ignore[arg-type]  # (what a bad config would hand it)


@given(frames=st.lists(st.tuples(FRAMES, st.booleans()), max_size=50),
       ethertype=st.sampled_from([DEFAULT_ETHERTYPE, 0x0800, 0x8100]))
def test_counts_are_exact_whatever_the_bytes(frames: list[tuple[bytes, bool]], ethertype: int) -> None:
    c = EthCounter(ethertype)
    for now, (frame, egress) in enumerate(frames):
        assert c.count(frame, now, egress=egress) == is_counted(frame, ethertype)
    for egress, counts in ((False, c.c.ingress), (True, c.c.egress)):
        mine = [(now, f) for now, (f, e) in enumerate(frames) if e == egress and is_counted(f, ethertype)]
        assert counts.frames == len(mine)
        assert counts.bytes == sum(len(f) for _, f in mine)
        assert counts.last_ns == (mine[-1][0] if mine else None)


# ----------------------------------------------------------------------------- as a switch feature
def two_port_switch() -> Switch:
    """An unpaced switch p0 <-> p1, h1 behind p0 and h2 behind p1 (static forwarding)."""
    return Switch(SwitchConfig("sw1", (PortConfig("p0"), PortConfig("p1")), {H1: "p0", H2: "p1"}))


def test_each_class_overrides_only_the_hooks_it_uses() -> None:
    """An unused hook costs nothing: the port calls only those a feature overrides."""
    ingress_only, both = make_feature(DEFAULT_ETHERTYPE), make_feature(DEFAULT_ETHERTYPE, egress=True)
    assert type(ingress_only) is EthCountFeature and type(both) is EthCountBothWays
    assert implements(ingress_only, "on_ingress") and not implements(ingress_only, "on_egress")
    assert implements(both, "on_ingress") and implements(both, "on_egress")


@given(frames=st.lists(FRAMES, max_size=40))
def test_through_a_switch_every_frame_passes_unchanged_and_the_counts_are_exact(frames: list[bytes]) -> None:
    sw = two_port_switch()
    rx, tx = make_feature(DEFAULT_ETHERTYPE), make_feature(DEFAULT_ETHERTYPE, egress=True)
    sw.attach_feature("p0", rx)
    sw.attach_feature("p1", tx)
    assert counters_on(sw) == {"p0": rx, "p1": tx}
    # frames from h1 to h2 (any bytes after the addresses: the switch forwards what it can)
    sent = [H2 + H1 + f[12:] if len(f) >= 14 else f for f in frames]
    for now, frame in enumerate(sent, start=1):
        sw.receive("p0", frame, now * 1000)
    out = [frame for port, frame in sw.transmit(10**9) if port == "p1"]
    expected = sum(is_counted(f) for f in sent)
    assert rx.counter.c.ingress.frames == expected
    assert tx.counter.c.egress.frames == sum(is_counted(f) for f in out)
    assert all(f in sent for f in out)  # forwarded as they came: counting never rewrites a frame
    probe = probe_frame(H2, H1, 7)
    sw.receive("p0", probe, 2 * 10**9)
    assert (port_frame := sw.transmit(3 * 10**9)) == [("p1", probe)], port_frame
