"""Frames built with the project's own codecs, each with the field values the Lua dissectors must
show for it (``netstack_<protocol>.<field>`` -> the values in tree order)."""

from __future__ import annotations

from dataclasses import dataclass, field

from headers.auth import AuthTrailer
from headers.dta import (
    Append,
    DTABase,
    DTANack,
    KeyIncrement,
    KeyWrite,
    MergeFunction,
    Postcarder,
    SketchMerge,
    build_nack_frame,
    build_report_frame,
    encode_report,
)
from headers.fcs import append_fcs, fcs
from headers.inet import Ethernet, build_udp_frame
from headers.linkguardian import LGData, LGLeadingAck, LGLossNotification
from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode, beacon, commit
from headers.pfc import build_pfc_frame
from headers.registry import EtherType, UdpPort
from headers.tcd import CnpKind, PortState, TcdAck, TcdCnp, TcdData, TcdDataFlag, mark_tos
from headers.tcsack import TcsAck, TcsAckFlag, TcsData, TcsDataFlag
from netstack.linkguardian import LG_CONTROL_MAC
from netstack.onepipe import ctlwire

MAC_A = bytes.fromhex("020000000001")
MAC_B = bytes.fromhex("020000000002")
IP_A = bytes([10, 0, 0, 1])
IP_B = bytes([10, 0, 0, 2])


@dataclass
class Case:
    name: str
    frame: bytes
    expect: dict[str, list[object]]
    #: keys that must be absent from the dissection
    absent: tuple[str, ...] = ()
    #: other fields (any dissector's) whose values are checked too
    extra: dict[str, list[object]] = field(default_factory=dict)


def _pad60(frame: bytes) -> bytes:
    return frame + bytes(max(0, 60 - len(frame)))


def _udp(sport: int, dport: int, payload: bytes, tos: int = 0) -> bytes:
    return build_udp_frame(MAC_A, MAC_B, IP_A, IP_B, sport, dport, payload, tos=tos)


def _trailer(key_id: int, era: int, seq: int) -> AuthTrailer:
    return AuthTrailer(key_id, era, seq, bytes(range(0xA0, 0xA8)))


def _auth(t: AuthTrailer) -> dict[str, list[object]]:
    return {"netstack_auth.key_id": [t.key_id], "netstack_auth.era": [t.era], "netstack_auth.seq": [t.seq],
            "netstack_auth.mac": [t.mac.hex(":")]}


# ---------------------------------------------------------------------------------------- LinkGuardian

