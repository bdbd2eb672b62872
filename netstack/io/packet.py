"""AF_PACKET ports read with ``add_reader`` and written in batches (docs/architecture.md "The live runtime").

Measured on this machine (docs/architecture.md "The live runtime"): ``loop.add_reader`` plus a non-blocking drain beats
``sock_recv`` by ~10x under uvloop, ``create_datagram_endpoint`` rejects AF_PACKET, and a
ctypes ``sendmmsg`` beats a ``send()`` loop (0.7 vs 0.5 M frames/s).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import mmap
import os
import socket
import struct
import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import add

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23  # else we read back our own transmissions
_STATS = struct.Struct("II")  # struct tpacket_stats {tp_packets, tp_drops}

#: Largest frame we read: MTU 9000 jumbo + Ethernet header + software FCS, with margin.
MAX_FRAME = 9216


#: How a port reads: ``ring`` (TPACKET_V2 RX ring, no system call per frame), ``mmsg``
#: (one recvmmsg per drain) or ``recv`` (one recv_into per frame). ``auto`` = the first that works.
RX_MODES = ("auto", "ring", "mmsg", "recv")


class PacketPort:
    """One switch port: a non-blocking AF_PACKET socket bound to an interface."""

    def __init__(self, ifname: str, *, rcvbuf: int = 4 << 20, sndbuf: int = 4 << 20, rx_mode: str = "auto") -> None:
        if rx_mode not in RX_MODES:
            raise ValueError(f"rx_mode must be one of {', '.join(RX_MODES)}, got {rx_mode!r}")
        self.ifname = ifname
        # Protocol 0 first, then bind with ETH_P_ALL: no frame of another interface can slip
        # in between socket() and bind().
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        self._ring: RxRing | None = None
        try:
            self.sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
            if rx_mode in ("auto", "ring"):
                try:
                    self._ring = RxRing(self.sock, interface_mtu(self.sock, ifname))
                except OSError:
                    if rx_mode == "ring":
                        raise
            self.sock.bind((ifname, ETH_P_ALL))
            self.sock.setblocking(False)
        except OSError:
            if self._ring is not None:
                self._ring.close()
            self.sock.close()
            raise
        self.fd = self.sock.fileno()
        #: pending socket errors seen (ENETDOWN: the interface went down; take_error)
        self.link_errors = 0
        self._buf = bytearray(MAX_FRAME)
        self._view = memoryview(self._buf)
        self._sender = BatchSender(self.fd)
        self._receiver = BatchReceiver(self.fd) if self._ring is None and rx_mode != "recv" else None
        self.rx_mode = "ring" if self._ring is not None else "mmsg" if self._receiver is not None else "recv"
        self.kernel_packets = 0
        self.kernel_drops = 0
        self.send_errors = 0

    @property
    def tx_dropped(self) -> int:
        """Frames the stack took and dropped on the way out (an nft egress drop): not resent."""
        return self._sender.dropped

    @property
    def rx_truncated(self) -> int:
        """Frames longer than a ring slot (the interface MTU grew after the port opened): dropped."""
        return self._ring.truncated if self._ring is not None else 0

    def recv_batch(self, limit: int) -> list[bytes]:
        """Drain up to ``limit`` frames without blocking (bounded so one busy port cannot
        starve the others or the timers)."""
        if self._ring is not None:
            return self._ring.recv(limit)
        if self._receiver is not None:
            return self._receiver.recv(limit)
        out: list[bytes] = []
        recv_into = self.sock.recv_into
        view = self._view
        for _ in range(limit):
            try:
                n = recv_into(view)
            except (BlockingIOError, InterruptedError):
                break
            out.append(bytes(view[:n]))
        return out

    def send_batch(self, frames: Sequence[bytes]) -> int:
        """Send frames in order; returns how many the kernel took. A full socket buffer or
        an oversize frame is counted, never raised: a daemon never dies on a packet."""
        if not frames:
            return 0
        sent = self._sender.send(frames)
        if sent < len(frames):
            # fall back to one by one for the rest, counting what the kernel refuses
            for frame in frames[sent:]:
                try:
                    self.sock.send(frame)
                    sent += 1
                except OSError as exc:
                    if exc.errno == errno.ENOBUFS:
                        self._sender.dropped += 1  # taken and dropped on the way out
                    else:
                        self.send_errors += 1
        return sent

    def take_error(self) -> int:
        """The socket's pending error (and clear it): ENETDOWN once when the interface went down.
        A pending error keeps the fd readable (POLLERR) with nothing to read, and an event loop
        may then stop watching it; clearing it is what lets the port work again once the link
        is back up."""
        err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.link_errors += 1
        return int(err)

    def read_kernel_stats(self) -> tuple[int, int]:
        """Accumulate PACKET_STATISTICS (reading resets the kernel's counters) so that CPU
        overload (socket drops) is never mistaken for link loss."""
        raw = self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, _STATS.size)
        packets, drops = _STATS.unpack(raw)
        self.kernel_packets += packets
        self.kernel_drops += drops
        return self.kernel_packets, self.kernel_drops

    def close(self) -> None:
        if self._ring is not None:
            self._ring.close()
        self.sock.close()


# --- the TPACKET_V2 receive ring (packet(7), Documentation/networking/packet_mmap.rst) -----

PACKET_RX_RING = 5
PACKET_VERSION = 10
TPACKET_V2 = 1
TP_STATUS_KERNEL = 0
TP_STATUS_USER = 1
#: tp_status flags: the kernel took an 802.1Q/802.1ad tag off the frame and put it in the slot
#: header (tp_vlan_tci, tp_vlan_tpid) before any packet socket saw it (skb_vlan_untag)
TP_STATUS_VLAN_VALID = 1 << 4
TP_STATUS_VLAN_TPID_VALID = 1 << 6
_TAG = struct.Struct("!HH")
#: Fewest ready slots read as one run (below it, slot by slot is as cheap)
_RUN_MIN = 4
SIOCGIFMTU = 0x8921
_PAGE = mmap.PAGESIZE
#: Slots in a port's ring: frames the kernel can hold for the daemon between two drains
#: (fewer for jumbo MTUs, so that a port's ring stays within RING_BYTES).
RING_FRAMES = 2048
RING_BYTES = 8 << 20
#: Room in a slot for the tpacket2_hdr, the sockaddr_ll and the kernel's alignment padding
#: before the frame (tp_mac is 66 on this kernel; the rest is margin).
_RING_HEADROOM = 128
#: Room after the interface MTU: Ethernet header, two 802.1Q tags, the software FCS trailer.
_L2_EXTRA = 14 + 8 + 4


def interface_mtu(sock: socket.socket, ifname: str) -> int:
    """The MTU of ``ifname`` in the socket's namespace (SIOCGIFMTU)."""
    req = struct.pack("16si12x", ifname.encode()[:15], 0)
    return struct.unpack_from("16si", fcntl.ioctl(sock.fileno(), SIOCGIFMTU, req))[1]


class RxRing:
    """A TPACKET_V2 RX ring: the kernel copies each frame into a shared slot as it arrives
    (in the sender's softirq) and flips the slot's status; reading is a status check and a
    copy out of the mapping, with no system call per frame (measured on this machine: 1.2-2 M
    frames/s for a ring walked from Python against ~0.3 M for ``recv_into``).

    TPACKET_V2 and not V3: V3 hands over whole blocks, which wait for a block timeout of at
    least 1 ms when traffic is light — a latency every emulated hop would add. V2's slots
    are ready one by one, and ``poll`` reports the socket readable while a slot is ready.
    Slots are sized from the interface MTU; a longer frame (the MTU was raised later) is
    counted in :attr:`truncated` and dropped.
    """

    def __init__(self, sock: socket.socket, mtu: int, frames: int = RING_FRAMES) -> None:
        need = _RING_HEADROOM + mtu + _L2_EXTRA
        slot = 1 << (need - 1).bit_length()  # a power of two: slots never straddle blocks
        block = max(slot, _PAGE)
        self.slot = slot
        self.frames = max(min(frames, RING_BYTES // slot), block // slot)
        self.frames -= self.frames % (block // slot)
        sock.setsockopt(SOL_PACKET, PACKET_VERSION, TPACKET_V2)
        sock.setsockopt(SOL_PACKET, PACKET_RX_RING,
                        struct.pack("IIII", block, self.frames * slot // block, slot, self.frames))
        self._mm = mmap.mmap(sock.fileno(), self.frames * slot, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._words = memoryview(self._mm).cast("I")  # tpacket2_hdr: status, len, snaplen, ...
        self._halves = memoryview(self._mm).cast("H")  # ... tp_mac at byte 12
        self._head = 0
        self.truncated = 0
        #: zero status words, written over a run of slots to hand them back in one step
        self._zeros = memoryview(array("I", bytes(4 * self.frames)))

    def recv(self, limit: int) -> list[bytes]:
        """The frames waiting now (at most ``limit``), oldest first; [] when none."""
        out: list[bytes] = []
        while len(out) < limit and self._take_run(limit - len(out), out):
            pass
        return out

    def _take_run(self, limit: int, out: list[bytes]) -> bool:
        """Append the frames of the ready slots from the head on (at most ``limit``, and not past
        the end of the mapping) and hand the slots back; True when every slot looked at was
        ready, so that more may wait after the wrap-around.

        Whole-list steps instead of a walk slot by slot: the ready slots are the ones before
        the first the kernel still owns (it fills them in order), found by looking at the last
        slot of the window and, if it is not ready, by bisection, then one strided read of
        their status words (checked again: two CPUs may finish slots out of order), three
        more of their lengths and frame offsets, the copies made by ``map`` over the mapping,
        and one strided write to hand the slots back: per frame one copy and no interpreted
        step (walking the slots one by one cost a switch daemon at saturation 15 % of its CPU,
        measured with py-spy).
        A run holding a VLAN tag to put back or a truncated frame, or too short to be worth
        it, goes slot by slot (:meth:`_take_each`)."""
        i = self._head
        room = n = min(limit, self.frames - i)
        stride = self.slot >> 2  # 32-bit words per slot
        w0 = i * stride
        words = self._words
        if not words[w0 + (n - 1) * stride]:
            # fewer than n are ready: find where they end without touching the slots past it
            # (each status word is on a slot of its own: a cache and TLB miss apiece)
            lo, hi = 0, n - 1
            while lo < hi:
                mid = (lo + hi) >> 1
                if words[w0 + mid * stride]:
                    lo = mid + 1
                else:
                    hi = mid
            n = lo
            if not n:
                return False
        status = words[w0:w0 + n * stride:stride].tolist()
        try:
            k = status.index(TP_STATUS_KERNEL)  # (slots filled out of order by two CPUs)
        except ValueError:
            k = n
        if k < _RUN_MIN:
            return self._take_each(k, out) == room if k else False
        if k < n:
            del status[k:]
        end = w0 + k * stride
        snaps = words[w0 + 2:end:stride].tolist()
        if (any(not s & TP_STATUS_USER or s & TP_STATUS_VLAN_VALID for s in set(status))
                or words[w0 + 1:end:stride].tolist() != snaps):
            return self._take_each(k, out) == room
        base = i * self.slot
        h = (base >> 1) + 6  # tp_mac, the frame's offset in its slot
        macs = self._halves[h:h + k * (self.slot >> 1):self.slot >> 1].tolist()
        starts = list(map(add, range(base, base + k * self.slot, self.slot), macs))
        out.extend(map(self._mm.__getitem__, map(slice, starts, map(add, starts, snaps))))
        words[w0:end:stride] = self._zeros[:k]  # hand the slots back
        i += k
        self._head = 0 if i == self.frames else i
        return k == room

    def _take_each(self, count: int, out: list[bytes]) -> int:
        """Slot by slot, up to ``count`` frames: the general reader (VLAN tags put back,
        truncated frames counted). Returns the slots taken."""
        words = self._words
        halves = self._halves
        mm = self._mm
        slot = self.slot
        i = self._head
        frames = self.frames
        taken = 0
        for _ in range(count):
            off = i * slot
            w = off >> 2
            if not words[w] & TP_STATUS_USER:
                break  # the kernel has not filled this slot yet: nothing more is waiting
            snaplen = words[w + 2]
            if snaplen == words[w + 1]:
                start = off + halves[(off >> 1) + 6]
                status = words[w]
                if status & TP_STATUS_VLAN_VALID:
                    # put the tag back where it was: a switch forwards frames as they came, and
                    # the software FCS on a switch link covers the tag
                    h = off >> 1
                    tpid = halves[h + 13] if status & TP_STATUS_VLAN_TPID_VALID else 0x8100
                    out.append(mm[start:start + 12] + _TAG.pack(tpid, halves[h + 12]) + mm[start + 12:start + snaplen])
                else:
                    out.append(mm[start:start + snaplen])
            else:
                self.truncated += 1
            words[w] = TP_STATUS_KERNEL  # hand the slot back
            taken += 1
            i += 1
            if i == frames:
                i = 0
        self._head = i
        return taken

    def close(self) -> None:
        self._words.release()
        self._halves.release()
        self._zeros.release()
        self._mm.close()


# --- sendmmsg(2) through ctypes: Python's socket module has no batch send -------------

class _IOVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


class _MsgHdr(ctypes.Structure):
    _fields_ = [
        ("msg_name", ctypes.c_void_p), ("msg_namelen", ctypes.c_uint32),
        ("msg_iov", ctypes.POINTER(_IOVec)), ("msg_iovlen", ctypes.c_size_t),
        ("msg_control", ctypes.c_void_p), ("msg_controllen", ctypes.c_size_t),
        ("msg_flags", ctypes.c_int),
    ]


class _MMsgHdr(ctypes.Structure):
    _fields_ = [("msg_hdr", _MsgHdr), ("msg_len", ctypes.c_uint)]


_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
#: ioctl: bytes in a socket's send queue (linux/sockios.h SIOCOUTQ = TIOCOUTQ)
_SIOCOUTQ = 0x5411
_sendmmsg = getattr(_libc, "sendmmsg", None)
if _sendmmsg is not None:
    _sendmmsg.argtypes = [ctypes.c_int, ctypes.POINTER(_MMsgHdr), ctypes.c_uint, ctypes.c_int]
    _sendmmsg.restype = ctypes.c_int

_recvmmsg = getattr(_libc, "recvmmsg", None)
if _recvmmsg is not None:
    _recvmmsg.argtypes = [ctypes.c_int, ctypes.POINTER(_MMsgHdr), ctypes.c_uint, ctypes.c_int, ctypes.c_void_p]
    _recvmmsg.restype = ctypes.c_int

MSG_DONTWAIT = 0x40
#: array/memoryview code of a pointer-sized unsigned word (an iovec is two of them)
_WORD = "Q" if ctypes.sizeof(ctypes.c_void_p) == 8 else "I"
_MAX_BATCH = 256  # UIO_MAXIOV-friendly and bounded per call
#: msg_len's index when an mmsghdr array is read as unsigned ints (x86-64/aarch64 LP64 layout)
_MSG_LEN_WORD = _MMsgHdr.msg_len.offset // 4
_MMSG_WORDS = ctypes.sizeof(_MMsgHdr) // 4


class BatchReceiver:
    """``recvmmsg(2)`` for one socket: up to ``max_batch`` frames per system call.

    Each message slot owns a fixed ``slot``-byte region of one buffer, set up once; a call
    only reads the lengths back (one strided memoryview read) and copies each frame out.
    Per-frame system calls dominate a Python forwarder's cost on this VM (docs/architecture.md
    "The live runtime", reference rates); one call per drain removes all but one of them.
    """

    def __init__(self, fd: int, max_batch: int = _MAX_BATCH, slot: int = MAX_FRAME) -> None:
        if _recvmmsg is None:  # pragma: no cover - every glibc since 2.12 has it
            raise OSError(errno.ENOSYS, "recvmmsg is not available")
        self.fd = fd
        self.max_batch = max_batch
        self.slot = slot
        self._buf = bytearray(max_batch * slot)
        self._view = memoryview(self._buf)
        self._cbuf = (ctypes.c_char * len(self._buf)).from_buffer(self._buf)
        base = ctypes.addressof(self._cbuf)
        self._iovs = (_IOVec * max_batch)()
        self._msgs = (_MMsgHdr * max_batch)()
        for i in range(max_batch):
            self._iovs[i].iov_base = base + i * slot
            self._iovs[i].iov_len = slot
            self._msgs[i].msg_hdr.msg_iov = ctypes.pointer(self._iovs[i])
            self._msgs[i].msg_hdr.msg_iovlen = 1
        self._words = memoryview(self._msgs).cast("B").cast("I")

    def recv(self, limit: int) -> list[bytes]:
        """The frames waiting now (at most ``limit``), without blocking; [] when none."""
        count = _recvmmsg(self.fd, self._msgs, min(limit, self.max_batch), MSG_DONTWAIT, None)
        if count <= 0:
            if count < 0 and ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
            return []
        lens = self._words[_MSG_LEN_WORD:_MSG_LEN_WORD + count * _MMSG_WORDS:_MMSG_WORDS].tolist()
        view = self._view
        slot = self.slot
        return [bytes(view[off:off + n]) for off, n in zip(range(0, count * slot, slot), lens, strict=True)]


class BatchSender:
    """``sendmmsg(2)`` for one socket with the message and iovec arrays built once.

    Per call only the iovec bases/lengths are set (to the frames themselves, or into one
    buffer they are joined into: :meth:`_point_at`), which measured ~0.2 us per frame
    against ~2.9 us for arrays built per call.
    """

    def __init__(self, fd: int, max_batch: int = _MAX_BATCH) -> None:
        self.fd = fd
        self.max_batch = max_batch
        self._iovs = (_IOVec * max_batch)()
        self._msgs = (_MMsgHdr * max_batch)()
        for i in range(max_batch):
            self._msgs[i].msg_hdr.msg_iov = ctypes.pointer(self._iovs[i])
            self._msgs[i].msg_hdr.msg_iovlen = 1
        self._msgs_addr = ctypes.addressof(self._msgs)
        self._iov_words = memoryview(self._iovs).cast("B").cast(_WORD)  # iov_base, iov_len, ...
        self._size = ctypes.sizeof(_MMsgHdr)
        #: frames the stack took and then dropped on the way out (see :meth:`send`)
        self.dropped = 0
        try:
            with socket.socket(fileno=os.dup(fd)) as s:
                self._sndbuf: int | None = s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        except OSError:
            self._sndbuf = None  # not a socket: a short count is always "not taken"

    def _taken(self) -> bool:
        """After a short sendmmsg count: did the socket have room, i.e. was the frame taken?"""
        if self._sndbuf is None:
            return False
        buf = array("i", [0])
        try:
            fcntl.ioctl(self.fd, _SIOCOUTQ, buf)
        except OSError:
            return False
        return buf[0] < self._sndbuf // 2

    def send(self, frames: Sequence[bytes]) -> int:
        """Send in order; returns how many frames the kernel consumed: sent, or taken and then
        dropped by the stack on the way out (``dropped``: an nft egress drop, a full qdisc).
        Stops at the first frame it refused (full socket buffer, interface down, oversize).

        A dropped frame is gone, as on a wire: sending it again would turn a configured loss
        p into p^2. sendmmsg(2) reports it as ENOBUFS when it is the first message of a call,
        but hides the error of a later one behind a short count (EAGAIN, "not taken", looks
        the same); then the socket's send queue decides: with room in it, the frame was
        taken, so it was dropped."""
        if _sendmmsg is None:  # pragma: no cover - every glibc since 2.14 has it
            return _write_each(self.fd, frames)
        total = 0
        for start in range(0, len(frames), self.max_batch):
            chunk = frames[start:start + self.max_batch]
            count = len(chunk)
            keep = self._point_at(chunk)  # what the iovecs point into: alive until sent
            done = 0
            while done < count:
                ptr = ctypes.cast(self._msgs_addr + done * self._size, ctypes.POINTER(_MMsgHdr))
                rc = _sendmmsg(self.fd, ptr, count - done, MSG_DONTWAIT)
                if rc < 0:
                    err = ctypes.get_errno()
                    if err == errno.EINTR:
                        continue
                    if err == errno.ENOBUFS:
                        self.dropped += 1  # taken, then dropped on the way out
                        done += 1
                        continue
                    del keep
                    return total + done
                done += rc
                if done < count and self._taken():
                    self.dropped += 1  # the hidden error was a drop (see above): skip the frame
                    done += 1
            del keep  # (a joined buffer's export is released before the buffer goes)
            total += done
        return total

    def _point_at(self, chunk: Sequence[bytes]) -> object:
        """Set the first ``len(chunk)`` iovecs to the frames; return what keeps their memory.

        Small batches are joined into one buffer, with every iovec's (base, length) set in two
        strided writes, no per-frame ctypes access. A large batch of ``bytes`` frames is
        pointed at where the frames are (CPython keeps a bytes object's data inline at a fixed
        offset from its address, checked once at import: :data:`_BYTES_DATA`): at 1500 B,
        joining them was a copy of every frame into a fresh 384 KB buffer, which glibc maps
        and unmaps on every call; at 64 B the join is the cheaper of the two (measured with
        py-spy on a switch daemon at saturation)."""
        count = len(chunk)
        words = self._iov_words
        try:
            lens = array(_WORD, map(bytes.__len__, chunk))  # (raises TypeError unless all are bytes)
        except TypeError:
            lens = array(_WORD, map(len, chunk))
            only_bytes = False
        else:
            only_bytes = True
        words[1:2 * count:2] = lens
        if only_bytes and _BYTES_DATA and sum(lens) > _JOIN_MAX:
            words[0:2 * count:2] = array(_WORD, map(add, map(id, chunk), repeat(_BYTES_DATA)))
            return chunk
        buf = bytearray().join(chunk)
        cbuf = (ctypes.c_char * max(1, len(buf))).from_buffer(buf)
        words[0:2 * count:2] = array(_WORD, accumulate(lens[:-1], initial=ctypes.addressof(cbuf)))
        return cbuf


def _bytes_data_offset() -> int:
    """Where a ``bytes`` object's data starts, relative to ``id()`` (its address in CPython);
    0 when that cannot be relied on (another interpreter), and frames are then joined."""
    if sys.implementation.name != "cpython":
        return 0
    offset = bytes.__basicsize__ - 1  # the header, then the data and its NUL terminator
    probe = bytes(range(256)) * 2
    return offset if ctypes.string_at(id(probe) + offset, len(probe)) == probe else 0


#: offset of a bytes object's data from its id() (0: unknown, join frames before sending)
_BYTES_DATA = _bytes_data_offset()
#: largest batch joined into one buffer before sending (glibc serves larger ones with mmap)
_JOIN_MAX = 64 << 10


def _write_each(fd: int, frames: Sequence[bytes]) -> int:
    n = 0
    for frame in frames:
        try:
            os.write(fd, frame)
        except OSError:
            break
        n += 1
    return n


def sendmmsg(fd: int, frames: Sequence[bytes]) -> int:
    """One-off batch send on ``fd`` (see :class:`BatchSender` for the reusable form)."""
    return BatchSender(fd, min(_MAX_BATCH, max(1, len(frames)))).send(frames)
