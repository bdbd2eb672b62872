"""Sealing and opening authenticated frames: AES-CMAC trailers and a replay window (sans-IO).

A sealed frame is ``data || key_id:8 || era:32 || seq:32 || mac:64`` (the trailer of
:mod:`headers.auth`). ``mac`` is AES-CMAC under the 16-byte key ``key_id`` names, over everything
before it, truncated to 8 bytes: a forger's chance per attempt is 2^-64, and the receiver counts
every failure.

``(era, seq)`` orders one sender's frames. ``seq`` counts from 1 per frame; ``era`` is chosen by
the sender, normally its start time in whole seconds (:func:`era_now`), so a restarted sender's
frames are newer than everything its previous run sent and the receiver's replay window follows
it without any handshake. Should ``seq`` run out (2^32 - 1 frames) the sender moves to era + 1 and
restarts at 1. Consequences for deployments: a sender restarted within the same wall-clock second
as its previous run, or after the wall clock stepped back, sends frames its peer refuses as replays
(``replayed``/``stale_era``) until its counters pass the old ones; and era 2^32 - 1 wraps to 0
(year 2106), which peers refuse as stale.

The receiver (:class:`Opener`, one per sending peer) checks, in this order: length, key id, MAC,
era, then the sliding window of RFC 4303 §3.4.3 over ``seq``. The MAC is checked before the replay
state is read or written, so a forged frame cannot move the window. The window is independent of
the key id: rotating keys neither resets it nor opens it to replays. A receiver that restarts
starts with an empty window and so accepts one replay of each frame still within it; nothing short
of persistent state prevents that.

Cost: ``cryptography``'s CMAC object set-up (AES key schedule) costs more than MACing a 64-byte
frame, so each :class:`Sealer`/:class:`Opener` keeps one keyed CMAC per key and ``copy()``s it per
frame (about 3x faster for 64-byte frames, 2x for 1500 bytes; ``netstack bench headers``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from hmac import compare_digest

from cryptography.hazmat.primitives.ciphers import algorithms
from cryptography.hazmat.primitives.cmac import CMAC

from headers.auth import AUTH_INPUT, MAC_LEN, TRAILER, TRAILER_LEN

from .keys import DerivedKeys

TRUNCATED = "truncated"
UNKNOWN_KEY = "unknown_key"
FORGED = "forged"
REPLAYED = "replayed"
STALE_ERA = "stale_era"
#: every reason an Opener refuses a frame, in the order it checks
REASONS = (TRUNCATED, UNKNOWN_KEY, FORGED, STALE_ERA, REPLAYED)

U32 = 0xFFFFFFFF
DEFAULT_WINDOW = 64
#: the replay bitmap is one int of ``window`` bits: bounded whatever arrives
MAX_WINDOW = 1 << 16


class AuthFailure(Exception):
    """A frame the Opener refused; ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(f"{reason}: {detail}" if detail else reason)


def era_now(wall_time_s: float) -> int:
    """The era for a sender started at ``wall_time_s`` (unix seconds): whole seconds, 32 bits."""
    return int(wall_time_s) & U32


def mac(key: bytes, data: bytes | memoryview, key_id: int, era: int, seq: int) -> bytes:
    """The trailer's MAC: first 8 bytes of AES-CMAC(key, data || key_id:8 || era:32 || seq:32).

    A fresh CMAC per call, for tools and tests; Sealer and Opener copy a pre-keyed one instead.
    """
    c = CMAC(algorithms.AES(key))
    c.update(data)  # type: ignore[arg-type]  # typed bytes; takes any buffer (cryptography's CffiBuf)
    c.update(AUTH_INPUT.pack(key_id, era, seq))
    return c.finalize()[:MAC_LEN]


def _keyed(keys: DerivedKeys) -> dict[int, CMAC]:
    return {kid: CMAC(algorithms.AES(key)) for kid, key in keys.keys.items()}


@dataclass(slots=True)
class SealerCounters:
    """What a sealer counts (``Sealer.c``)."""

    sealed: int = 0  # frames given a trailer


@dataclass(slots=True)
class OpenerCounters:
    """What an opener counts (``Opener.c``): every frame offered is ``ok`` or refused for exactly
    one of :data:`REASONS` (the fields after ``ok``, in that order)."""

    ok: int = 0
    truncated: int = 0
    unknown_key: int = 0
    forged: int = 0
    stale_era: int = 0
    replayed: int = 0


assert tuple(f.name for f in fields(OpenerCounters))[1:] == REASONS


