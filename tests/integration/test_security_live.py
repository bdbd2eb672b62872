"""The edge filter on the live testbed (docs/security.md): a host that sends LinkGuardian frames
(a forged leading ACK, a loss notification, a PFC pause hidden behind a tag) has them dropped by
the switch's edge port and counted, as ``netstack status --json`` shows, while LinkGuardian on
sw1-sw2 keeps working; and a host's bare PFC pause on a non-lossless edge port is refused."""

from __future__ import annotations

import json

from headers.linkguardian import LGLeadingAck, LGLossNotification
from headers.pfc import pause_frame
from netstack import runtime
from netstack.cli import main as cli
from netstack.linkguardian import LG_CONTROL_MAC
from netstack.linkguardian.control import disable_link, enable_link

from .conftest import in_node

SEND = """
import socket, sys
frames = [bytes.fromhex(h) for h in sys.argv[1:]]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for f in frames:
    s.send(f)
print(len(frames))
"""


def _until(cond, timeout: float = 5.0) -> None:
    """Wait for the daemon to have handled what was sent (it reads its port asynchronously)."""
    import time

    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.05)


def _mac(state, node: str) -> bytes:
    port = next(p for p in state.ports if p.node == node)
    return bytes.fromhex(port.mac.replace(":", ""))


def _forged(h1: bytes, h2: bytes) -> list[bytes]:
    lg = b"\xab\xcd"
    courier = LG_CONTROL_MAC + h1 + lg + LGLeadingAck(0x7FFF).to_bytes()
    notice = LG_CONTROL_MAC + h1 + lg + LGLossNotification(0, 255, 1).to_bytes()
    pfc = pause_frame(h1, list(range(8)))
    wrapped = h2 + h1 + lg + LGLeadingAck(1, 0x8808, 0, 1).to_bytes() + pfc[14:]
    return [f + bytes(max(0, 60 - len(f))) for f in (courier, notice, wrapped)]


def test_a_hosts_forged_linkguardian_frames_are_dropped_and_counted_at_sw1(testbed, capsys):
    prefix = testbed.prefix
    enable_link(prefix, "sw1-sw2", copies=1)
    try:
        before = runtime.status(prefix)["daemons"]["sw1"]["ports"]["p-h1"]["edge_drops_switch_only"]
        frames = _forged(_mac(testbed, "h1"), _mac(testbed, "h2"))
        r = in_node(testbed, "h1", SEND, *[f.hex() for f in frames * 10])
        assert r.returncode == 0, r.stderr
        _until(lambda: runtime.status(prefix)["daemons"]["sw1"]["ports"]["p-h1"]["edge_drops_switch_only"]
               >= before + 30)
        assert cli(["status", "--prefix", prefix, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        sw1 = status["daemons"]["sw1"]["ports"]["p-h1"]
        assert sw1["edge_drops_switch_only"] - before == 30
        lg = runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]["counters"]
        assert lg["loss_notifications_rx"] == 0  # the host's notification never reached the sender
        sw2 = status["daemons"]["sw2"]["ports"]
        assert all(p["pauses_rx"] == 0 for p in sw2.values())
        assert cli(["status", "--prefix", prefix]) == 0
        table = capsys.readouterr().out
        assert "refused at the edge" in table and "edge_drops_switch_only" in table
    finally:
        disable_link(prefix, "sw1-sw2")


def test_a_hosts_pause_on_a_non_lossless_edge_port_is_refused(testbed):
    prefix = testbed.prefix
    before = runtime.status(prefix)["daemons"]["sw1"]["ports"]["p-h1"]
    pfc = pause_frame(_mac(testbed, "h1"), list(range(8)))
    r = in_node(testbed, "h1", SEND, pfc.hex())
    assert r.returncode == 0, r.stderr
    _until(lambda: runtime.status(prefix)["daemons"]["sw1"]["ports"]["p-h1"]["edge_drops_pfc"]
           > before["edge_drops_pfc"])
    after = runtime.status(prefix)["daemons"]["sw1"]["ports"]["p-h1"]
    assert after["edge_drops_pfc"] - before["edge_drops_pfc"] == 1
    assert after["pauses_rx"] == before["pauses_rx"] and not any(after["paused"])


def test_a_hosts_forged_source_address_is_dropped_at_its_edge_port(testbed):
    """BCP 38 (issue 34, finding 3; docs/security.md "Source address validation"): sw1's port to h1
    forwards h1's datagrams and drops and counts those that claim another source (h2's address, an
    address nobody has), and an ARP that would bind h2's address to h1's MAC."""
    from headers.inet import build_udp_frame
    from netstack.fuzz import ip_of

    prefix = testbed.prefix
    port = lambda: runtime.status(prefix)["daemons"]["sw1"]["ports"]["p-h1"]  # noqa: E731
    before = port()
    h1, h2 = _mac(testbed, "h1"), _mac(testbed, "h2")
    own, other = ip_of(testbed, "h1"), ip_of(testbed, "h2")
    genuine = [build_udp_frame(h1, h2, own, other, 4000, 9, b"x" * 20)] * 10
    forged = [build_udp_frame(h1, h2, src, other, 4000, 9, b"x" * 20) for src in (other, bytes([10, 9, 9, 9]))] * 5
    arp = b"\xff" * 6 + h1 + b"\x08\x06" + bytes.fromhex("0001080006040002") + h1 + other + h2 + other
    r = in_node(testbed, "h1", SEND, *[f.hex() for f in genuine + forged + [arp]])
    assert r.returncode == 0, r.stderr
    _until(lambda: port()["rx_frames"] - before["rx_frames"] >= 21)
    after = port()
    assert after["edge_drops_spoofed"] - before["edge_drops_spoofed"] == 11
    sw1 = json.loads((runtime.run_dir(prefix) / "sw1.json").read_text())["switch"]["ports"]
    assert next(p for p in sw1 if p["name"] == "p-h1")["source_ips"] == [testbed.host_ip("h1")]
