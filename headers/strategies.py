"""Hypothesis strategies for every netstack wire format: records, whole frames, and mutations.

Public, so that you can write property tests of your own against our headers::

    from hypothesis import given
    from headers import strategies as hs
    from headers.errors import HeaderError
    from headers.frame import dissect
    from headers.linkguardian import LGData

    @given(hs.records(LGData))                      # any valid record of one header
    def test_round_trip(tag):
        assert LGData.from_bytes(tag.to_bytes()) == tag

    @given(hs.frames("dta"))                         # whole valid frames of a protocol
    def test_dissects(frame):
        assert dissect(frame)[1] is None

    @given(hs.mutated(hs.frames("linkguardian")))    # bit flips, cuts, splices, type confusion
    def test_never_raises_anything_else(frame):
        try:
            my_decoder(frame)
        except HeaderError:
            pass

:func:`records` covers every class in the codecs' ``HEADERS`` (:data:`RECORD_CLASSES`);
:func:`frames` builds Ethernet frames per protocol (:data:`PROTOCOLS`), optionally aimed at
given addresses (:class:`Endpoints`: a frame a daemon will actually look at);
:func:`mutated` damages frames the way a fuzzer does (bit flips, byte overwrites with boundary
values, truncation at header boundaries, extension, field splicing with another frame, type
confusion of EtherTypes, IP protocols, UDP ports and opcodes, lying length fields), optionally
repairing the checksums afterwards (:func:`repair`) so that the damage gets past IPv4, UDP and
ICRC checks and reaches the protocol's own parser; :func:`fuzz_frames` mixes random bytes,
valid frames and mutations.

Every strategy here is defined once, as a :class:`Gen`: a function of a :class:`Draw` source.
``Gen.strategy()`` runs it under hypothesis (with shrinking); ``Gen.sample(rng)`` runs it from
a seeded :class:`random.Random` (fast, and the same frames for the same seed on every run of
the same code: what ``netstack fuzz --seed`` uses). The ``*_gen`` functions return the
generators, their namesakes without the suffix the strategies.
"""

from __future__ import annotations

import contextlib
import random
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from hypothesis import strategies as st

from . import auth, dta, inet, linkguardian, onepipe, pfc, roce, tcd, tcsack
from .errors import HeaderError
from .fcs import append_fcs
from .registry import PFC_DST_MAC, EtherType, IpProto, UdpPort

T = TypeVar("T")
U = TypeVar("U")
T_co = TypeVar("T_co", covariant=True)


# =============================================================================== draw sources
class Draw(Protocol):
    """Where a generator takes its choices from (hypothesis, or a seeded random.Random)."""

    def integer(self, lo: int, hi: int) -> int:
        """An int in ``[lo, hi]``, boundary values often."""

    def flag(self, p: float = 0.5) -> bool:
        """True with probability about ``p``."""

    def choice(self, options: Sequence[T]) -> T:
        """One of ``options`` (a non-empty sequence)."""

    def raw(self, lo: int, hi: int) -> bytes:
        """Between ``lo`` and ``hi`` random bytes."""


class _HypothesisDraw:
    """Draw through hypothesis's ``draw``: every choice shrinks."""

    __slots__ = ("_draw",)

    def __init__(self, draw: st.DrawFn) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return self._draw(st.integers(lo, hi))

    def flag(self, p: float = 0.5) -> bool:
        # shrinks towards the first option (0 < threshold): True when p > 0
        return self._draw(st.integers(0, 1023)) < int(p * 1024)

    def choice(self, options: Sequence[T]) -> T:
        return options[self._draw(st.integers(0, len(options) - 1))]

    def raw(self, lo: int, hi: int) -> bytes:
        return self._draw(st.binary(min_size=lo, max_size=hi))


class RandomDraw:
    """Draw from a :class:`random.Random`: about a microsecond per choice, reproducible from the
    generator's seed. Like hypothesis, it prefers boundary values now and then (1 in 8)."""

    __slots__ = ("rng",)

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        r = self.rng
        if hi - lo > 2 and r.random() < 0.125:
            return r.choice((lo, lo + 1, hi - 1, hi))
        return r.randint(lo, hi)

    def flag(self, p: float = 0.5) -> bool:
        return self.rng.random() < p

    def choice(self, options: Sequence[T]) -> T:
        return options[self.rng.randrange(len(options))]

    def raw(self, lo: int, hi: int) -> bytes:
        r = self.rng
        n = r.randint(lo, hi)
        k = r.random()
        if k < 0.06:
            return bytes(n)
        if k < 0.09:
            return b"\xff" * n
        return r.randbytes(n)


