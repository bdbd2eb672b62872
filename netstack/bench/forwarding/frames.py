"""The generator side of ``netstack bench forwarding``: the test frames, and ``sendmmsg`` of the
same batch over and over with everything built once."""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress

from ...io.packet import _IOVec, _MMsgHdr
from .params import GEN_IP, MAX_SIZE, MIN_SIZE, MSG_DONTWAIT, TARGET_IP, UDP_PORT


def _mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def make_frame(size: int, src_mac: str, dst_mac: str, ident: int = 0) -> bytes:
    """An Ethernet/IPv4/UDP frame of exactly ``size`` bytes (as handed to send(), no FCS)."""
    from headers.inet import build_udp_frame

    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"frame size {size} out of range [{MIN_SIZE}, {MAX_SIZE}]")
    payload = bytes((i * 7 + ident) & 0xFF for i in range(size - MIN_SIZE))
    return build_udp_frame(_mac_bytes(src_mac), _mac_bytes(dst_mac), ipaddress.IPv4Address(GEN_IP).packed,
                           ipaddress.IPv4Address(TARGET_IP).packed, 40_000 + ident, UDP_PORT, payload,
                           ident=ident)


class PrebuiltBatch:
    """``sendmmsg`` of the same frames over and over, with the mmsghdr array built once.

    ``PacketPort.send_batch`` joins the frames into one buffer and sets the iovecs on every call
    (right for a switch, whose frames change every call); a generator that sends the same frames
    again and again skips even that, so one core offers ~0.8 M frames/s, enough to overload the
    forwarders under test. Stops early on EAGAIN/ENOBUFS (returns what
    the kernel took; the caller counts the rest as not sent).
    """

    def __init__(self, fd: int, frames: list[bytes]) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._sendmmsg = libc.sendmmsg
        self._sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
        self._sendmmsg.restype = ctypes.c_int
        self.fd = fd
        self.count = len(frames)
        self._bufs = [ctypes.create_string_buffer(f, len(f)) for f in frames]
        self._iovs = (_IOVec * self.count)()
        self._msgs = (_MMsgHdr * self.count)()
        for i, (buf, frame) in enumerate(zip(self._bufs, frames, strict=True)):
            self._iovs[i].iov_base = ctypes.addressof(buf)
            self._iovs[i].iov_len = len(frame)
            self._msgs[i].msg_hdr.msg_iov = ctypes.pointer(self._iovs[i])
            self._msgs[i].msg_hdr.msg_iovlen = 1
        self._addr = ctypes.addressof(self._msgs)

    def send(self) -> int:
        rc = self._sendmmsg(self.fd, self._addr, self.count, MSG_DONTWAIT)
        return rc if rc > 0 else 0