def lg_cases() -> list[Case]:
    inner = _udp(5000, 6000, b"protected payload")[14:]
    data = LGData(seq_no=1234, next_type=EtherType.IPV4, era=1, retx=1, dummy=0, blocking=1, rx_buffered=0)
    dummy = LGData(seq_no=65535, next_type=0, era=0, retx=0, dummy=1, blocking=0, rx_buffered=1)
    lack = LGLeadingAck(leading_ack=777, next_type=0, era=1, piggybacked=0)
    pig = LGLeadingAck(leading_ack=42, next_type=EtherType.LINKGUARDIAN, era=0, piggybacked=1)
    pig_data = LGData(seq_no=43, next_type=EtherType.IPV4)
    loss = LGLossNotification(leading_ack=100, hole_size=3, first_lost_seq=65534, next_type=0, era=1)
    pfc_tag = LGData(seq_no=9, next_type=EtherType.MAC_CONTROL)
    eth = Ethernet(MAC_B, MAC_A, EtherType.LINKGUARDIAN).to_bytes()
    ctl = Ethernet(LG_CONTROL_MAC, MAC_A, EtherType.LINKGUARDIAN).to_bytes()
    pfc = build_pfc_frame(MAC_A, 0b10, [0, 0xFFFF, 0, 0, 0, 0, 0, 0])[14:]
    return [
        Case("lg-data-ipv4", eth + data.to_bytes() + inner, {
            "netstack_lg.type": [0], "netstack_lg.era": [1], "netstack_lg.retx": [1], "netstack_lg.dummy": [0],
            "netstack_lg.blocking": [1], "netstack_lg.rx_buffered": [0], "netstack_lg.seq_no": [1234],
            "netstack_lg.next_type": [0x0800]},
            absent=("netstack_lg.padding", "netstack_auth.key_id"),
            extra={"udp.srcport": [5000], "udp.dstport": [6000]}),
        Case("lg-dummy", _pad60(ctl + dummy.to_bytes()), {
            "netstack_lg.type": [0], "netstack_lg.era": [0], "netstack_lg.dummy": [1], "netstack_lg.blocking": [0],
            "netstack_lg.rx_buffered": [1], "netstack_lg.seq_no": [65535], "netstack_lg.next_type": [0],
            "netstack_lg.padding": [":".join(["00"] * (60 - 14 - 5))]}),
        Case("lg-courier", _pad60(ctl + lack.to_bytes()), {
            "netstack_lg.type": [1], "netstack_lg.piggybacked": [0], "netstack_lg.era": [1],
            "netstack_lg.leading_ack": [777], "netstack_lg.next_type": [0]}, absent=("netstack_lg.seq_no",)),
        Case("lg-piggybacked-stack", eth + pig.to_bytes() + pig_data.to_bytes() + inner, {
            "netstack_lg.type": [1, 0], "netstack_lg.piggybacked": [1], "netstack_lg.leading_ack": [42],
            "netstack_lg.seq_no": [43], "netstack_lg.next_type": [0xABCD, 0x0800], "netstack_lg.era": [0, 0]},
            extra={"udp.srcport": [5000]}),
        Case("lg-loss-notification", _pad60(ctl + loss.to_bytes()), {
            "netstack_lg.type": [2], "netstack_lg.piggybacked": [0], "netstack_lg.era": [1],
            "netstack_lg.leading_ack": [100], "netstack_lg.hole_size": [3], "netstack_lg.first_lost_seq": [65534],
            "netstack_lg.last_lost_seq": [0], "netstack_lg.next_type": [0]}),
        Case("lg-data-pfc", eth + pfc_tag.to_bytes() + pfc, {
            "netstack_lg.seq_no": [9], "netstack_lg.next_type": [0x8808]}, extra={"macc.opcode": [0x0101]}),
    ]


def lg_sealed_cases() -> list[Case]:
    """Control frames of a deployment with keys (preference netstack_lg.auth on), one with the FCS."""
    ctl = Ethernet(LG_CONTROL_MAC, MAC_A, EtherType.LINKGUARDIAN).to_bytes()
    lack = LGLeadingAck(leading_ack=4321, next_type=0, era=0)
    loss = LGLossNotification(leading_ack=9, hole_size=255, first_lost_seq=10, next_type=0)
    t1, t2 = _trailer(3, 1_700_000_000, 1), _trailer(255, 1_700_000_001, 2)
    return [
        Case("lg-sealed-courier", _pad60(ctl + lack.to_bytes()) + t1.encode(),
             {"netstack_lg.leading_ack": [4321], **_auth(t1)}),
        Case("lg-sealed-loss-fcs", append_fcs(_pad60(ctl + loss.to_bytes()) + t2.encode()),
             {"netstack_lg.hole_size": [255], "netstack_lg.first_lost_seq": [10], **_auth(t2),
              "netstack_fcs.good": [1]}),
    ]


# ---------------------------------------------------------------------------------------- DTA

def _dta_base(base: DTABase) -> dict[str, list[object]]:
    return {"netstack_dta.opcode": [base.opcode], "netstack_dta.seqnum": [base.seqnum],
            "netstack_dta.immediate": [base.immediate], "netstack_dta.retransmittable": [base.retransmittable],
            "netstack_dta.reserved": [base.reserved]}


def _report(base: DTABase, prim: object, **fields: list[object]) -> Case:
    frame = build_report_frame(MAC_A, MAC_B, IP_A, IP_B, base, prim)  # type: ignore[arg-type]
    return Case(f"dta-{type(prim).__name__}-{base.seqnum}", frame, {**_dta_base(base), **fields},
                absent=("netstack_auth.key_id", "netstack_dta.extra"))