class Gen(Generic[T_co]):
    """A generator of values, usable as a hypothesis strategy and from a seeded random source."""

    __slots__ = ("fn", "name")

    def __init__(self, fn: Callable[[Draw], T_co], name: str) -> None:
        self.fn = fn
        self.name = name

    def __call__(self, d: Draw) -> T_co:
        return self.fn(d)

    def __repr__(self) -> str:
        return f"Gen({self.name})"

    def strategy(self) -> st.SearchStrategy[T_co]:
        fn = self.fn

        @st.composite
        def run(draw: st.DrawFn) -> T_co:
            return fn(_HypothesisDraw(draw))

        return run()

    def sample(self, rng: random.Random) -> T_co:
        return self.fn(RandomDraw(rng))

    def map(self, f: Callable[[T_co], U], name: str | None = None) -> Gen[U]:
        fn = self.fn
        return Gen(lambda d: f(fn(d)), name or f"{self.name}.map")


def one_of(*gens: Gen[T], name: str = "one_of") -> Gen[T]:
    """A generator that picks one of ``gens`` (uniformly) and runs it."""
    return Gen(lambda d: d.choice(gens)(d), name)


# =============================================================================== field values
def _u(bits: int) -> Callable[[Draw], int]:
    top = (1 << bits) - 1
    return lambda d: d.integer(0, top)


u1, u8, u16, u24, u32, u48, u64 = (_u(b) for b in (1, 8, 16, 24, 32, 48, 64))


def unicast_mac(d: Draw) -> bytes:
    """A locally administered unicast MAC (what netstack's nodes have)."""
    return bytes([d.integer(0, 63) << 2 | 2]) + d.raw(5, 5)


def any_mac(d: Draw) -> bytes:
    return d.raw(6, 6)


def ipv4_addr(d: Draw) -> bytes:
    return d.raw(4, 4)


# =============================================================================== records
def _lg_data(d: Draw) -> linkguardian.LGData:
    return linkguardian.LGData(u16(d), u16(d), u1(d), u1(d), u1(d), u1(d), u1(d))


def _lg_leading_ack(d: Draw) -> linkguardian.LGLeadingAck:
    return linkguardian.LGLeadingAck(u16(d), u16(d), u1(d), u1(d))


def _lg_loss(d: Draw) -> linkguardian.LGLossNotification:
    return linkguardian.LGLossNotification(u16(d), d.integer(1, 255), u16(d), u16(d), u1(d), u1(d))


def _pfc(d: Draw) -> pfc.PFCFrame:
    return pfc.PFCFrame(u8(d), tuple(u16(d) for _ in range(pfc.PFC_CLASSES)))


def _words(d: Draw, lo: int, hi: int) -> tuple[int, ...]:
    return tuple(u32(d) for _ in range(d.integer(lo, hi)))


def _dta_base(d: Draw) -> dta.DTABase:
    return dta.DTABase(u8(d), u8(d), u1(d), u1(d), d.integer(0, 63))


def _keywrite(d: Draw) -> dta.KeyWrite:
    return dta.KeyWrite(d.integer(1, 255), u32(d), _words(d, 1, 16))


def _append(d: Draw) -> dta.Append:
    return dta.Append(u32(d), u32(d))


def _keyincrement(d: Draw) -> dta.KeyIncrement:
    return dta.KeyIncrement(d.integer(1, 255), u32(d), u64(d))


def _postcarder(d: Draw) -> dta.Postcarder:
    return dta.Postcarder(u32(d), u8(d), u32(d))


def _sketchmerge(d: Draw) -> dta.SketchMerge:
    counters = _words(d, 1, 255 if d.flag(0.05) else 16)
    return dta.SketchMerge.for_column(u16(d), u16(d), u32(d), counters, d.choice(list(dta.MergeFunction)))


def _dta_nack(d: Draw) -> dta.DTANack:
    if d.flag():
        return dta.DTANack(u8(d), u1(d), 0, d.integer(0, 63))
    return dta.DTANack(u8(d), u1(d), 1, d.integer(0, 63), u16(d), u16(d), u32(d))


_PRIMITIVES: tuple[Callable[[Draw], dta.Primitive], ...] = (_keywrite, _append, _keyincrement, _postcarder,
                                                               _sketchmerge)


def _dta_primitive(d: Draw) -> dta.Primitive:
    return d.choice(_PRIMITIVES)(d)


def _bth(d: Draw, opcode: int | None = None) -> roce.BTH:
    return roce.BTH(u8(d) if opcode is None else opcode, u1(d), u1(d), d.integer(0, 3), d.integer(0, 15), u16(d),
                    u1(d), u1(d), d.integer(0, 63), u24(d), u1(d), d.integer(0, 127), u24(d))


