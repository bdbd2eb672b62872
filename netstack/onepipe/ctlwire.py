"""Payloads of reliable 1Pipe's recall and controller messages (1Pipe §8; docs/onepipe-reliable.md
"Wire"): fixed ``struct`` layouts after the 24-byte 1Pipe header.

Every decoder takes arbitrary bytes and raises only :class:`headers.errors.HeaderError`.
A process address on the wire is 6 bytes, IPv4 then UDP port; in memory it is ``(ip, port)``
with ``ip`` a dotted string, the form the shells and ``sender_key`` use.
"""

from __future__ import annotations

import struct
from ipaddress import IPv4Address
from typing import NamedTuple

from headers.errors import HeaderError
from headers.onepipe import OnePipeHeader, OnePipeOpcode, decode_packet

from ..errors import ConfigError

#: flags bit 3 of REGISTER (ours): "I was declared failed; send me what I missed" (§8 recovery)
RECOVER = 0x08
#: flags bit 4 of FAILURE_NOTICE (ours): part of a recovery batch, no CALLBACK_DONE wanted
REPLAY = 0x10

ADDR = struct.Struct("!4sH")
RECALL_BODY = struct.Struct("!IQ")  # PSN count, scattering seq
REGISTER_REQ = struct.Struct("!Q")  # failure revision seen
REGISTER_REPLY = struct.Struct("!4sHIQII")  # addr, incarnation, failure revision, notices and recalls in the batch
NOTICE_BODY = struct.Struct("!4sHI")  # addr of the failed process, its incarnation

Addr = tuple[str, int]


def pack_addr(addr: object) -> bytes:
    """``(ip, port)`` as 6 bytes. ValueError for anything else."""
    if not (isinstance(addr, tuple) and len(addr) == 2 and isinstance(addr[1], int) and 0 <= addr[1] <= 0xFFFF):
        raise ValueError(f"not a process address: {addr!r}")
    try:
        ip = IPv4Address(addr[0]).packed
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a process address: {addr!r}") from e
    return ADDR.pack(ip, addr[1])


def _addr(raw: bytes, port: int) -> Addr:
    return (str(IPv4Address(raw)), port)


def unpack_addr(data: bytes | bytearray | memoryview, offset: int = 0) -> Addr:
    if len(data) - offset < ADDR.size or offset < 0:
        raise HeaderError("1Pipe", f"truncated address: need {ADDR.size} bytes", offset)
    raw, port = ADDR.unpack_from(data, offset)
    return _addr(raw, port)


def _exact(what: str, payload: memoryview | bytes, size: int) -> None:
    if len(payload) != size:
        raise HeaderError("1Pipe", f"{what} payload is {len(payload)} bytes, expected {size}")


def _hdr(op: OnePipeOpcode, *, ts: int = 0, psn: int = 0, flags: int = 0, be: int = 0, commit: int = 0) -> bytes:
    return OnePipeHeader(ts, be, commit, psn, op, flags).to_bytes()


# ------------------------------------------------------------------ recall (process to process)
class Recall(NamedTuple):
    ts: int  # wire (48-bit) timestamp of the scattering
    psn: int  # first PSN of the recalled message (wire, 32-bit)
    npkts: int  # its PSNs
    seq: int  # the sender's scattering number


def recall(op: OnePipeOpcode, r: Recall, be: int = 0, commit: int = 0) -> bytes:
    """A RECALL or RECALL_ACK datagram."""
    if op not in (OnePipeOpcode.RECALL, OnePipeOpcode.RECALL_ACK):
        raise ValueError(f"not a recall opcode: {op!r}")
    return _hdr(op, ts=r.ts, psn=r.psn, be=be, commit=commit) + RECALL_BODY.pack(r.npkts, r.seq)


def parse_recall(hdr: OnePipeHeader, payload: memoryview | bytes) -> Recall:
    _exact(hdr.opcode.name if isinstance(hdr.opcode, OnePipeOpcode) else "RECALL", payload, RECALL_BODY.size)
    count, seq = RECALL_BODY.unpack(payload)
    if count == 0:
        raise HeaderError("1Pipe", "a recall of zero packets")
    return Recall(hdr.msg_ts, hdr.psn, count, seq)


# ------------------------------------------------------------------ registration
class RegisterReply(NamedTuple):
    addr: Addr
    incarnation: int
    revision: int
    nonce: int
    notices: int  # recovery: how many REPLAY notices the batch before this reply held
    recalls: int  # ... and how many undeliverable recalls (RELAY of RECALL)


def register_request(nonce: int, revision: int, recover: bool = False) -> bytes:
    return _hdr(OnePipeOpcode.REGISTER, psn=nonce, flags=RECOVER if recover else 0) + REGISTER_REQ.pack(revision)


def parse_register_request(hdr: OnePipeHeader, payload: memoryview | bytes) -> tuple[int, int, bool]:
    """``(nonce, revision seen, recover)``."""
    _exact("REGISTER request", payload, REGISTER_REQ.size)
    return hdr.psn, REGISTER_REQ.unpack(payload)[0], bool(hdr.flags & RECOVER)