def dta_cases() -> list[Case]:
    sketch = SketchMerge.for_column(9, 2, 6, [1, 2, 3, 4, 0xFFFFFFFF], MergeFunction.MAX)
    cases = [
        _report(DTABase.of(KeyWrite(4, 1, (1,))), KeyWrite(4, 1, (1,)), **{
            "netstack_dta.redundancy": [4], "netstack_dta.key": [1], "netstack_dta.words": [1],
            "netstack_dta.data": [1]}),
        _report(DTABase.of(KeyWrite(2, 0xFFFFFFFF, (7, 8, 9)), seqnum=200, immediate=1, retransmittable=1),
                KeyWrite(2, 0xFFFFFFFF, (7, 8, 9)), **{
            "netstack_dta.redundancy": [2], "netstack_dta.key": [0xFFFFFFFF], "netstack_dta.words": [3],
            "netstack_dta.data": [7, 8, 9]}),
        _report(DTABase.of(Append(7, 0xDEADBEEF), seqnum=1, retransmittable=1), Append(7, 0xDEADBEEF), **{
            "netstack_dta.list_id": [7], "netstack_dta.data": [0xDEADBEEF]}),
        _report(DTABase.of(KeyIncrement(2, 99, 2**40 + 5), seqnum=2), KeyIncrement(2, 99, 2**40 + 5), **{
            "netstack_dta.redundancy": [2], "netstack_dta.key": [99], "netstack_dta.counter": [2**40 + 5]}),
        _report(DTABase.of(Postcarder(0xCAFE, 3, 12345), seqnum=3), Postcarder(0xCAFE, 3, 12345), **{
            "netstack_dta.key": [0xCAFE], "netstack_dta.hop": [3], "netstack_dta.data": [12345]}),
        _report(DTABase(5, seqnum=4, reserved=0x15), sketch, **{
            "netstack_dta.reporter_id": [9], "netstack_dta.sketch_id": [2], "netstack_dta.column": [6],
            "netstack_dta.rows": [5], "netstack_dta.merge": [1], "netstack_dta.counters": [1, 2, 3, 4, 0xFFFFFFFF]}),
    ]
    # sealed reports: the trailer is found from the length rules, no preference needed
    t1, t2 = _trailer(1, 1_700_000_000, 77), _trailer(2, 5, 0xFFFFFFFF)
    app = Append(1, 2)
    kw = KeyWrite(1, 5, (10, 20, 30))
    for prim, t, fields in ((app, t1, {"netstack_dta.list_id": [1], "netstack_dta.data": [2]}),
                            (kw, t2, {"netstack_dta.key": [5], "netstack_dta.words": [3],
                                      "netstack_dta.data": [10, 20, 30]})):
        base = DTABase.of(prim, seqnum=9)
        frame = _udp(UdpPort.DTA_SOURCE, UdpPort.DTA, encode_report(base, prim) + t.encode())
        cases.append(Case(f"dta-sealed-{type(prim).__name__}", frame, {**_dta_base(base), **fields, **_auth(t)},
                          absent=("netstack_dta.extra",)))
    nacks = [DTANack(41), DTANack.for_sketch(5, 9, 2, 6)]
    for nack in nacks:
        frame = build_nack_frame(MAC_B, MAC_A, IP_B, IP_A, nack)  # source port 40040: dispatch is by destination
        expect: dict[str, list[object]] = {
            "netstack_dta_nack.seqnum": [nack.seqnum], "netstack_dta_nack.nack": [1],
            "netstack_dta_nack.sketch": [nack.sketch], "netstack_dta_nack.reserved": [0]}
        if nack.sketch:
            expect |= {"netstack_dta_nack.reporter_id": [9], "netstack_dta_nack.sketch_id": [2],
                       "netstack_dta_nack.expected_column": [6]}
        cases.append(Case(f"dta-nack-{nack.sketch}", frame, expect, absent=("netstack_dta.opcode",)))
    return cases


# ---------------------------------------------------------------------------------------- 1Pipe

TS = 2**47 + 123  # beyond 32 bits, below 2^48


def _op_hdr(h: OnePipeHeader) -> dict[str, list[object]]:
    flags = int(h.flags)
    return {"netstack_1pipe.msg_ts": [h.msg_ts], "netstack_1pipe.be_barrier": [h.be_barrier],
            "netstack_1pipe.commit_barrier": [h.commit_barrier], "netstack_1pipe.psn": [h.psn],
            "netstack_1pipe.opcode": [int(h.opcode)], "netstack_1pipe.flags": [flags],
            "netstack_1pipe.flags.eom": [flags & 1], "netstack_1pipe.flags.som": [flags >> 2 & 1],
            "netstack_1pipe.flags.ece": [flags >> 1 & 1]}