def _reth(d: Draw) -> roce.RETH:
    return roce.RETH(u64(d), u32(d), u32(d))


def _atomic_eth(d: Draw) -> roce.AtomicETH:
    return roce.AtomicETH(u64(d), u32(d), u64(d), u64(d))


def _aeth(d: Draw) -> roce.AETH:
    return roce.AETH(u8(d), u24(d))


def _atomic_ack_eth(d: Draw) -> roce.AtomicAckETH:
    return roce.AtomicAckETH(u64(d))


def _onepipe(d: Draw) -> onepipe.OnePipeHeader:
    return onepipe.OnePipeHeader(u48(d), u48(d), u48(d), u32(d), d.choice(list(onepipe.OnePipeOpcode)), u8(d))


def _tcd_data(d: Draw) -> tcd.TcdData:
    return tcd.TcdData(u16(d), u32(d), u64(d), d.integer(0, tcd.DATA_FLAGS))


def _tcd_cnp(d: Draw) -> tcd.TcdCnp:
    return tcd.TcdCnp(u16(d), d.choice(list(tcd.CnpKind)), u16(d))


def _tcd_ack(d: Draw) -> tcd.TcdAck:
    return tcd.TcdAck(u16(d), u32(d), u64(d), u16(d), u16(d))


def _tcs_data(d: Draw) -> tcsack.TcsData:
    return tcsack.TcsData(u16(d), u32(d), u32(d), u8(d))


def _sack_blocks(d: Draw, cum_ack: int) -> tuple[tuple[int, int], ...]:
    """Ascending, non-empty, non-adjacent runs above ``cum_ack`` within 2^31 (wrapping freely)."""
    out = []
    pos = 0
    for _ in range(d.integer(0, 12)):
        gap = d.integer(1, 1 << d.choice((4, 12, 24)))
        length = d.integer(1, 1 << d.choice((4, 12, 24)))
        if pos + gap + length >= tcsack.SEQ_HALF:
            break
        start = pos + gap
        pos = start + length
        out.append(((cum_ack + start) & tcsack.SEQ_MASK, (cum_ack + pos) & tcsack.SEQ_MASK))
    return tuple(out)


def _tcs_ack(d: Draw) -> tcsack.TcsAck:
    cum = d.integer(tcsack.SEQ_MOD - 64, tcsack.SEQ_MASK) if d.flag(0.2) else u32(d)
    return tcsack.TcsAck(u16(d), u32(d), cum, u32(d), _sack_blocks(d, cum), u8(d), u16(d))


def _auth_trailer(d: Draw) -> auth.AuthTrailer:
    return auth.AuthTrailer(u8(d), u32(d), u32(d), d.raw(auth.MAC_LEN, auth.MAC_LEN))


def _ethernet(d: Draw) -> inet.Ethernet:
    return inet.Ethernet(any_mac(d), any_mac(d), u16(d))


def _ipv4(d: Draw) -> inet.IPv4:
    return inet.IPv4(ipv4_addr(d), ipv4_addr(d), u8(d), d.integer(20, 0xFFFF), u8(d), u16(d), u16(d), u8(d),
                     u16(d) if d.flag(0.5) else None)


def _udp(d: Draw) -> inet.UDP:
    return inet.UDP(u16(d), u16(d), d.integer(8, 0xFFFF), u16(d))


_RECORD_FNS: dict[type, Callable[[Draw], Any]] = {
    inet.Ethernet: _ethernet, inet.IPv4: _ipv4, inet.UDP: _udp,
    linkguardian.LGData: _lg_data, linkguardian.LGLeadingAck: _lg_leading_ack,
    linkguardian.LGLossNotification: _lg_loss,
    pfc.PFCFrame: _pfc,
    dta.DTABase: _dta_base, dta.KeyWrite: _keywrite, dta.Append: _append, dta.KeyIncrement: _keyincrement,
    dta.Postcarder: _postcarder, dta.SketchMerge: _sketchmerge, dta.DTANack: _dta_nack,
    roce.BTH: _bth, roce.RETH: _reth, roce.AtomicETH: _atomic_eth, roce.AETH: _aeth,
    roce.AtomicAckETH: _atomic_ack_eth,
    onepipe.OnePipeHeader: _onepipe,
    tcd.TcdData: _tcd_data, tcd.TcdCnp: _tcd_cnp, tcd.TcdAck: _tcd_ack,
    tcsack.TcsData: _tcs_data, tcsack.TcsAck: _tcs_ack,
    auth.AuthTrailer: _auth_trailer,
}