def register_reply(addr: Addr, incarnation: int, revision: int, nonce: int = 0, notices: int = 0,
                   recalls: int = 0) -> bytes:
    ip, port = ADDR.unpack(pack_addr(addr))
    return _hdr(OnePipeOpcode.REGISTER, psn=nonce) + REGISTER_REPLY.pack(ip, port, incarnation, revision, notices,
                                                                        recalls)


def parse_register_reply(hdr: OnePipeHeader, payload: memoryview | bytes) -> RegisterReply:
    _exact("REGISTER reply", payload, REGISTER_REPLY.size)
    ip, port, inc, rev, notices, recalls = REGISTER_REPLY.unpack(payload)
    return RegisterReply(_addr(ip, port), inc, rev, hdr.psn, notices, recalls)


# ------------------------------------------------------------------ failures
class Notice(NamedTuple):
    addr: Addr
    incarnation: int
    t_f: int  # wire (48-bit)
    fid: int  # failure id (the store's revision, 32-bit on the wire)
    replay: bool


def failure_notice(n: Notice) -> bytes:
    ip, port = ADDR.unpack(pack_addr(n.addr))
    return (_hdr(OnePipeOpcode.FAILURE_NOTICE, ts=n.t_f, psn=n.fid, flags=REPLAY if n.replay else 0)
            + NOTICE_BODY.pack(ip, port, n.incarnation))


def parse_failure_notice(hdr: OnePipeHeader, payload: memoryview | bytes) -> Notice:
    _exact("FAILURE_NOTICE", payload, NOTICE_BODY.size)
    ip, port, inc = NOTICE_BODY.unpack(payload)
    return Notice(_addr(ip, port), inc, hdr.msg_ts, hdr.psn, bool(hdr.flags & REPLAY))


def callback_done(fid: int) -> bytes:
    return _hdr(OnePipeOpcode.CALLBACK_DONE, psn=fid)


PROBE_BODY = struct.Struct("!I")  # the incarnation asked about (or answering)


def probe(probe_id: int, incarnation: int) -> bytes:
    """A PROBE (ours, issue 31): the controller asks a suspected process whether it is alive; the
    process answers with the same datagram (its probe id and incarnation) to the controller."""
    return _hdr(OnePipeOpcode.PROBE, psn=probe_id & 0xFFFFFFFF) + PROBE_BODY.pack(incarnation & 0xFFFFFFFF)


def parse_probe(hdr: OnePipeHeader, payload: memoryview | bytes) -> tuple[int, int]:
    """``(probe id, incarnation)``."""
    _exact("PROBE", payload, PROBE_BODY.size)
    return hdr.psn, PROBE_BODY.unpack(payload)[0]


def failure_report(addr: Addr, last_commit: int) -> bytes:
    return _hdr(OnePipeOpcode.FAILURE_REPORT, ts=last_commit) + pack_addr(addr)


def parse_failure_report(hdr: OnePipeHeader, payload: memoryview | bytes) -> tuple[Addr, int]:
    _exact("FAILURE_REPORT", payload, ADDR.size)
    return unpack_addr(payload), hdr.msg_ts


# ------------------------------------------------------------------ relay
def relay(addr: object, inner: bytes) -> bytes:
    """A RELAY: ``addr`` is the final destination (process to controller) or the original sender
    (controller to process); ``inner`` a whole 1Pipe packet."""
    return _hdr(OnePipeOpcode.RELAY) + pack_addr(addr) + inner


def parse_relay(payload: memoryview | bytes) -> tuple[Addr, OnePipeHeader, memoryview]:
    """``(addr, inner header, inner payload)``. A RELAY inside a RELAY is refused."""
    addr = unpack_addr(payload)
    inner, body = decode_packet(payload, ADDR.size)
    if inner.opcode not in RELAYABLE:
        raise HeaderError("1Pipe", f"RELAY of {inner.opcode!r}: only PREPARE, ACK, NAK, RECALL, RECALL_ACK")
    return addr, inner, body


#: what a RELAY may carry (§8 "controller forwarding": a prepare or a recall, and their answers)
RELAYABLE = frozenset({OnePipeOpcode.PREPARE, OnePipeOpcode.ACK, OnePipeOpcode.NAK, OnePipeOpcode.RECALL,
                       OnePipeOpcode.RECALL_ACK})


def proc_id(addr: Addr, incarnation: int) -> str:
    """The store's id of a process incarnation: ``10.0.0.1-40101-3``."""
    return f"{addr[0]}-{addr[1]}-{incarnation}"


def parse_proc(text: str) -> Addr:
    """``"ip:port"`` (the CLI's form) as an address. ConfigError when it is not one."""
    ip, sep, port = str(text).rpartition(":")
    try:
        if not sep:
            raise ValueError
        addr = (ip, int(port))
        pack_addr(addr)
    except ValueError:
        raise ConfigError("onepipe.process", f"expected IP:PORT, got {text!r}") from None
    return addr


__all__ = ["ADDR", "PROBE_BODY", "RECALL_BODY", "RECOVER", "RELAYABLE", "REPLAY", "Addr", "Notice", "Recall",
           "RegisterReply", "callback_done", "failure_notice", "failure_report", "pack_addr", "parse_failure_notice",
           "parse_failure_report", "parse_probe", "parse_proc", "parse_recall", "parse_register_reply",
           "parse_register_request", "parse_relay", "probe", "proc_id", "recall", "register_reply", "register_request",
           "unpack_addr"]
