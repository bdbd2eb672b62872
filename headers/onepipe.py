"""1Pipe: the 24-byte header lib1pipe adds to every packet, and its 48-bit clock arithmetic.

1Pipe (SIGCOMM '21) orders messages by a sender timestamp and lets receivers
deliver a message once a *barrier* (a lower bound on every later timestamp on a link,
aggregated by switches with ``min``) has passed it. §6.1 fixes the header: "3 timestamps
including message, best-effort barrier, and commit barrier; PSN; an opcode and a flag that
marks end of message", 24 bytes in all, timestamps being 48-bit nanosecond counts whose
wrap-around is handled "with PAWS". We carry it over UDP port 40100 (docs/wire-formats.md
"Registry"); the fields are network order::

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
    |                     msg_ts (bits 47..16)                      |  0
    +-------------------------------+-------------------------------+
    |      msg_ts (bits 15..0)      |   be_barrier (bits 47..32)    |  4
    +-------------------------------+-------------------------------+
    |                   be_barrier (bits 31..0)                     |  8
    +---------------------------------------------------------------+
    |                 commit_barrier (bits 47..16)                  | 12
    +-------------------------------+-------------------------------+
    |  commit_barrier (bits 15..0)  |       psn (bits 31..16)       | 16
    +-------------------------------+---------------+---------------+
    |       psn (bits 15..0)        |    opcode     |     flags     | 20
    +-------------------------------+---------------+---------------+
    |            payload (DATA, PREPARE, ...; none for BEACON)      : 24

With a key file in the topology every datagram also ends with the 17-byte authentication trailer
of :mod:`headers.auth` (after the payload; no header field says so): :func:`decode_sealed`
reads such a datagram (docs/wire-formats.md, 1Pipe "Authenticated datagrams").

``docs/wire-formats.md`` (1Pipe section) has the per-opcode meaning of every field, and docs/papers.md
("1Pipe") what netstack takes from the paper. The § numbers in these comments (§1-§12) are the 1Pipe
design topics listed in docs/papers.md ("1Pipe design topics"), not the paper's section numbers.
"""

from __future__ import annotations

import struct
from enum import IntEnum, IntFlag
from typing import ClassVar

from .auth import TRAILER_LEN, AuthTrailer, decode_trailer
from .errors import HeaderError, check_bits, need
from .record import field, new, record
from .serial import W48

# 48-bit fields are split into a 16-bit high half and a 32-bit low half so one precompiled
# Struct packs the whole header (struct has no 6-byte integer code).
_HDR = struct.Struct("!HIHIHIIBB")
_TS2 = struct.Struct("!HIHI")  # be_barrier, commit_barrier: rewritten in place by switches
_TS1 = struct.Struct("!HI")

TS_BITS = W48.bits
TS_MOD = W48.space
TS_MASK = W48.mask
#: Two timestamps compare correctly while they are less than this far apart (RFC 1982 /
#: PAWS, RFC 7323 §5): 2^47 ns is about 39 hours, far beyond any in-flight lifetime.
TS_HALF = W48.half

#: The UDP ports 1Pipe processes bind (docs/wire-formats.md "Ports"): 40100 (the registry's,
#: where host beacons go) and the 99 after it, so that several processes share a host, each its
#: own endpoint at the ToR. A datagram to or from one of them is 1Pipe's.
PORT_BASE = 40100
PORTS = range(PORT_BASE, PORT_BASE + 100)


def is_onepipe_port(port: int) -> bool:
    return PORT_BASE <= port < PORT_BASE + 100


#: Byte offsets of the barrier fields inside the header, for in-place rewriting (§4: a switch
#: rewrites the barrier of every forwarded packet, never ``msg_ts``).
MSG_TS_OFFSET = 0
BE_BARRIER_OFFSET = 6
COMMIT_BARRIER_OFFSET = 12