#: Every header record class these strategies cover: each codec module's ``HEADERS`` and the
#: authentication trailer.
RECORD_CLASSES: tuple[type, ...] = tuple(_RECORD_FNS)


def record_gen(cls: type[T]) -> Gen[T]:
    """Valid records of header class ``cls`` (one of :data:`RECORD_CLASSES`)."""
    try:
        fn = _RECORD_FNS[cls]
    except KeyError:
        raise ValueError(f"no strategy for {cls!r}; known: {', '.join(c.__name__ for c in RECORD_CLASSES)}") from None
    return Gen(fn, cls.__name__)


def records(cls: type[T]) -> st.SearchStrategy[T]:
    """Hypothesis strategy of valid ``cls`` records (``.to_bytes()`` gives their wire form)."""
    return record_gen(cls).strategy()


def any_record() -> st.SearchStrategy[Any]:
    """A valid record of any header class."""
    return st.one_of(*(records(c) for c in RECORD_CLASSES))


# =============================================================================== whole frames
@dataclass(frozen=True)
class Endpoints:
    """Whom generated frames are from and to. Each field is a sequence of values to choose from,
    or empty: random (a random unicast MAC, any IPv4 address, any port). Aim frames at a daemon
    with its port's MAC and its node's IP, so that they get past forwarding and address checks."""

    src_macs: Sequence[bytes] = ()
    dst_macs: Sequence[bytes] = ()
    src_ips: Sequence[bytes] = ()
    dst_ips: Sequence[bytes] = ()
    sports: Sequence[int] = ()
    dports: Sequence[int] = ()
    #: share of frames whose fields are random even where choices are given (reach the rest)
    stray: float = 0.1

    def _pick(self, d: Draw, options: Sequence[Any], fallback: Callable[[Draw], Any]) -> Any:
        if options and not d.flag(self.stray):
            return d.choice(options)
        return fallback(d)

    def macs(self, d: Draw) -> tuple[bytes, bytes]:
        return self._pick(d, self.src_macs, unicast_mac), self._pick(d, self.dst_macs, unicast_mac)

    def ips(self, d: Draw) -> tuple[bytes, bytes]:
        return self._pick(d, self.src_ips, ipv4_addr), self._pick(d, self.dst_ips, ipv4_addr)

    def port(self, d: Draw, which: str, default: int | None) -> int:
        """A port from the choices given; else the protocol's own (``default``: always for the
        destination, mostly for the source); else one that names no protocol."""
        options = self.sports if which == "src" else self.dports
        if options:
            return int(d.choice(options))
        if default is not None and (which == "dst" or d.flag(0.85)):
            return default
        return plain_port(d)


#: UDP ports :func:`headers.frame.dissect` dispatches on (a protocol's header follows)
PROTOCOL_PORTS = frozenset({*(int(p) for p in UdpPort), *onepipe.PORTS})


def plain_port(d: Draw) -> int:
    """A UDP port that names no protocol of netstack's."""
    port = u16(d)
    return port ^ 0x8000 if port in PROTOCOL_PORTS else port


ANYWHERE = Endpoints()


def _udp_frame(d: Draw, ends: Endpoints, sport: int | None, dport: int | None, payload: bytes,
               tos: int | None = None) -> bytes:
    src, dst = ends.macs(d)
    sip, dip = ends.ips(d)
    return inet.build_udp_frame(src, dst, sip, dip, ends.port(d, "src", sport), ends.port(d, "dst", dport), payload,
                                tos=u8(d) if tos is None else tos, ttl=d.integer(1, 255), ident=u16(d),
                                checksum=d.flag(0.9))


#: EtherTypes whose payload the codecs parse: generic Ethernet frames carry none of them
_PARSED_TYPES = frozenset((EtherType.IPV4, EtherType.MAC_CONTROL, EtherType.LINKGUARDIAN))


def _f_ethernet(d: Draw, ends: Endpoints) -> bytes:
    """Ethernet with an EtherType the codecs do not parse (ARP, IPv6, VLAN, LLDP, anything)."""
    src, dst = ends.macs(d)
    etype = d.choice((u16(d), 0x0806, 0x86DD, 0x8100, 0x88CC, 0x0600))
    if etype in _PARSED_TYPES:
        etype ^= 0x0100
    return inet.Ethernet(dst, src, etype).to_bytes() + d.raw(0, 128)


def _f_udp(d: Draw, ends: Endpoints) -> bytes:
    return _udp_frame(d, ends, None, None, d.raw(0, 200))


