"""Real tshark with the plugin on captures built by the project's codecs: every protocol and every
message type decodes to the values that were encoded."""

from __future__ import annotations

import re

import pytest

from netstack.wireshark import PLUGIN

from . import frames
from .frames import Case

#: the plugin's expert items (none may appear on well-formed frames)
OUR_EXPERTS = frozenset(re.findall(r'ef\("(netstack_[\w.]+)"', PLUGIN.read_text()))

# one capture per preference set, dissected once per session
RUNS = {
    "default": (frames.default_cases, ()),
    "sealed": (lambda: [*frames.lg_sealed_cases(), *frames.onepipe_sealed_cases()],
               ("netstack_lg.auth:TRUE", "netstack_1pipe.auth:TRUE")),
    "fcs-always": (lambda: frames.fcs_cases()[1], ("netstack_fcs.mode:always",)),
}


@pytest.fixture(scope="module")
def dissected(ts):
    out = {}
    for run, (make, prefs) in RUNS.items():
        cases = make()
        packets, text = ts.json(ts.write([c.frame for c in cases]), prefs=prefs)
        assert "Lua Error" not in text and "netstack dissector failure" not in text, text[-3000:]
        assert len(packets) == len(cases)
        out[run] = {c.name: (c, _fields(p)) for c, p in zip(cases, packets, strict=True)}
    return out


def _fields(packet):
    from .conftest import fields_of

    return fields_of(packet)


def _norm(value: str) -> object:
    if value in ("True", "False"):
        return int(value == "True")
    try:
        return int(value, 0)
    except ValueError:
        return value


def _check(case: Case, fields: dict[str, list[str]]) -> None:
    wanted = {**case.expect, **case.extra}
    got = {k: [_norm(v) for v in fields.get(k, [])] for k in wanted}
    assert got == wanted, case.name
    present = [k for k in case.absent if k in fields]
    assert present == [], case.name
    raised = [k for k in fields if k in OUR_EXPERTS]
    assert raised == [], case.name


@pytest.mark.parametrize("name", [c.name for c in frames.default_cases()])
def test_default_preferences_decode_what_was_sent(dissected, name):
    _check(*dissected["default"][name])


@pytest.mark.parametrize("name", [c.name for c in (*frames.lg_sealed_cases(), *frames.onepipe_sealed_cases())])
def test_authentication_trailer_with_the_preferences_on(dissected, name):
    _check(*dissected["sealed"][name])


def test_wrong_fcs_is_flagged_in_always_mode(dissected):
    case, fields = dissected["fcs-always"]["fcs-bad"]
    wanted = {**case.expect}
    assert {k: [_norm(v) for v in fields.get(k, [])] for k in wanted} == wanted
    assert any("FCS mismatch" in m for m in fields.get("_ws.expert.message", []))


def test_every_protocol_and_message_type_is_covered():
    names = {c.name for c in frames.default_cases()}
    opcodes_1pipe = {"data", "prepare", "ack", "nak", "beacon", "commit", "recall", "recall-ack", "register-request",
                     "register-reply", "failure-report", "failure-notice", "callback-done", "resume", "relay"}
    assert {f"1pipe-{o}" for o in opcodes_1pipe} <= names
    assert {f"dta-{k}-{s}" for k, s in (("KeyWrite", 0), ("Append", 1), ("KeyIncrement", 2), ("Postcarder", 3),
                                        ("SketchMerge", 4))} <= names
    assert {"dta-nack-0", "dta-nack-1", "lg-data-ipv4", "lg-courier", "lg-loss-notification", "tcsack-data",
            "tcsack-ack", "tcd-cnp-UE", "tcd-cnp-CE", "tcd-data-ue", "tcd-data-ack", "tcd-ack", "fcs-good"} <= names


def test_tcd_mark_on_every_ipv4_packet_when_asked(ts):
    """Preference netstack_tcd.all_ipv4: the mark of any IPv4 packet (here DTA reports marked by a
    port in UNDETERMINED), not only UDP 40300's."""
    from headers.dta import Append, DTABase, encode_report
    from headers.tcd import PortState, mark_ipv4_frame_inplace

    prim = Append(1, 1)
    report = encode_report(DTABase.of(prim), prim)
    ect = bytearray(frames._udp(40041, 40040, report, tos=0x02))
    plain = bytearray(frames._udp(40041, 40040, report, tos=0x00))
    assert mark_ipv4_frame_inplace(ect, 14, PortState.UNDETERMINED)
    assert not mark_ipv4_frame_inplace(plain, 14, PortState.UNDETERMINED)  # Not-ECT is never marked
    pcap = ts.write([bytes(ect), bytes(plain)])
    off, _ = ts.json(pcap)
    on, _ = ts.json(pcap, prefs=("netstack_tcd.all_ipv4:TRUE",))
    assert "netstack_tcd.mark" not in _fields(off[0])
    first, second = _fields(on[0]), _fields(on[1])
    assert [_norm(v) for v in first["netstack_tcd.state"]] == [1]
    assert first["netstack_tcd.mark"] == ["UE (crossed an undetermined port)"]
    assert "netstack_tcd.state" not in second and second["netstack_tcd.mark"][0].startswith("Not-ECT")


def test_fcs_marked_by_netstack_capture_is_shown_even_when_wrong(ts):
    """`netstack capture` on a software-FCS link writes a pcapng comment per frame; the default "auto"
    mode trusts it, so a corrupted frame's trailer is shown (and flagged) although its CRC fails."""
    import os

    from netstack.capture import Captured, PcapngOut, Tap

    good_case, bad_case = frames.fcs_cases()[0][0], frames.fcs_cases()[1][0]
    loss = frames.lg_sealed_cases()[1].frame[:-4 - 17]  # a loss notification, no trailers
    path = ts.dir / "link.pcapng"
    out = PcapngOut(str(path), Tap("sw1-sw2", "sw1", "sw2", "ns-sw1", "p1", fcs=True))
    for f in (good_case.frame, bad_case.frame, loss + b"\x00\x00\x00\x00"):
        out.write(Captured(f, 1.0, outbound=False))
    out.close()
    os.chmod(path, 0o644)
    packets, _ = ts.json(path)
    good, bad, lg = (_fields(p) for p in packets)
    assert [_norm(v) for v in good["netstack_fcs.good"]] == [1]
    assert [_norm(v) for v in bad["netstack_fcs.good"]] == [0]
    assert "netstack_fcs.bad" in bad and "netstack_fcs.bad" not in good
    assert [_norm(v) for v in lg["netstack_lg.hole_size"]] == [255]
    assert lg["netstack_lg.padding"] == [":".join(["00"] * (60 - 14 - 8))]  # the FCS is not padding
    assert "netstack_fcs.bad" in lg


def test_tcd_codepoints_preference(ts):
    """A deployment with other TcdCodepoints: the preference picks the same assignment."""
    from headers.tcd import PortState, TcdCodepoints, TcdData, mark_tos

    cps = TcdCodepoints(ect=0b01, ue=0b10, ce=0b11)
    frames_ = [frames._udp(40301, 40300, TcdData(1, i, 0).to_bytes(), tos=mark_tos(cps.ect, state, cps))
               for i, state in enumerate(PortState)]
    packets, _ = ts.json(ts.write(frames_), prefs=("netstack_tcd.codepoints:ect01-ue10-ce11",))
    assert [[_norm(v) for v in _fields(p)["netstack_tcd.state"]] for p in packets] == [[0], [1], [2]]
    assert [_fields(p)["netstack_tcd.mark"][0].split()[0] for p in packets] == ["ECT", "UE", "CE"]