class OnePipeOpcode(IntEnum):
    """What a 1Pipe packet is. Values are ours (the paper names no encoding).

    Message traffic (host to host, through switches):
      DATA        best-effort message fragment (§6); at most once, never retransmitted.
      PREPARE     reliable message fragment, first phase of the 2PC (§7.1); buffered by the
                  receiver until the commit barrier passes it; retransmitted on loss.
      ACK         end-to-end acknowledgement (§6 BE loss detection, §7.1 prepare ACK).
      NAK         negative acknowledgement: a lost fragment, or a message that arrived below
                  the barrier already delivered and was dropped (§6).
      RECALL      "discard that scattering" to the other receivers of a scattering that
                  included a failed process (§8 step 5).
      RECALL_ACK  a receiver has discarded the recalled message (§8 step 5, "recall ends
                  when every ACK is in").

    Barrier traffic (hop by hop, never forwarded, §5):
      BEACON      barriers only, no payload: sent on a link idle for T_beacon.
      COMMIT      a commit barrier: a reliable sender's new commit value to its neighbour
                  switch, or a commit beacon on an idle link (§7.2).

    Controller traffic (§8; payloads are defined by the controller engine):
      REGISTER        a process announces itself to the controller at init (§6.1) or
                      re-joins as a new process after recovery (§8 "Recovery").
      FAILURE_REPORT  a neighbour reports a silent link/process with its last commit ts
                      from it in ``msg_ts`` (§8 step 1).
      FAILURE_NOTICE  controller -> processes: process P failed at T_f (``msg_ts`` = T_f;
                      §8 step 3), also sent to a recovering process about itself.
      CALLBACK_DONE   a process finished discard/recall/proc_fail_callback (§8 step 6).
      RESUME          controller -> switches: remove the failed component's input links so
                      barriers move again (§8 step 7).
      RELAY           controller forwarding: the payload is a whole 1Pipe packet (PREPARE,
                      RECALL or their ACKs) to relay to a peer the sender cannot reach (§8).
      PROBE           controller -> suspected process, and its answer back (ours, issue 31): "are
                      you alive?" before a silent process is declared failed (``psn`` = probe
                      id, payload = the incarnation asked about).
    """

    DATA = 0x01
    PREPARE = 0x02
    ACK = 0x03
    NAK = 0x04
    BEACON = 0x05
    COMMIT = 0x06
    RECALL = 0x07
    RECALL_ACK = 0x08
    REGISTER = 0x10
    FAILURE_REPORT = 0x11
    FAILURE_NOTICE = 0x12
    CALLBACK_DONE = 0x13
    RESUME = 0x14
    RELAY = 0x15
    PROBE = 0x16


_OPCODES: dict[int, OnePipeOpcode] = {int(op): op for op in OnePipeOpcode}

#: Opcodes whose barrier fields are the sending hop's barriers for the link (§4: a switch
#: sets ``R_be[i]``/``R_commit[i]`` from them). A COMMIT sets ``R_commit[i]`` only (its
#: ``msg_ts`` and ``be_barrier`` are 0, §7.2); on every opcode a ``commit_barrier`` of 0 means
#: "no commit barrier" (a best-effort process, or a hop with no commit minimum yet) and sets
#: nothing (docs/onepipe-reliable.md "Wire"). PREPARE is excluded because switches do not
#: aggregate barriers for reliable data (§7.1: a retransmitted prepare carries an old
#: timestamp, which would break the barrier property). Controller traffic is excluded
#: because the controller is not a process in the barrier tree (§8).
BARRIER_OPCODES = frozenset({
    OnePipeOpcode.DATA, OnePipeOpcode.ACK, OnePipeOpcode.NAK, OnePipeOpcode.BEACON,
    OnePipeOpcode.COMMIT, OnePipeOpcode.RECALL, OnePipeOpcode.RECALL_ACK,
})

#: Opcodes that exist only between two adjacent hops and must never be forwarded (§5).
HOP_BY_HOP_OPCODES = frozenset({OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT})