def _f_pfc(d: Draw, ends: Endpoints) -> bytes:
    src, dst = ends.macs(d)
    return _pfc(d).to_frame(PFC_DST_MAC if d.flag(0.7) else dst, src)


def _f_pause(d: Draw, ends: Endpoints) -> bytes:
    """802.3x PAUSE (MAC control opcode 0x0001): one quanta for the whole link. The switch
    honours it; :func:`headers.frame.dissect` decodes only PFC and reports it malformed."""
    src, dst = ends.macs(d)
    head = inet.Ethernet(PFC_DST_MAC if d.flag(0.7) else dst, src, EtherType.MAC_CONTROL).to_bytes()
    return head + struct.pack("!HH", 1, u16(d)) + bytes(42)


def _inner_ip(d: Draw, ends: Endpoints) -> bytes:
    """An IPv4/UDP packet (no Ethernet header) for a LinkGuardian tag to carry."""
    return _udp_frame(d, ends, None, None, d.raw(0, 120))[14:]


def _f_linkguardian(d: Draw, ends: Endpoints) -> bytes:
    src, dst = ends.macs(d)
    kind = d.integer(0, 3)
    if kind == 0:  # protected data (dummies carry nothing)
        data = _lg_data(d)
        body = b"" if data.dummy else _inner_ip(d, ends)
        tag: linkguardian.LGTag = linkguardian.LGData(data.seq_no, 0 if data.dummy else EtherType.IPV4, data.era,
                                                      data.retx, data.dummy, data.blocking, 0)
    elif kind == 1:  # an explicit leading-ACK courier
        tag, body = linkguardian.LGLeadingAck(u16(d), 0, u1(d), 0), b""
        dst = linkguardian_control_mac(d, dst)
    elif kind == 2:  # a loss notification
        tag, body = linkguardian.LGLossNotification(u16(d), d.integer(1, 255), u16(d), 0, u1(d), 0), b""
        dst = linkguardian_control_mac(d, dst)
    else:  # a leading ACK piggybacked on reverse traffic
        tag, body = linkguardian.LGLeadingAck(u16(d), EtherType.IPV4, u1(d), 1), _inner_ip(d, ends)
    frame = inet.Ethernet(dst, src, EtherType.LINKGUARDIAN).to_bytes() + tag.to_bytes() + body
    if kind in (1, 2) and d.flag(0.3):
        frame += _auth_trailer(d).encode()  # as a keyed link seals its control frames
    return frame + bytes(max(0, 60 - len(frame)))


#: where LinkGuardian's receiver sends its control frames (netstack.linkguardian: LG_CONTROL_MAC)
LG_CONTROL_MAC = bytes.fromhex("034c47000000")


def linkguardian_control_mac(d: Draw, otherwise: bytes) -> bytes:
    return LG_CONTROL_MAC if d.flag(0.8) else otherwise


def _f_dta(d: Draw, ends: Endpoints) -> bytes:
    prim = _dta_primitive(d)
    base = dta.DTABase(prim.OPCODE, u8(d), u1(d), u1(d), 0 if d.flag(0.9) else d.integer(0, 63))
    return _udp_frame(d, ends, UdpPort.DTA_SOURCE, UdpPort.DTA, dta.encode_report(base, prim))


def _f_dta_nack(d: Draw, ends: Endpoints) -> bytes:
    return _udp_frame(d, ends, UdpPort.DTA, UdpPort.DTA_NACK, _dta_nack(d).to_bytes())


def _f_roce(d: Draw, ends: Endpoints) -> bytes:
    opcode = d.choice((*roce.EXT_HEADERS, roce.Opcode.SEND_ONLY, roce.Opcode.RDMA_WRITE_MIDDLE, u8(d)))
    bth = _bth(d, int(opcode))
    ext = [_EXT_FNS[cls](d) for cls in roce.ext_headers_for(bth.opcode)]
    src, dst = ends.macs(d)
    sip, dip = ends.ips(d)
    return roce.build_roce_frame(src, dst, sip, dip, ends.port(d, "src", 49152), bth, ext, d.raw(0, 64),
                                 tos=u8(d), ttl=d.integer(1, 255), ident=u16(d))


_EXT_FNS: dict[type, Callable[[Draw], Any]] = {roce.RETH: _reth, roce.AtomicETH: _atomic_eth, roce.AETH: _aeth,
                                               roce.AtomicAckETH: _atomic_ack_eth}


def _f_onepipe(d: Draw, ends: Endpoints) -> bytes:
    hdr = _onepipe(d)
    body = b"" if hdr.opcode in onepipe.NO_PAYLOAD_OPCODES else d.raw(0, 100)
    port = d.integer(onepipe.PORT_BASE, onepipe.PORT_BASE + 3)
    return _udp_frame(d, ends, port, port, hdr.to_bytes() + body)


