"""Slot, checksum and sketch-index math shared by the translator, the collector and the queries.

One module so that the writer (the translator, "Direct Telemetry Access", §7.2.2) and the
readers (query tools, §6.1.2) can never disagree about where a key lives or what its checksum is.

Key-Write / Key-Increment slot (§7.2.2)
    The public translator takes ``CRC32(key || n)`` (key as 4 bytes, n as 1 byte) masked to
    the power-of-two slot count (Tofino has no general modulo, §7.2.2 footnote 3). A CRC
    is affine over GF(2) in its input, so ``CRC32(key || n) = CRC32(key || 0) ^ C_n`` with
    a constant ``C_n``: **every key's copy n sits at the same XOR offset from its copy 0**
    (checked in the tests: one offset for all keys). Two keys that collide in one copy then
    collide in all of them, and redundancy N > 1 buys almost nothing — Fig. 7 cannot be
    reproduced with it. We therefore finish the CRC with a non-linear 32-bit bijection:
    ``slot_hash(key, n) = mix32(CRC32(key || n))`` and ``slot = slot_hash & (slots - 1)``
    (``slot_hash="crc32+mix"``, the default). Still one CRC unit plus a few ALU steps, but
    the copies of a key land independently. ``slot_hash="crc32"`` selects the public form
    exactly, to measure the flaw; the choice is recorded in each store's layout (manifest)
    so writers and readers always agree.

Key checksum (§6.1.1; "key checksum || data" slots)
    The public code uses CRC32(key) for the checksum *and* CRC32(key || n) for the slot.
    Those are not independent: appending a byte to a CRC is a fixed function of the CRC
    so far, ``crc(m || b) = (crc(m) >> 8) ^ T[(crc(m) ^ b) & 0xFF]``, hence the slot of
    every copy is a function of CRC32(key). At 32 bits that is harmless (CRC32 of a 4-byte
    message is a bijection), but once the checksum is truncated (the Fig. 9 experiment
    varies its width) keys sharing a truncated checksum also tend to share slots, and the
    wrong-answer rate no longer follows the independent-hash model. We therefore use a
    *different family*: ``mix32(key ^ CHECKSUM_SEED)``, a xorshift-multiply bijection of
    32-bit words (two odd multiplications; not GF(2)-linear, unlike any CRC). Truncated to
    ``bits`` (8..32, low bits), it behaves as a hash independent of the CRC slot index.
    A checksum of 0 is never used (0 is remapped to the all-ones value of the width):
    collector memory starts zeroed, so an all-zero slot is unambiguously *empty* and a
    query never mistakes an untouched slot for a key's entry. Consequence at 32 bits: the
    checksum determines the key except for one pair of keys (the two whose mix is 0 and
    0xFFFFFFFF), so a 32-bit Key-Write store gives no wrong answers for 32-bit keys.

Slot contents (what a Key-Write RDMA WRITE carries, network byte order)
    ``checksum:32 | data[0]:32 | ... | data[k-1]:32`` — the checksum field is always four
    bytes (alignment; Tofino's 32-bit register bus), holding the ``bits``-wide value.

Sketch column index (Sketch-Merge, §6.3)
    ``sketch_index(key, row, columns) = mix32(CRC32(0xA5 || row:8 || key:32 BE)) mod columns``
    (mixed for the same reason as the slot hash: rows must hash independently) —
    the hash a reporter's Count-Min sketch uses to pick the counter of ``key`` in ``row``,
    and the one :func:`netstack.dta.query.CollectorQuery.sketch_point` reads with.

Analytic query success (Fig. 7) — see :func:`expected_success`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

_KEY_N = struct.Struct("!IB")
_KEY = struct.Struct("!I")
_SK = struct.Struct("!BBI")

#: XORed into the key before mixing, so that key 0 does not map to mix 0.
CHECKSUM_SEED = 0x5BD1E995

#: Width of the checksum field in memory (bytes); the value inside may be narrower.
CHECKSUM_BYTES = 4

#: Slot hash functions: ours (default) and the public translator's (correlated copies).
SLOT_HASHES = ("crc32+mix", "crc32")
DEFAULT_SLOT_HASH = "crc32+mix"

MIN_CHECKSUM_BITS = 8
MAX_CHECKSUM_BITS = 32


def is_power_of_two(value: int) -> bool:
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


def check_slot_hash(mode: str) -> str:
    if mode not in SLOT_HASHES:
        raise ValueError(f"slot_hash={mode!r} must be one of {SLOT_HASHES}")
    return mode


def slot_hash(key: int, n: int, mode: str = DEFAULT_SLOT_HASH) -> int:
    """The 32-bit hash of copy ``n`` of ``key``: CRC32 of ``key`` (4 bytes, big-endian) then
    ``n`` (1 byte), finished with :func:`mix32` unless ``mode`` is the public ``"crc32"``."""
    h = zlib.crc32(_KEY_N.pack(key, n))
    return mix32(h) if mode == "crc32+mix" else h


def slot_index(key: int, n: int, slots: int, mode: str = DEFAULT_SLOT_HASH) -> int:
    """Slot of copy ``n`` of ``key`` in a store of ``slots`` (a power of two) slots."""
    return slot_hash(key, n, mode) & (slots - 1)


def mix32(x: int) -> int:
    """A bijection of 32-bit words: xorshift-multiply rounds (odd multipliers are invertible
    mod 2**32, and ``x ^ x >> s`` is invertible), so distinct inputs give distinct outputs."""
    x &= 0xFFFFFFFF
    x ^= x >> 16
    x = x * 0x7FEB352D & 0xFFFFFFFF
    x ^= x >> 15
    x = x * 0x846CA68B & 0xFFFFFFFF
    x ^= x >> 16
    return x


def key_checksum(key: int, bits: int = 32) -> int:
    """The ``bits``-wide (8..32) checksum of ``key``; never 0 (see the module docstring)."""
    mask = (1 << bits) - 1
    return (mix32(key ^ CHECKSUM_SEED) & mask) or mask


def sketch_index(key: int, row: int, columns: int) -> int:
    """Column of ``key`` in ``row`` of a sketch with ``columns`` columns."""
    return mix32(zlib.crc32(_SK.pack(0xA5, row, key))) % columns


@dataclass(frozen=True, slots=True)
class KeyWriteLayout:
    """Geometry of a Key-Write store: ``slots`` slots of ``4 + 4 * data_words`` bytes."""

    slots: int
    data_words: int = 1
    checksum_bits: int = 32
    max_redundancy: int = 4
    slot_hash: str = DEFAULT_SLOT_HASH

    def __post_init__(self) -> None:
        check_slot_hash(self.slot_hash)
        if not is_power_of_two(self.slots):
            raise ValueError(f"slots={self.slots!r} must be a power of two (§7.2.2 footnote 3)")
        if not isinstance(self.data_words, int) or self.data_words < 1:
            raise ValueError(f"data_words={self.data_words!r} must be >= 1")
        if not isinstance(self.checksum_bits, int) or not MIN_CHECKSUM_BITS <= self.checksum_bits <= MAX_CHECKSUM_BITS:
            raise ValueError(f"checksum_bits={self.checksum_bits!r} outside {MIN_CHECKSUM_BITS}..{MAX_CHECKSUM_BITS}")
        if not isinstance(self.max_redundancy, int) or not 1 <= self.max_redundancy <= 255:
            raise ValueError(f"max_redundancy={self.max_redundancy!r} outside 1..255")

    @property
    def slot_bytes(self) -> int:
        return CHECKSUM_BYTES + 4 * self.data_words

    @property
    def size(self) -> int:
        return self.slots * self.slot_bytes

    def slot_offset(self, key: int, n: int) -> int:
        """Byte offset (from the region base) of copy ``n`` of ``key``."""
        return (slot_hash(key, n, self.slot_hash) & (self.slots - 1)) * self.slot_bytes

    def encode_slot(self, key: int, data: Sequence[int]) -> bytes:
        """The bytes a WRITE puts in a slot: checksum then the data words, big-endian."""
        if len(data) != self.data_words:
            raise ValueError(f"{len(data)} data words, the store holds {self.data_words}")
        return struct.pack(f"!{1 + self.data_words}I", key_checksum(key, self.checksum_bits), *data)

    def decode_slot(self, key: int, slot: bytes | bytearray | memoryview) -> tuple[int, ...] | None:
        """The data words in ``slot`` if its checksum is ``key``'s, else None."""
        words = struct.unpack_from(f"!{1 + self.data_words}I", slot)
        if words[0] != key_checksum(key, self.checksum_bits):
            return None
        return tuple(words[1:])

    def to_dict(self) -> dict[str, int | str]:
        return {"kind": "keywrite", "slots": self.slots, "data_words": self.data_words,
                "checksum_bits": self.checksum_bits, "max_redundancy": self.max_redundancy,
                "slot_bytes": self.slot_bytes, "slot_hash": self.slot_hash}

    @classmethod
    def from_dict(cls, layout: dict[str, Any]) -> KeyWriteLayout:
        """From a manifest / connect_info layout; ValueError when unusable."""
        try:
            return cls(int(layout["slots"]), int(layout.get("data_words", 1)), int(layout.get("checksum_bits", 32)),
                       int(layout.get("max_redundancy", 4)), str(layout.get("slot_hash", DEFAULT_SLOT_HASH)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"Key-Write layout {layout!r}: {exc}") from None


def consensus_value(candidates: Sequence[tuple[int, ...] | None], consensus: int = 1) -> tuple[int, ...] | None:
    """Pick the answer from the per-copy candidates (None = checksum mismatch).

    Plurality vote among the copies whose checksum matched; ties go to the value seen
    first (lowest n, the copy the public collector would have returned). The answer needs
    at least ``consensus`` agreeing copies (§8.1.4: consensus trades success rate for
    fewer wrong answers), else None ("not found")."""
    if consensus < 1:
        raise ValueError("consensus must be >= 1")
    votes: dict[tuple[int, ...], int] = {}
    for value in candidates:
        if value is not None:
            votes[value] = votes.get(value, 0) + 1
    if not votes:
        return None
    best = max(votes, key=votes.__getitem__)  # max() keeps the first of equal counts
    return best if votes[best] >= consensus else None


def survival_probability(later_writes: int, redundancy: int, slots: int) -> float:
    """P(at least one of a key's ``redundancy`` slots survives ``later_writes`` uniform writes).

    The N slots are taken as distinct (the chance that two copies of one key share a slot
    is about N**2 / 2S). By inclusion-exclusion over which j of them are all overwritten:
    ``sum_{j=1..N} (-1)**(j+1) C(N, j) (1 - j/S)**m``."""
    m = later_writes
    # the sign (-1) ** (j + 1) without "**": int ** int is typed Any (a negative exponent makes a float)
    return sum((1 if j % 2 else -1) * comb(redundancy, j) * (1.0 - j / slots) ** m for j in range(1, redundancy + 1))


def expected_success(keys: int, redundancy: int, slots: int) -> float:
    """Expected fraction of ``keys`` distinct keys, written once each in sequence with
    redundancy N into ``slots`` slots, that a consensus-1 query still finds (Fig. 7).

    A key is found iff at least one of its N slots was not overwritten by a later key:
    key i (0-based) is followed by ``N * (keys - 1 - i)`` writes, so the expectation is
    the mean of :func:`survival_probability` over i. (Load factor = ``keys / slots``.)
    A 32-bit checksum makes a surviving slot the only way to get an answer at all, so
    "found" and "found correctly" coincide."""
    if keys <= 0:
        return 1.0
    return sum(survival_probability(redundancy * later, redundancy, slots) for later in range(keys)) / keys
