"""Truncated and garbage frames of every protocol: tshark reports them as expert info, and the plugin
never raises a Lua error. Many frames share one capture (tshark starts in about a second)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headers.inet import Ethernet, build_udp_frame
from headers.registry import EtherType, UdpPort

from . import frames

UDP_PORTS = (UdpPort.DTA, UdpPort.DTA_NACK, UdpPort.ONEPIPE, 40150, UdpPort.TCSACK, UdpPort.TCD)
PREF_SETS = ((), ("netstack_lg.auth:TRUE", "netstack_1pipe.auth:TRUE", "netstack_fcs.mode:always",
                  "netstack_tcd.all_ipv4:TRUE"))


def _clean(ts, frames_, prefs=()):
    done = ts.run(ts.write(frames_), "-V", prefs=prefs)
    text = done.stdout + done.stderr
    assert "Lua Error" not in text, text[text.find("Lua Error") - 2000:][:4000]
    assert "netstack dissector failure" not in text
    assert "Dissector bug" not in text
    return done.stdout


def _truncations():
    """Every valid frame cut at every length after its Ethernet header (UDP lengths fixed up so the
    cut reaches our dissectors rather than stopping in IPv4)."""
    out = []
    for case in frames.default_cases():
        f = case.frame
        ethertype = f[12] << 8 | f[13]
        for cut in range(14, len(f)):
            if ethertype == EtherType.IPV4 and f[23] == 17 and cut >= 42:
                sport, dport = int.from_bytes(f[34:36], "big"), int.from_bytes(f[36:38], "big")
                out.append(build_udp_frame(f[6:12], f[:6], f[26:30], f[30:34], sport, dport, f[42:cut], tos=f[15]))
            elif ethertype != EtherType.IPV4:
                out.append(f[:cut])
    return out


def test_every_truncation_gives_expert_info_not_lua_errors(ts):
    cuts = _truncations()
    assert len(cuts) > 500
    for prefs in PREF_SETS:
        text = _clean(ts, cuts, prefs)
    assert "truncated" in text


def _garbage_frames(payloads):
    eth = Ethernet(frames.MAC_B, frames.MAC_A, EtherType.LINKGUARDIAN).to_bytes()
    out = []
    for i, payload in enumerate(payloads):
        out.append(eth + payload)
        port = UDP_PORTS[i % len(UDP_PORTS)]
        out.append(build_udp_frame(frames.MAC_A, frames.MAC_B, frames.IP_A, frames.IP_B, 33333, port, payload,
                                   tos=payload[0] if payload else 0))
        out.append(build_udp_frame(frames.MAC_A, frames.MAC_B, frames.IP_A, frames.IP_B, port, 33333, payload))
    return out


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.binary(max_size=96), min_size=150, max_size=150))
def test_garbage_gives_no_lua_error(ts, payloads):
    batch = _garbage_frames(payloads)
    for prefs in PREF_SETS:
        _clean(ts, batch, prefs)


def _lg(payload: bytes) -> bytes:
    return Ethernet(frames.MAC_B, frames.MAC_A, EtherType.LINKGUARDIAN).to_bytes() + payload


def _u(port: int, payload: bytes, sport: int = 33333) -> bytes:
    return build_udp_frame(frames.MAC_A, frames.MAC_B, frames.IP_A, frames.IP_B, sport, port, payload)


def _malformed_cases():
    from headers.onepipe import OnePipeHeader, OnePipeOpcode, beacon

    hdr = OnePipeHeader(1, 1, 0, 1, OnePipeOpcode.DATA).to_bytes()
    return [
        ("lg-empty", _lg(b""), "netstack_lg.truncated"),
        ("lg-data-short", _lg(b"\x02\x00"), "netstack_lg.truncated"),
        ("lg-loss-short", _lg(b"\x80\x00\x01\x02\x00"), "netstack_lg.truncated"),
        ("lg-hole-zero", _lg(b"\x80\x00\x01\x00\x00\x05\x00\x00"), "netstack_lg.hole_zero"),
        ("lg-type-11", _lg(b"\xc0\x00\x01\x08\x00"), "netstack_lg.buffered"),
        ("lg-stack-ends", _lg(b"\x02\x00\x01\xab\xcd"), "netstack_lg.truncated"),
        ("dta-short", _u(UdpPort.DTA, b"\x01\x00"), "netstack_dta.truncated"),
        ("dta-append-short", _u(UdpPort.DTA, b"\x02\x00\x00\x00\x00\x00\x01"), "netstack_dta.truncated"),
        ("dta-append-long", _u(UdpPort.DTA, b"\x02\x00\x00" + bytes(9)), "netstack_dta.bad_length"),
        ("dta-keywrite-odd", _u(UdpPort.DTA, b"\x01\x00\x00\x01" + bytes(4) + bytes(6)), "netstack_dta.bad_length"),
        ("dta-redundancy-0", _u(UdpPort.DTA, b"\x01\x00\x00\x00" + bytes(8)), "netstack_dta.redundancy_zero"),
        ("dta-opcode", _u(UdpPort.DTA, b"\x09\x00\x00"), "netstack_dta.unknown_opcode"),
        ("dta-sketch-rows", _u(UdpPort.DTA, b"\x05\x00\x00" + bytes(8) + b"\x03\x00" + bytes(4)),
         "netstack_dta.truncated"),
        ("dta-sketch-merge", _u(UdpPort.DTA, b"\x05\x00\x00" + bytes(8) + b"\x01\x07" + bytes(4)),
         "netstack_dta.unknown_merge"),
        ("nack-short", _u(UdpPort.DTA_NACK, b"\x01"), "netstack_dta_nack.truncated"),
        ("nack-sketch-short", _u(UdpPort.DTA_NACK, b"\x01\xc0\x00\x01"), "netstack_dta_nack.truncated"),
        ("1pipe-short", _u(UdpPort.ONEPIPE, hdr[:23]), "netstack_1pipe.truncated"),
        ("1pipe-opcode", _u(UdpPort.ONEPIPE, hdr[:22] + b"\x99\x00"), "netstack_1pipe.unknown_opcode"),
        ("1pipe-beacon-payload", _u(UdpPort.ONEPIPE, beacon(5, 5).to_bytes() + b"x"), "netstack_1pipe.bad_payload"),
        ("1pipe-nak-payload", _u(UdpPort.ONEPIPE, hdr[:22] + b"\x04\x00" + b"xy"), "netstack_1pipe.bad_payload"),
        ("1pipe-relay-relay", _u(UdpPort.ONEPIPE, hdr[:22] + b"\x15\x00" + bytes(6) + hdr[:22] + b"\x15\x00"),
         "netstack_1pipe.bad_relay"),
        ("tcsack-empty-kind", _u(UdpPort.TCSACK, b"\x07"), "netstack_tcsack.unknown_kind"),
        ("tcsack-data-short", _u(UdpPort.TCSACK, b"\x01\x00\x00"), "netstack_tcsack.truncated"),
        ("tcsack-ack-blocks", _u(UdpPort.TCSACK, b"\x02\x00\x00\x01" + bytes(12) + b"\x02\x00\x00\x00" + bytes(8)),
         "netstack_tcsack.truncated"),
        ("tcsack-bad-block", _u(UdpPort.TCSACK, b"\x02\x00\x00\x01" + bytes(4) + (10).to_bytes(4, "big") + bytes(4)
                                + b"\x01\x00\x00\x00" + (12).to_bytes(4, "big") + (11).to_bytes(4, "big")),
         "netstack_tcsack.bad_block"),
        ("tcd-data-short", _u(UdpPort.TCD, b"\x01\x00\x00"), "netstack_tcd.truncated"),
        ("tcd-version", _u(UdpPort.TCD, b"\x07"), "netstack_tcd.unknown"),
        ("tcd-flags", _u(UdpPort.TCD, b"\x01\x04" + bytes(14)), "netstack_tcd.reserved_flags"),
        ("tcd-ack-short", _u(UdpPort.TCD, b"\xac" + bytes(10), sport=UdpPort.TCD), "netstack_tcd.truncated"),
        ("tcd-ack-long", _u(UdpPort.TCD, b"\xac" + bytes(20), sport=UdpPort.TCD), "netstack_tcd.ack_length"),
        ("tcd-ack-flags", _u(UdpPort.TCD, b"\xac\x01" + bytes(18), sport=UdpPort.TCD), "netstack_tcd.reserved_flags"),
        ("tcd-cnp-short", _u(UdpPort.TCD, b"\x81" + bytes(20)), "netstack_tcd.truncated"),
        ("tcd-cnp-kind", _u(UdpPort.TCD, b"\x81" + bytes(11) + b"\x05" + bytes(19), sport=UdpPort.TCD),
         "netstack_tcd.cnp_kind"),
    ]


def test_malformed_input_of_each_protocol_raises_its_expert_item(ts):
    cases = _malformed_cases()
    packets, text = ts.json(ts.write([f for _, f, _ in cases]))
    assert "Lua Error" not in text and "netstack dissector failure" not in text
    from .conftest import fields_of

    missing = [(name, want) for (name, _, want), p in zip(cases, packets, strict=True) if want not in fields_of(p)]
    assert missing == []