def _f_tcsack(d: Draw, ends: Endpoints) -> bytes:
    msg: tcsack.TcsData | tcsack.TcsAck = _tcs_data(d) if d.flag() else _tcs_ack(d)
    body = msg.to_bytes() + (d.raw(0, 200) if isinstance(msg, tcsack.TcsData) else b"")
    return _udp_frame(d, ends, UdpPort.TCSACK, UdpPort.TCSACK, body)


def _f_tcd(d: Draw, ends: Endpoints) -> bytes:
    if d.flag():
        data = _tcd_data(d)
        return _udp_frame(d, ends, None, UdpPort.TCD, data.to_bytes(d.integer(16, 200)),
                          tos=d.choice((tcd.Ecn.ECT_0, tcd.Ecn.ECT_1, tcd.Ecn.CE, u8(d))))
    return _udp_frame(d, ends, UdpPort.TCD, None, _tcd_cnp(d).to_bytes())


_FRAME_FNS: dict[str, Callable[[Draw, Endpoints], bytes]] = {
    "ethernet": _f_ethernet, "udp": _f_udp, "pfc": _f_pfc, "pause": _f_pause, "linkguardian": _f_linkguardian,
    "dta": _f_dta, "dta-nack": _f_dta_nack, "roce": _f_roce, "onepipe": _f_onepipe, "tcsack": _f_tcsack, "tcd": _f_tcd,
}

#: The protocols :func:`frames` builds whole valid frames of.
PROTOCOLS: tuple[str, ...] = tuple(_FRAME_FNS)


def frame_gen(protocol: str | Sequence[str] | None = None, ends: Endpoints = ANYWHERE) -> Gen[bytes]:
    """Valid Ethernet frames of ``protocol`` (one of :data:`PROTOCOLS`, several, or None: any),
    addressed as ``ends`` says. Frames carry no FCS (:func:`with_fcs` adds one)."""
    names: Sequence[str] = PROTOCOLS if protocol is None else [protocol] if isinstance(protocol, str) else protocol
    for name in names:
        if name not in _FRAME_FNS:
            raise ValueError(f"no frames of {name!r}; protocols: {', '.join(PROTOCOLS)}")
    fns = [_FRAME_FNS[n] for n in names]
    if len(fns) == 1:
        fn = fns[0]
        return Gen(lambda d: fn(d, ends), f"frames({names[0]})")
    return Gen(lambda d: d.choice(fns)(d, ends), f"frames({','.join(names)})")


def frames(protocol: str | Sequence[str] | None = None, ends: Endpoints = ANYWHERE) -> st.SearchStrategy[bytes]:
    """Hypothesis strategy of valid frames of ``protocol`` (see :func:`frame_gen`)."""
    return frame_gen(protocol, ends).strategy()


def any_frame() -> st.SearchStrategy[bytes]:
    return frames()


# =============================================================================== mutations
#: EtherTypes, IP protocols, UDP ports and opcode bytes that type confusion writes
ETHERTYPES = (0x0800, 0x0806, 0x86DD, 0x8100, EtherType.MAC_CONTROL, EtherType.LINKGUARDIAN, 0x0000, 0xFFFF)
IP_PROTOS = (IpProto.ICMP, IpProto.TCP, IpProto.UDP, 0, 255)
UDP_PORTS = (*(int(p) for p in UdpPort), 40101, 0, 0xFFFF)
OPCODE_BYTES = (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x0A, 0x81, 0xFF)
#: offsets where a header starts or a length sits in the frames above: cuts and splices like them
BOUNDARIES = (0, 6, 12, 13, 14, 15, 17, 19, 20, 22, 24, 26, 30, 34, 36, 38, 40, 42, 43, 45, 46, 50, 54, 58, 60, 66,
              74)
INTERESTING = (0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF)


def _pos(d: Draw, n: int) -> int:
    """A position in a buffer of ``n`` > 0 bytes, often a header boundary."""
    if d.flag(0.4):
        return min(d.choice(BOUNDARIES), n - 1)
    return d.integer(0, n - 1)


def _bit_flips(d: Draw, b: bytearray, donor: bytes) -> None:
    for _ in range(d.integer(1, 8)):
        b[_pos(d, len(b))] ^= 1 << d.integer(0, 7)


def _overwrite(d: Draw, b: bytearray, donor: bytes) -> None:
    for _ in range(d.integer(1, 4)):
        b[_pos(d, len(b))] = d.choice(INTERESTING) if d.flag() else u8(d)