#: Opcodes that carry no payload after the header (§5: "a beacon carries barrier field(s)
#: only ... no payload").
NO_PAYLOAD_OPCODES = frozenset({OnePipeOpcode.BEACON, OnePipeOpcode.COMMIT})


class OnePipeFlag(IntFlag):
    """The flags byte. Bit 0 is the paper's end-of-message flag (§6.1, §10)."""

    EOM = 0x01  # last fragment of a message (§9: PSN-based defragmentation)
    # ECN-echo for DCTCP (§9 "Congestion control follows DCTCP where ECN mark is in the UD
    # header"): over UDP/IP the mark is the IP ECN field, so the receiver echoes it in its
    # ACK. Ours; the paper does not say how the mark travels back.
    ECE = 0x02
    # first fragment of a message (ours): with EOM alone a receiver that lost a message's last
    # fragment could not tell where the next message starts (docs/wire-formats.md)
    SOM = 0x04


# ---------------------------------------------------------------------------------------------
# PAWS-style arithmetic on 48-bit nanosecond timestamps (§2, §6.1).
#
# Serial-number arithmetic (RFC 1982): a is "before" b when (b - a) mod 2^48 lies in
# (0, 2^47]. Correct whenever the two values are less than 2^47 ns (~39 h) apart, which holds
# for every pair of timestamps alive in the system at once (clocks are synchronised, §2).
# Exactly 2^47 apart is undefined by RFC 1982; here ts_diff returns -2^47 then.
# The helpers take any int and reduce it mod 2^48, so they are safe on unmasked inputs.
# ---------------------------------------------------------------------------------------------


def ts_from_ns(ns: int) -> int:
    """The wire timestamp of an absolute nanosecond count (``ns mod 2^48``)."""
    return ns & TS_MASK


# headers/serial.py's W48, whose half-way rule is the one above: ts_diff gives [-2^47, 2^47),
# ts_lt and ts_gt hold both ways for two stamps exactly 2^47 apart, ts_max / ts_min return b / a
ts_add = W48.add  # ts + delta on the 48-bit circle (delta may be negative)
ts_diff = W48.diff  # signed a - b in [-2^47, 2^47): the true difference when |a - b| < 2^47
ts_lt = W48.lt  # a is earlier than b (wrap-aware)
ts_le = W48.le  # a is earlier than or equal to b
ts_gt = W48.gt
ts_ge = W48.ge
ts_max = W48.later  # the later of two timestamps (wrap-aware), masked
ts_min = W48.earlier  # the earlier of two timestamps (wrap-aware), masked
#: ``ts_unwrap(ts, reference)``: the absolute nanosecond count congruent to ``ts`` mod 2^48
#: nearest to ``reference``, an absolute (unwrapped) time such as the local clock; exact when
#: the true value is within 2^47 ns of it. Engines use this to keep absolute integers
#: internally and wrap only at the wire.
ts_unwrap = W48.unwrap


