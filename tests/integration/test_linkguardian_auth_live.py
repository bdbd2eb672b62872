"""LinkGuardian with keys on the live testbed (docs/security.md "Keys and authenticated frames"):
the topology names a key file; with 2 % corruption and LinkGuardian on, a sequenced stream still
arrives complete and in order while every control frame is sealed and accepted; control frames
forged on the link are refused and counted, also those hidden behind a data tag (issue 34, finding
1: ``unsealed_control``); a key rotation reaches both switches without a
refused genuine frame beyond the overlap's rules."""

from __future__ import annotations

import socket
import time

import pytest

from headers.fcs import append_fcs
from headers.linkguardian import ETHERTYPE, LGData, LGLeadingAck, LGLossNotification
from netstack import runtime
from netstack.auth import keys
from netstack.linkguardian.control import disable_link, enable_link
from netstack.linkguardian.sender import LG_CONTROL_MAC
from netstack.topo import impair
from netstack.topo.model import default_topology_text, loads_topology
from netstack.topo.netns import in_netns

from .conftest import running
from .test_linkguardian_live import _stream

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    d = tmp_path_factory.mktemp("keys")
    keys.generate(d / "lab.keys")
    text = default_topology_text().replace('prefix = "ns"', 'prefix = "ns"\nkeys = "lab.keys"')
    (d / "lab.toml").write_text(text)
    topo = loads_topology(text, str(d / "lab.toml"))
    assert topo.keys_path() == d / "lab.keys"
    yield from running(topo, tmp_path_factory, "k")


def _lg(prefix):
    sender = runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]["counters"]
    receiver = runtime.control(prefix, "sw2", "lg_status")["p-sw1"]["receiver"]["counters"]
    return sender, receiver


def test_sealed_control_keeps_the_stream_complete_and_in_order(keyed):
    prefix = keyed.prefix
    assert runtime.control(prefix, "sw1", "auth_status")["current"] == 1
    impair.apply_impairment(prefix, keyed.namespaces["sw1"], "p-sw2", corrupt=0.02, backend="nft")
    try:
        enable_link(prefix, "sw1-sw2", copies=2)
        res = _stream(keyed, 3000, 1500)
        sender, receiver = _lg(prefix)
    finally:
        disable_link(prefix, "sw1-sw2")
        impair.clear_impairment(prefix, keyed.namespaces["sw1"], "p-sw2")
    assert (res["duplicates"], res["reordered"]) == (0, 0), res
    # complete but for a hole given up after ackNoTimeout (§3.5: a CPU stall), which is counted
    assert res["lost"] <= receiver["timeouts"] + receiver.get("reorder_drops", 0) and res["lost"] <= 3, \
        (res, receiver)
    assert sender["auth"] and receiver["auth"]
    assert sender["auth_ok"] > 0 and receiver["auth_sealed"] >= sender["auth_ok"]
    assert sender["auth_refused"]["forged"] == 0 and sender["auth_refused"]["replayed"] == 0
    assert receiver["holes_detected"] > 0 and sender["retransmissions"] > 0


def test_control_forged_on_the_link_is_refused_and_counted(keyed):
    prefix = keyed.prefix
    enable_link(prefix, "sw1-sw2", copies=1)
    try:
        _stream(keyed, 300, 1000)
        before, _ = _lg(prefix)
        # an on-path party on sw1-sw2: explicit leading ACKs and a loss notification, from sw2's
        # side of the link (sent on sw2's veth end, so they arrive on sw1's protected port)
        lg = b"\xab\xcd"
        ctl_mac = LG_CONTROL_MAC  # where the receiver switch sends its control
        src = b"\x02\x00\x00\x00\x00\x99"
        forged = [ctl_mac + src + lg + bytes([0x40, 0x12, 0x34, 0, 0]) + bytes(60),  # a courier, no trailer
                  ctl_mac + src + lg + bytes([0x40, 0x00, 0x10, 0, 0]) + bytes(43) + bytes(range(17)),
                  ctl_mac + src + lg + bytes([0x80, 0x00, 0x05, 3, 0x00, 0x06, 0, 0]) + bytes(60)]
        # issue 34, finding 1: the control tags behind a data tag, outside what a seal covers
        hidden = [ctl_mac + src + lg + LGData(7, ETHERTYPE).to_bytes() + tag + bytes(60)
                  for tag in (LGLeadingAck(0x7FFF, 0).to_bytes(), LGLossNotification(0, 5, 1, 0).to_bytes())]
        forged += hidden
        with in_netns(keyed.namespaces["sw2"]):
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        try:
            s.bind(("p-sw1", 0))
            for f in forged:
                s.send(append_fcs(f))
        finally:
            s.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            after, _ = _lg(prefix)
            if sum(after["auth_refused"].values()) - sum(before["auth_refused"].values()) >= len(forged):
                break
            time.sleep(0.1)
    finally:
        disable_link(prefix, "sw1-sw2")
    refused = {k: after["auth_refused"][k] - before["auth_refused"][k] for k in after["auth_refused"]}
    assert sum(refused.values()) == len(forged), refused
    assert refused["replayed"] == 0
    assert refused["unsealed_control"] == len(hidden)  # refused before the engine, never acted on


def test_a_key_rotation_reaches_both_switches(keyed):
    prefix = keyed.prefix
    path = runtime.topology_of(keyed).keys_path()
    new = keys.rotate(path, overlap_s=30, now=time.time())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        cur = [runtime.control(prefix, sw, "auth_status")["current"] for sw in ("sw1", "sw2")]
        if cur == [new, new]:
            break
        time.sleep(0.2)
    assert cur == [new, new]
    enable_link(prefix, "sw1-sw2", copies=1)
    try:
        res = _stream(keyed, 500, 1000)
        sender, _ = _lg(prefix)
    finally:
        disable_link(prefix, "sw1-sw2")
    assert res["lost"] == 0 and sender["auth_ok"] > 0