def _truncate(d: Draw, b: bytearray, donor: bytes) -> None:
    del b[max(1, _pos(d, len(b))):]


def _extend(d: Draw, b: bytearray, donor: bytes) -> None:
    how = d.integer(0, 2)
    if how == 0:
        b += d.raw(1, 64)
    elif how == 1:
        b += bytes(d.integer(1, 64))
    else:
        b += b[_pos(d, len(b)):][:d.integer(1, 200)]


def _splice(d: Draw, b: bytearray, donor: bytes) -> None:
    """Field splicing: bytes of another frame over the same offsets (a header of one frame with
    the fields of another), or the donor's tail after a cut (headers of one, body of another)."""
    if not donor:
        return
    i = _pos(d, min(len(b), len(donor)))
    if d.flag():
        j = min(len(b), len(donor), i + d.integer(1, 16))
        b[i:j] = donor[i:j]
    else:
        b[i:] = donor[_pos(d, len(donor)):]


def _put16(b: bytearray, off: int, value: int) -> None:
    if len(b) >= off + 2:
        b[off:off + 2] = value.to_bytes(2, "big")


def _type_confusion(d: Draw, b: bytearray, donor: bytes) -> None:
    """Say another protocol is inside: the EtherType (or a LinkGuardian tag's next_type), the IP
    protocol, a UDP port or the first payload byte (an opcode or kind)."""
    where = d.integer(0, 4)
    if where == 0:
        _put16(b, 12, d.choice(ETHERTYPES))
    elif where == 1:
        _put16(b, d.choice((17, 20, 22, 25)), d.choice(ETHERTYPES))
    elif where == 2 and len(b) > 23:
        b[23] = d.choice(IP_PROTOS)
    elif where == 3:
        _put16(b, d.choice((34, 36)), d.choice(UDP_PORTS))
    elif len(b) > 42:
        b[42] = d.choice(OPCODE_BYTES)


def _length_lie(d: Draw, b: bytearray, donor: bytes) -> None:
    """IPv4 total length or UDP length (or IHL) that disagree with the frame."""
    where = d.integer(0, 2)
    value = d.choice((0, 1, 7, 8, 20, 27, 28, len(b), len(b) - 13, len(b) + 1, 0xFFFF, u16(d)))
    if where == 0:
        _put16(b, 16, value & 0xFFFF)
    elif where == 1:
        _put16(b, 38, value & 0xFFFF)
    elif len(b) > 14:
        b[14] = (b[14] & 0xF0) | d.integer(0, 15)


MUTATIONS: dict[str, Callable[[Draw, bytearray, bytes], None]] = {
    "bit_flip": _bit_flips, "overwrite": _overwrite, "truncate": _truncate, "extend": _extend,
    "splice": _splice, "type_confusion": _type_confusion, "length_lie": _length_lie,
}
_MUTATION_FNS = tuple(MUTATIONS.values())


def repair(frame: bytes | bytearray) -> bytes:
    """``frame`` with its IPv4 header checksum, UDP checksum and RoCEv2 ICRC recomputed where
    the frame has them and its lengths allow it: a mutated frame that then gets past a kernel's
    (or a NIC's) checks and reaches the protocol's own parser. Never raises."""
    b = bytearray(frame)
    if len(b) < 34 or b[12:14] != b"\x08\x00" or b[14] >> 4 != 4:
        return bytes(b)
    ihl = (b[14] & 15) * 4
    if ihl < 20 or len(b) < 14 + ihl:
        return bytes(b)
    b[24:26] = b"\0\0"
    b[24:26] = inet.internet_checksum(b[14:14 + ihl]).to_bytes(2, "big")
    total = b[16] << 8 | b[17]
    u = 14 + ihl
    if b[23] != IpProto.UDP or len(b) < u + 8 or total < ihl + 8 or 14 + total > len(b):
        return bytes(b)
    ulen = b[u + 4] << 8 | b[u + 5]
    if ulen < 8 or u + ulen > 14 + total:
        return bytes(b)
    if (b[u + 2] << 8 | b[u + 3]) == UdpPort.ROCEV2:
        b[u + 6:u + 8] = b"\0\0"  # RoCEv2 sends no UDP checksum; the ICRC covers the datagram
        with contextlib.suppress(HeaderError):
            roce.write_icrc(b, 14)
        return bytes(b)
    if b[u + 6:u + 8] != b"\0\0":
        b[u + 6:u + 8] = b"\0\0"
        csum = inet.udp_checksum(bytes(b[26:30]), bytes(b[30:34]), bytes(b[u:u + ulen]))
        b[u + 6:u + 8] = csum.to_bytes(2, "big")
    return bytes(b)