@record
class OnePipeHeader(tuple[int, int, int, int, int, int, int, int, int]):
    """The 24-byte 1Pipe header (§6.1, §10). Any payload follows it.

    ``msg_ts`` is the scattering's timestamp, shared by every fragment of every message in
    it (§1, §12 invariant 4); a switch never rewrites it. ``be_barrier``/``commit_barrier``
    are the sending hop's barriers for the link (see :data:`BARRIER_OPCODES`); a sender
    initialises ``be_barrier`` to ``msg_ts`` on data (§4). ``psn`` numbers packets per
    connection for loss detection and reassembly (§9).

    The tuple is the wire layout (the struct's nine fields); the 48-bit timestamps and the
    opcode (an :class:`OnePipeOpcode`) are properties (headers/record.py).
    """

    __slots__ = ()

    # 48-bit fields split as on the wire (_HDR): 16-bit high half, 32-bit low half
    msg_ts_hi: int = field(0)
    msg_ts_lo: int = field(1)
    be_barrier_hi: int = field(2)
    be_barrier_lo: int = field(3)
    commit_barrier_hi: int = field(4)
    commit_barrier_lo: int = field(5)
    psn: int = field(6)
    opcode_byte: int = field(7)
    flags: int = field(8)

    SIZE: ClassVar[int] = 24
    FIELDS: ClassVar[tuple[str, ...]] = ("msg_ts", "be_barrier", "commit_barrier", "psn", "opcode", "flags")

    def __new__(cls, msg_ts: int, be_barrier: int, commit_barrier: int, psn: int, opcode: OnePipeOpcode | int,
                flags: int = 0) -> OnePipeHeader:
        check_bits("1Pipe", "msg_ts", msg_ts, 48)
        check_bits("1Pipe", "be_barrier", be_barrier, 48)
        check_bits("1Pipe", "commit_barrier", commit_barrier, 48)
        check_bits("1Pipe", "psn", psn, 32)
        check_bits("1Pipe", "opcode", opcode, 8)
        check_bits("1Pipe", "flags", flags, 8)
        if opcode not in _OPCODES:
            raise HeaderError("1Pipe", f"unknown opcode {opcode:#04x}")
        return new(cls, (msg_ts >> 32, msg_ts & 0xFFFFFFFF, be_barrier >> 32, be_barrier & 0xFFFFFFFF,
                         commit_barrier >> 32, commit_barrier & 0xFFFFFFFF, int(psn), int(opcode), int(flags)))

    @property
    def msg_ts(self) -> int:
        return self[0] << 32 | self[1]

    @property
    def be_barrier(self) -> int:
        return self[2] << 32 | self[3]

    @property
    def commit_barrier(self) -> int:
        return self[4] << 32 | self[5]

    @property
    def opcode(self) -> OnePipeOpcode:
        return _OPCODES[self[7]]

    @property
    def eom(self) -> bool:
        return bool(self[8] & OnePipeFlag.EOM)

    @property
    def is_beacon(self) -> bool:
        return self[7] == OnePipeOpcode.BEACON

    def size(self) -> int:
        return 24

    def to_bytes(self) -> bytes:
        return _HDR.pack(*self)

    def pack_into(self, buf: bytearray | memoryview, offset: int = 0) -> int:
        need("1Pipe", buf, offset, 24)
        _HDR.pack_into(buf, offset, *self)
        return 24

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, offset: int = 0) -> OnePipeHeader:
        if offset < 0 or len(data) - offset < 24:
            need("1Pipe", data, offset, 24)
        t = _HDR_UNPACK(data, offset)
        if t[7] not in _OPCODES:
            raise HeaderError("1Pipe", f"unknown opcode {t[7]:#04x}", offset + 22)
        return new(cls, t)


_HDR_UNPACK = _HDR.unpack_from


def beacon(be_barrier: int, commit_barrier: int, psn: int = 0) -> OnePipeHeader:
    """A BEACON header (§5): barriers only, sent alone with no payload.

    ``msg_ts`` carries the BE barrier too (a beacon announces "nothing below this from me"),
    so a beacon is a valid lower bound whichever field a reader looks at.
    """
    return OnePipeHeader(be_barrier, be_barrier, commit_barrier, psn, OnePipeOpcode.BEACON)


def commit(commit_barrier: int, psn: int = 0) -> OnePipeHeader:
    """A COMMIT header (§7.2): a commit barrier alone, hop by hop, no payload; ``msg_ts`` and
    ``be_barrier`` are 0 (a COMMIT sets only ``R_commit``). ``commit_barrier`` 0 would mean
    "none" (docs/onepipe-reliable.md "Wire")."""
    return OnePipeHeader(0, 0, commit_barrier, psn, OnePipeOpcode.COMMIT)