def _op(name: str, packet: bytes, expect: dict[str, list[object]], sport: int = 40101, dport: int = 40100,
        trailer: AuthTrailer | None = None) -> Case:
    hdr = OnePipeHeader.from_bytes(packet)
    body = packet + (trailer.encode() if trailer else b"")
    full = {**_op_hdr(hdr), **expect, **(_auth(trailer) if trailer else {})}
    return Case(f"1pipe-{name}", _udp(sport, dport, body), full,
                absent=() if trailer else ("netstack_auth.key_id",))


def onepipe_cases() -> list[Case]:
    addr = ("10.0.0.9", 40105)
    eom_som = OnePipeFlag.EOM | OnePipeFlag.SOM
    data = OnePipeHeader(TS, TS, 0, 7, OnePipeOpcode.DATA, eom_som).to_bytes() + b"hello"
    prepare = OnePipeHeader(TS + 1, TS + 1, 0, 8, OnePipeOpcode.PREPARE, OnePipeFlag.SOM).to_bytes() + b"\x01\x02"
    ack = OnePipeHeader(TS, TS, 5, 10, OnePipeOpcode.ACK, OnePipeFlag.ECE).to_bytes() + b"\x05"
    nak = OnePipeHeader(TS, TS, 0, 11, OnePipeOpcode.NAK).to_bytes() + (3).to_bytes(4, "big")
    recall = ctlwire.Recall(TS, 12, 3, 2**40 + 1)
    notice = ctlwire.Notice(addr, 4, TS - 5, 77, True)
    resume = OnePipeHeader(0, 0, 0, 0, OnePipeOpcode.RESUME).to_bytes()
    inner = OnePipeHeader(TS, TS, 0, 13, OnePipeOpcode.PREPARE, eom_som).to_bytes() + b"relayed"
    addr_f = {"netstack_1pipe.addr_ip": ["10.0.0.9"], "netstack_1pipe.addr_port": [40105]}
    cases = [
        _op("data", data, {"netstack_1pipe.fragment": ["68:65:6c:6c:6f"]}),
        _op("prepare", prepare, {"netstack_1pipe.fragment": ["01:02"]}),
        _op("ack", ack, {"netstack_1pipe.ack_bitmap": ["05"], "netstack_1pipe.given_up_psn": [9, 7]}, 40100, 40101),
        _op("nak", nak, {"netstack_1pipe.nak_count": [3]}, 40100, 40101),
        _op("beacon", beacon(TS, TS - 1000).to_bytes(), {}),
        _op("commit", commit(2**48 - 1, psn=3).to_bytes(), {}),
        _op("recall", ctlwire.recall(OnePipeOpcode.RECALL, recall, be=TS),
            {"netstack_1pipe.recall_count": [3], "netstack_1pipe.scattering_seq": [2**40 + 1]}),
        _op("recall-ack", ctlwire.recall(OnePipeOpcode.RECALL_ACK, recall),
            {"netstack_1pipe.recall_count": [3], "netstack_1pipe.scattering_seq": [2**40 + 1]}),
        _op("register-request", ctlwire.register_request(0xABCDEF, 2**33, recover=True),
            {"netstack_1pipe.revision": [2**33], "netstack_1pipe.flags.recover": [1]}),
        _op("register-reply", ctlwire.register_reply(addr, 4, 2**33, nonce=5, notices=6, recalls=7),
            {**addr_f, "netstack_1pipe.incarnation": [4], "netstack_1pipe.revision": [2**33],
             "netstack_1pipe.notices": [6], "netstack_1pipe.recalls": [7]}),
        _op("failure-report", ctlwire.failure_report(addr, TS - 9), addr_f),
        _op("failure-notice", ctlwire.failure_notice(notice),
            {**addr_f, "netstack_1pipe.incarnation": [4], "netstack_1pipe.flags.replay": [1]}),
        _op("callback-done", ctlwire.callback_done(77), {}),
        _op("resume", resume, {}),
    ]
    relay = ctlwire.relay(addr, inner)
    r_hdr = _op_hdr(OnePipeHeader.from_bytes(relay))
    i_hdr = _op_hdr(OnePipeHeader.from_bytes(inner))
    both = {k: r_hdr[k] + i_hdr[k] for k in r_hdr}
    cases.append(Case("1pipe-relay", _udp(40101, 40100, relay),
                      {**both, **addr_f, "netstack_1pipe.fragment": ["72:65:6c:61:79:65:64"]}))
    # a sealed BEACON is recognised from its length alone (41 bytes)
    cases.append(_op("sealed-beacon", beacon(TS, 0).to_bytes(), {}, trailer=_trailer(7, 100, 200)))
    return cases