class Sealer:
    """Appends trailers for one sender: ``seal(data) -> data + trailer``.

    ``era`` is the caller's (see :func:`era_now`); ``seq`` starts at 1. ``c.sealed`` counts frames.
    """

    def __init__(self, keys: DerivedKeys, era: int) -> None:
        if isinstance(era, bool) or not isinstance(era, int) or not 0 <= era <= U32:
            raise ValueError(f"era {era!r} is not a 32-bit unsigned number")
        self.era = era
        self._next_seq = 1
        self.c = SealerCounters()
        self.update_keys(keys)

    def update_keys(self, keys: DerivedKeys) -> None:
        """Seal with ``keys.current`` from the next frame on (rotation); the sequence continues."""
        self._key_id = keys.current
        self._cmac = CMAC(algorithms.AES(keys.keys[keys.current]))

    @property
    def key_id(self) -> int:
        return self._key_id

    @property
    def next_seq(self) -> int:
        """The seq the next frame gets (before an era change: 2^32 means "era + 1, seq 1")."""
        return self._next_seq

    def seal(self, data: bytes) -> bytes:
        seq = self._next_seq
        if seq > U32:  # seq exhausted: a new era makes every later frame newer than all before
            self.era = (self.era + 1) & U32
            seq = 1
        self._next_seq = seq + 1
        if type(data) is not bytes:
            data = bytes(data)
        msg = data + AUTH_INPUT.pack(self._key_id, self.era, seq)
        c = self._cmac.copy()
        c.update(msg)
        self.c.sealed += 1
        return msg + c.finalize()[:MAC_LEN]


class Opener:
    """Checks and strips trailers from one sending peer: ``open(frame) -> data`` or AuthFailure.

    ``c`` (:class:`OpenerCounters`) has ``ok`` and one counter per reason in :data:`REASONS`, all
    from 0; every frame offered increments exactly one of them.
    """

    def __init__(self, keys: DerivedKeys, window: int = DEFAULT_WINDOW) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_WINDOW:
            raise ValueError(f"window {window!r} is not in 1..{MAX_WINDOW}")
        self.window = window
        self._replay = ReplayWindow(window)
        self.c = OpenerCounters()
        self.update_keys(keys)

    def update_keys(self, keys: DerivedKeys) -> None:
        """Accept exactly the ids in ``keys`` from now on (a key dropped from it is refused)."""
        self._cmacs = _keyed(keys)

    @property
    def refused(self) -> int:
        return sum(getattr(self.c, r) for r in REASONS)

    @property
    def highest(self) -> tuple[int, int] | None:
        """(era, seq) of the newest frame accepted, None before the first."""
        return self._replay.highest

    def _refuse(self, reason: str, detail: str = "") -> AuthFailure:
        setattr(self.c, reason, getattr(self.c, reason) + 1)  # (a refusal: off the fast path)
        return AuthFailure(reason, detail)

    def open(self, data: bytes | memoryview) -> bytes:
        n = len(data)
        if n < TRAILER_LEN:
            raise self._refuse(TRUNCATED, f"{n} bytes, a trailer alone is {TRAILER_LEN}")
        key_id, era, seq, tag = TRAILER.unpack_from(data, n - TRAILER_LEN)
        base = self._cmacs.get(key_id)
        if base is None:
            raise self._refuse(UNKNOWN_KEY, f"key id {key_id}")
        # slicing bytes is cheaper than making a memoryview of them (64-byte frames: ~0.4 us)
        view = data if type(data) is bytes else memoryview(data)
        c = base.copy()
        c.update(view[:n - MAC_LEN])  # type: ignore[arg-type]  # typed bytes; takes any buffer
        if not compare_digest(c.finalize()[:MAC_LEN], tag):
            raise self._refuse(FORGED)
        self._admit(era, seq)
        self.c.ok += 1
        return bytes(view[:n - TRAILER_LEN])

    def _admit(self, era: int, seq: int) -> None:
        """The replay check of an authentic frame: record it, or refuse it."""
        reason = self._replay.admit(era, seq)
        if reason is not None:
            raise self._refuse(*reason)


class ReplayWindow:
    """One sender's replay state: the newest (era, seq) taken and a sliding window of ``window``
    seqs below it (RFC 4303 §3.4.3). ``admit`` records an authentic frame's (era, seq) or says why
    not; the caller checks authenticity first, so a forged frame never moves it."""

    __slots__ = ("_era", "_mask", "_seen", "_top", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self._mask = (1 << window) - 1
        self._era: int | None = None  # None: no frame accepted yet
        self._top = 0  # the highest seq accepted in _era
        self._seen = 0  # bit i: seq _top - i accepted

    @property
    def highest(self) -> tuple[int, int] | None:
        return None if self._era is None else (self._era, self._top)

    def admit(self, era: int, seq: int) -> tuple[str, str] | None:
        """None: recorded; else (reason, detail), nothing recorded."""
        if self._era is None or era > self._era:  # first frame, or the sender restarted / ran out of seq
            self._era, self._top, self._seen = era, seq, 1
            return None
        if era < self._era:
            return STALE_ERA, f"era {era} < {self._era}"
        if seq > self._top:
            shift = seq - self._top
            # shift can be ~2^32: never shift the bitmap by more than it holds
            self._seen = ((self._seen << shift) | 1) & self._mask if shift < self.window else 1
            self._top = seq
            return None
        behind = self._top - seq
        if behind >= self.window:
            return REPLAYED, f"seq {seq} is older than the window (newest {self._top})"
        if self._seen >> behind & 1:
            return REPLAYED, f"seq {seq} seen"
        self._seen |= 1 << behind
        return None