def decode_packet(
    data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None,
) -> tuple[OnePipeHeader, memoryview]:
    """Decode a whole 1Pipe packet (a UDP payload): the header and a view of its payload.

    ``end`` (default: the end of ``data``) is where the UDP payload ends. Barrier-only
    opcodes (:data:`NO_PAYLOAD_OPCODES`) must not carry a payload (§5).
    """
    if end is None:
        end = len(data)
    elif not 0 <= end <= len(data):
        raise HeaderError("1Pipe", f"end={end} outside the buffer of {len(data)} bytes", offset)
    if offset < 0 or end - offset < 24:
        raise HeaderError("1Pipe", f"truncated: need 24 bytes, have {max(0, end - offset)}", offset)
    hdr = OnePipeHeader.from_bytes(data, offset)
    if hdr.opcode in NO_PAYLOAD_OPCODES and end > offset + 24:
        raise HeaderError("1Pipe", f"{hdr.opcode.name} carries {end - offset - 24} payload bytes", offset + 24)
    return hdr, memoryview(data)[offset + 24:end]


#: the shortest sealed datagram: a header and the authentication trailer
SEALED_MIN = 24 + TRAILER_LEN


def decode_sealed(
    data: bytes | bytearray | memoryview, offset: int = 0, end: int | None = None,
) -> tuple[OnePipeHeader, memoryview, AuthTrailer]:
    """A sealed 1Pipe datagram (a deployment with keys): ``(header, payload, trailer)``, the
    trailer being the last 17 bytes before ``end`` and the packet everything before it
    (:func:`decode_packet`'s rules, so a sealed BEACON is exactly 41 bytes). Only the layout is
    checked: whether the trailer's MAC is right is ``netstack.onepipe.auth``'s job."""
    if end is None:
        end = len(data)
    elif not 0 <= end <= len(data):
        raise HeaderError("1Pipe", f"end={end} outside the buffer of {len(data)} bytes", offset)
    if offset < 0 or end - offset < SEALED_MIN:
        raise HeaderError("1Pipe", f"truncated: a sealed packet needs {SEALED_MIN} bytes, "
                                   f"have {max(0, end - offset)}", offset)
    hdr, payload = decode_packet(data, offset, end - TRAILER_LEN)
    return hdr, payload, decode_trailer(data, end)


def read_barriers(data: bytes | bytearray | memoryview, offset: int = 0) -> tuple[int, int]:
    """``(be_barrier, commit_barrier)`` of the header at ``offset`` without decoding it."""
    need("1Pipe", data, offset, 24)
    bh, bl, ch, cl = _TS2.unpack_from(data, offset + BE_BARRIER_OFFSET)
    return bh << 32 | bl, ch << 32 | cl


def write_barriers(buf: bytearray | memoryview, offset: int, be_barrier: int, commit_barrier: int) -> None:
    """Overwrite both barrier fields in place: what a switch does to a forwarded packet (§4).

    ``msg_ts``, ``psn``, opcode, flags and the payload are left untouched, so a switch never
    re-encodes the packet.
    """
    check_bits("1Pipe", "be_barrier", be_barrier, 48)
    check_bits("1Pipe", "commit_barrier", commit_barrier, 48)
    need("1Pipe", buf, offset, 24)
    _TS2.pack_into(buf, offset + BE_BARRIER_OFFSET, be_barrier >> 32, be_barrier & 0xFFFFFFFF,
                   commit_barrier >> 32, commit_barrier & 0xFFFFFFFF)


def write_be_barrier(buf: bytearray | memoryview, offset: int, be_barrier: int) -> None:
    """Overwrite only the best-effort barrier in place (§4 data-packet processing)."""
    check_bits("1Pipe", "be_barrier", be_barrier, 48)
    need("1Pipe", buf, offset, 24)
    _TS1.pack_into(buf, offset + BE_BARRIER_OFFSET, be_barrier >> 32, be_barrier & 0xFFFFFFFF)


HEADERS = (OnePipeHeader,)