def onepipe_sealed_cases() -> list[Case]:
    """Sealed datagrams whose trailer only the preference netstack_1pipe.auth reveals."""
    data = OnePipeHeader(TS, TS, 0, 70, OnePipeOpcode.DATA, OnePipeFlag.EOM).to_bytes() + b"abc"
    return [_op("sealed-data", data, {"netstack_1pipe.fragment": ["61:62:63"]}, trailer=_trailer(9, 1, 2))]


# ---------------------------------------------------------------------------------------- T/C-SACK

def _tcs(name: str, msg: TcsData | TcsAck, payload: bytes = b"", **fields: list[object]) -> Case:
    sport, dport = (40201, UdpPort.TCSACK) if isinstance(msg, TcsData) else (UdpPort.TCSACK, 40201)
    f = int(msg.flags)
    expect: dict[str, list[object]] = {"netstack_tcsack.kind": [msg.KIND], "netstack_tcsack.flags": [f],
                                       "netstack_tcsack.flow_id": [msg.flow_id]}
    if isinstance(msg, TcsData):
        expect |= {"netstack_tcsack.seq": [msg.seq], "netstack_tcsack.tsval": [msg.tsval],
                   "netstack_tcsack.flags.retx": [f & 1], "netstack_tcsack.flags.last": [f >> 1 & 1],
                   "netstack_tcsack.flags.probe": [f >> 2 & 1]}
    else:
        expect |= {"netstack_tcsack.ack_seq": [msg.ack_seq], "netstack_tcsack.cum_ack": [msg.cum_ack],
                   "netstack_tcsack.tsecr": [msg.tsecr], "netstack_tcsack.n_blocks": [len(msg.blocks)],
                   "netstack_tcsack.ack_delay": [msg.ack_delay],
                   "netstack_tcsack.flags.trigger_count": [f & 1], "netstack_tcsack.flags.fin_seen": [f >> 1 & 1],
                   "netstack_tcsack.flags.nak": [f >> 2 & 1]}
        if msg.blocks:
            expect |= {"netstack_tcsack.block_start": [b[0] for b in msg.blocks],
                       "netstack_tcsack.block_end": [b[1] for b in msg.blocks],
                       "netstack_tcsack.hole_start": [h[0] for h in msg.holes()],
                       "netstack_tcsack.hole_end": [h[1] for h in msg.holes()]}
    return Case(f"tcsack-{name}", _udp(sport, dport, msg.to_bytes() + payload), {**expect, **fields},
                absent=("netstack_tcsack.ignored",))


def tcsack_cases() -> list[Case]:
    return [
        _tcs("data", TcsData(3, 1000, 555, TcsDataFlag.RETX | TcsDataFlag.LAST), b"xyz",
             **{"netstack_tcsack.payload": ["78:79:7a"]}),
        _tcs("probe", TcsData(65535, 2**32 - 1, 2**32 - 1, TcsDataFlag.PROBE)),
        _tcs("ack", TcsAck(3, 17, 100, 555, ((102, 105), (110, 111)), TcsAckFlag.TRIGGER_COUNT | TcsAckFlag.FIN_SEEN,
                           250)),
        _tcs("ack-wrap", TcsAck(1, 2**32 - 1, 2**32 - 5, 0, ((2**32 - 3, 1),), 0, 65535)),
        _tcs("nak", TcsAck(2, 1, 50, 9, (), TcsAckFlag.NAK, 0), **{"netstack_tcsack.n_blocks": [0]}),
    ]


# ---------------------------------------------------------------------------------------- TCD

