"""Fast dissection of a whole frame into netstack records (what the daemons see).

``dissect(frame)`` walks Ethernet -> LinkGuardian tags -> PFC | IPv4 -> UDP -> the header
bound to the UDP port, using only the struct codecs. It never raises: malformed input ends
the walk and comes back as the ``HeaderError`` in the result, so callers can count it.
Scapy's view of the same frame is ``Ether(frame)`` after ``import headers.layers``.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import dta, linkguardian, onepipe, pfc, roce, tcsack
from .errors import HeaderError
from .inet import UDP, Ethernet, IPv4
from .registry import EtherType, IpProto, UdpPort


@dataclass(frozen=True, slots=True)
class Payload:
    """Bytes the walk did not interpret (application data, padding)."""

    offset: int
    length: int


@dataclass(frozen=True, slots=True)
class IcrcCheck:
    """Result of checking a RoCEv2 frame's invariant CRC."""

    ok: bool


def dissect(frame: bytes | bytearray | memoryview) -> tuple[list[object], HeaderError | None]:
    """Records found in ``frame`` in wire order, and the error that stopped the walk (if any)."""
    records: list[object] = []
    try:
        _walk(frame, records)
    except HeaderError as exc:
        return records, exc
    return records, None


def _walk(frame: bytes | bytearray | memoryview, out: list[object]) -> None:
    eth = Ethernet.from_bytes(frame)
    out.append(eth)
    off, etype = 14, eth.type
    while etype == EtherType.LINKGUARDIAN:  # tags may stack (a LACK piggybacked on protected data)
        tag = linkguardian.decode_tag(frame, off)
        out.append(tag)
        off += tag.size()
        etype = tag.next_type
    if etype == EtherType.MAC_CONTROL:
        out.append(pfc.PFCFrame.from_bytes(frame, off))
        return
    if etype != EtherType.IPV4:
        _rest(frame, off, len(frame), out)
        return
    l3 = off
    ip = IPv4.from_bytes(frame, l3)
    out.append(ip)
    end = l3 + ip.total_length
    if end > len(frame):
        raise HeaderError("IPv4", f"total_length={ip.total_length} runs past the frame", l3 + 2)
    off = l3 + ip.ihl * 4
    if ip.proto != IpProto.UDP:
        _rest(frame, off, end, out)
        return
    udp = UDP.from_bytes(frame, off)
    out.append(udp)
    if off + udp.length > end:
        raise HeaderError("UDP", f"length={udp.length} runs past the IP datagram", off + 4)
    end = off + udp.length
    off += 8
    port = udp.dport
    if port == UdpPort.ROCEV2:
        bth = roce.BTH.from_bytes(frame, off)
        out.append(bth)
        off += 12
        for ext in roce.ext_headers_for(bth.opcode):
            rec = ext.from_bytes(frame, off)
            out.append(rec)
            off += rec.size()
        if end - off < 4:
            raise HeaderError("RoCEv2", "no room for the 4-byte ICRC", off)
        _rest(frame, off, end - 4, out)
        out.append(IcrcCheck(roce.check_icrc(memoryview(frame)[:end], l3)))
        return
    if port == UdpPort.DTA:
        base, primitive = dta.decode_report(frame, off, end)
        out += [base, primitive]
        return
    if port == UdpPort.DTA_NACK:
        out.append(dta.DTANack.from_bytes(frame, off))
        return
    if onepipe.is_onepipe_port(port) or onepipe.is_onepipe_port(udp.sport):
        out.append(onepipe.OnePipeHeader.from_bytes(frame, off))
        off += onepipe.OnePipeHeader.SIZE
    elif UdpPort.TCSACK in (port, udp.sport):
        tcs = tcsack.decode_tcsack(frame, off, end)
        out.append(tcs)
        off += tcs.size()
    _rest(frame, off, end, out)


def _rest(frame: bytes | bytearray | memoryview, off: int, end: int, out: list[object]) -> None:
    if end > off:
        out.append(Payload(off, end - off))


def describe(record: object) -> str:
    """One line for a record, with MACs and IPv4 addresses in their usual notation."""
    from dataclasses import is_dataclass

    from .record import field_values

    if not (hasattr(record, "FIELDS") or is_dataclass(record)):
        return repr(record)
    parts = []
    for name, value in field_values(record).items():
        if isinstance(value, bytes) and len(value) == 6:
            text = ":".join(f"{b:02x}" for b in value)
        elif isinstance(value, bytes) and len(value) == 4:
            text = ".".join(str(b) for b in value)
        elif isinstance(value, int) and name in ("type", "next_type", "checksum", "pkey", "rkey", "va", "key"):
            text = f"{value:#x}"
        else:
            text = repr(value)
        parts.append(f"{name}={text}")
    return f"{type(record).__name__}({', '.join(parts)})"