def mutate(d: Draw, frame: bytes, donor: bytes = b"", *, max_ops: int = 4, repair_p: float = 0.5) -> bytes:
    """``frame`` with 1 to ``max_ops`` of :data:`MUTATIONS` applied (``donor``: the frame to
    splice from), then, with probability ``repair_p``, its checksums recomputed (:func:`repair`)."""
    b = bytearray(frame or b"\0")
    for _ in range(d.integer(1, max_ops)):
        d.choice(_MUTATION_FNS)(d, b, donor)
        if not b:
            b = bytearray(b"\0")
    return repair(b) if d.flag(repair_p) else bytes(b)


def mutation_gen(corpus: Sequence[bytes] | Gen[bytes], *, max_ops: int = 4, repair_p: float = 0.5) -> Gen[bytes]:
    """Mutations (:func:`mutate`) of frames taken from ``corpus``: a list of captured valid
    frames, or a generator of valid frames."""
    if isinstance(corpus, Gen):
        source: Gen[bytes] = corpus
    else:
        frozen = tuple(bytes(f) for f in corpus)
        if not frozen:
            raise ValueError("mutation_gen needs at least one frame to mutate")
        source = Gen(lambda d: d.choice(frozen), "corpus")
    return Gen(lambda d: mutate(d, source(d), source(d), max_ops=max_ops, repair_p=repair_p), f"mutated({source.name})")


def mutated(source: st.SearchStrategy[bytes] | Sequence[bytes], *, max_ops: int = 4,
            repair_p: float = 0.5) -> st.SearchStrategy[bytes]:
    """Hypothesis strategy of mutations of frames drawn from ``source`` (a strategy of frames,
    e.g. :func:`frames`, or a list of captured frames): bit flips, overwrites, truncation,
    extension, field splicing, type confusion and lying lengths (:data:`MUTATIONS`)."""
    if isinstance(source, st.SearchStrategy):
        strat = source
    else:
        corpus = [bytes(f) for f in source]
        if not corpus:
            raise ValueError("mutated needs at least one frame to mutate")
        strat = st.sampled_from(corpus)

    @st.composite
    def run(draw: st.DrawFn) -> bytes:
        return mutate(_HypothesisDraw(draw), draw(strat), draw(strat), max_ops=max_ops, repair_p=repair_p)

    return run()


def random_bytes_gen(lo: int = 0, hi: int = 256) -> Gen[bytes]:
    return Gen(lambda d: d.raw(lo, hi), "random_bytes")


def fuzz_gen(valid: Gen[bytes], corpus: Sequence[bytes] = (), *, weights: tuple[int, int, int] = (1, 2, 5),
             max_len: int = 1514) -> Gen[bytes]:
    """A fuzzer's mix: random bytes, valid frames from ``valid``, and mutations of ``valid``'s
    frames and of the captured ``corpus``, in the proportions ``weights`` (random, valid,
    mutated); frames longer than ``max_len`` are cut to it."""
    rnd = random_bytes_gen(0, 256)
    mutants = mutation_gen(one_of(valid, Gen(lambda d: d.choice(corpus), "corpus")) if corpus else valid)
    table = [rnd] * weights[0] + [valid] * weights[1] + [mutants] * weights[2]
    return Gen(lambda d: d.choice(table)(d)[:max_len], f"fuzz({valid.name})")


def fuzz_frames(protocol: str | Sequence[str] | None = None, corpus: Sequence[bytes] = (),
                ends: Endpoints = ANYWHERE) -> st.SearchStrategy[bytes]:
    """Hypothesis strategy of a fuzzer's mix for ``protocol`` (see :func:`fuzz_gen`)."""
    return fuzz_gen(frame_gen(protocol, ends), corpus).strategy()


def with_fcs(frame: bytes) -> bytes:
    """``frame`` with the software FCS trailer switch-to-switch links carry (:mod:`headers.fcs`)."""
    return append_fcs(frame)


__all__ = [
    "ANYWHERE", "BOUNDARIES", "ETHERTYPES", "IP_PROTOS", "LG_CONTROL_MAC", "MUTATIONS", "OPCODE_BYTES", "PROTOCOLS",
    "RECORD_CLASSES", "UDP_PORTS", "Draw", "Endpoints", "Gen", "RandomDraw", "any_frame", "any_record", "frame_gen",
    "frames", "fuzz_frames", "fuzz_gen", "mutate", "mutated", "mutation_gen", "one_of", "random_bytes_gen",
    "record_gen", "records", "repair", "with_fcs",
]