def tcd_cases() -> list[Case]:
    ect = 0x02 | 0x28 << 2  # ECT(0) with a DSCP that marking must not touch
    data = TcdData(5, 9, 123_456_789_012, TcdDataFlag.FIN)
    cases = []
    for name, tos, mark, state in (
            ("ect", ect, "ECT (every port so far non-congestion)", [0]),
            ("ue", mark_tos(ect, PortState.UNDETERMINED), "UE (crossed an undetermined port)", [1]),
            ("ce", mark_tos(mark_tos(ect, PortState.CONGESTION), PortState.UNDETERMINED),
             "CE (crossed a congestion port)", [2]),
            ("not-ect", 0x28 << 2, "Not-ECT (not TCD capable, never marked)", [])):
        expect: dict[str, list[object]] = {
            "netstack_tcd.version": [1], "netstack_tcd.flags": [1], "netstack_tcd.fin": [1],
            "netstack_tcd.flow": [5], "netstack_tcd.seq": [9], "netstack_tcd.send_ts_ns": [123_456_789_012],
            "netstack_tcd.ecn": [tos & 3], "netstack_tcd.mark": [mark]}
        if state:
            expect["netstack_tcd.state"] = state
        cases.append(Case(f"tcd-data-{name}", _udp(40301, UdpPort.TCD, data.to_bytes(size=64), tos=tos), expect,
                          absent=() if state else ("netstack_tcd.state",), extra={"ip.dsfield.dscp": [0x28]}))
    for kind, marked in ((CnpKind.UE, 17), (CnpKind.CE, 65535)):
        cnp = TcdCnp(flow=0x1234, kind=kind, marked=marked)
        cases.append(Case(f"tcd-cnp-{kind.name}", _udp(UdpPort.TCD, 50001, cnp.to_bytes()), {
            "netstack_tcd.bth_opcode": [0x81], "netstack_tcd.pkey": [0xFFFF], "netstack_tcd.becn": [1],
            "netstack_tcd.dest_qp": [0x1234], "netstack_tcd.flow": [0x1234], "netstack_tcd.psn": [0],
            "netstack_tcd.kind": [int(kind)], "netstack_tcd.marked": [marked], "netstack_tcd.icrc": [0]}))
    seg_end = TcdData(5, 10, 123_456_789_013, TcdDataFlag.ACK)
    cases.append(Case("tcd-data-ack", _udp(40301, UdpPort.TCD, seg_end.to_bytes(size=64), tos=ect), {
        "netstack_tcd.flags": [2], "netstack_tcd.fin": [0], "netstack_tcd.ack_req": [1], "netstack_tcd.seq": [10]}))
    ack = TcdAck(flow=5, seq=10, echo_ts_ns=123_456_789_013, ce=3, ue=65535)
    cases.append(Case("tcd-ack", _udp(UdpPort.TCD, 50001, ack.to_bytes()), {
        "netstack_tcd.ack_type": [0xAC], "netstack_tcd.flags": [0], "netstack_tcd.flow": [5],
        "netstack_tcd.seq": [10], "netstack_tcd.echo_ts_ns": [123_456_789_013], "netstack_tcd.ce": [3],
        "netstack_tcd.ue": [65535]}))
    return cases


def fcs_cases() -> tuple[list[Case], list[Case]]:
    """(frames with a correct software FCS, shown in the default "auto" mode;
    a frame with a wrong one, shown only in "always" mode)."""
    prim = Append(3, 4)
    plain = build_report_frame(MAC_A, MAC_B, IP_A, IP_B, DTABase.of(prim), prim)
    good = append_fcs(plain)
    bad = plain + (fcs(plain) ^ 1).to_bytes(4, "little")
    dta = {"netstack_dta.list_id": [3], "netstack_dta.data": [4]}
    return ([Case("fcs-good", good, {**dta, "netstack_fcs.fcs": [fcs(plain)], "netstack_fcs.computed": [fcs(plain)],
                                     "netstack_fcs.good": [1]})],
            [Case("fcs-bad", bad, {**dta, "netstack_fcs.fcs": [fcs(plain) ^ 1], "netstack_fcs.computed": [fcs(plain)],
                                   "netstack_fcs.good": [0]})])


def default_cases() -> list[Case]:
    """Every case that the plugin's default preferences decode."""
    return [*lg_cases(), *dta_cases(), *onepipe_cases(), *tcsack_cases(), *tcd_cases(), *fcs_cases()[0]]
