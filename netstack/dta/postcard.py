"""Postcarding: the per-hop telemetry of a flow gathered into one collector slot (issue 33).

INT in postcard mode has every switch on a flow's path send its own small report (a *postcard*:
flow key, hop number, one 32-bit value) instead of stacking the values in the packet ("Direct
Telemetry Access" §2 and Table 1 list INT path tracing, 5 x 32-bit switch values per flow, among
the use cases). The public DTA artifact (jonlanglet/DTA) has a Postcarder primitive, opcode 0x04,
for it: the translator caches the postcards of a flow and writes the whole path in one RDMA WRITE
to the flow's slot, so the collector stores one slot per flow, not one entry per hop. This module
is the slot: its place in the region and its bytes. The cache is the translator's
(:mod:`netstack.dta.translator`, "Postcarding"); the reader is
:meth:`netstack.dta.query.CollectorQuery.postcard_get`.

Slot of flow ``key`` (``slot_bytes`` = the next power of two >= 8 + 4 * hops, so a slot address
is a shift, as on a switch; 32 B for the default 5 hops, the public slot size)::

    checksum(key):32 | present:32 | hop 1 data:32 | ... | hop H data:32 | (padding, never written)

- ``slot = slot_index(key, 0, slots)``: the Key-Write slot hash of copy 0 (CRC32 finished with a
  mixer, :mod:`netstack.dta.keywrite`); one slot per flow, as in the public translator.
- ``checksum(key)`` is Key-Write's 32-bit key checksum (never 0, so an untouched slot is "not
  found"): a query tells its flow's slot from one another flow overwrote. The public slot has no
  checksum: it stores each hop's value XORed with a per-hop CRC of the flow key, which a reader
  can only check against values it expects (switch IDs it knows).
- ``present``: bit ``h - 1`` set when hop ``h`` reported (a flow shorter than ``hops``, or a lost
  postcard, leaves hops out; the public slot cannot say which of its zero words were reported).
- Words are big-endian, as every WRITE-carried word (:mod:`netstack.dta.memory`); the codec is
  :class:`headers.dta.PostcardSlot` (its Scapy layer :class:`headers.layers.dta.DTAPostcardSlot`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from headers.dta import MAX_POSTCARD_HOPS, PostcardSlot
from headers.errors import HeaderError

from .keywrite import DEFAULT_SLOT_HASH, check_slot_hash, is_power_of_two, key_checksum, slot_index

#: Hops per slot by default: the public translator's 5-hop entries (its ``rdma_payload_postcarder_h``).
DEFAULT_HOPS = 5
#: At most this many hops per slot (one bit each in ``present``, and a WRITE of at most 136 bytes).
MAX_HOPS = MAX_POSTCARD_HOPS


def slot_bytes_for(hops: int) -> int:
    """The slot size for ``hops`` hops: the smallest power of two holding 8 + 4 * hops bytes."""
    need = 8 + 4 * hops
    size = 8
    while size < need:
        size <<= 1
    return size


@dataclass(frozen=True)
class PostcardLayout:
    """A Postcarding store: ``slots`` (a power of two) slots of ``hops`` hop words each."""

    slots: int
    hops: int = DEFAULT_HOPS
    slot_hash: str = DEFAULT_SLOT_HASH

    def __post_init__(self) -> None:
        if not isinstance(self.slots, int) or not is_power_of_two(self.slots):
            raise ValueError(f"slots={self.slots!r} must be a power of two")
        if not isinstance(self.hops, int) or isinstance(self.hops, bool) or not 1 <= self.hops <= MAX_HOPS:
            raise ValueError(f"hops={self.hops!r} outside 1..{MAX_HOPS}")
        check_slot_hash(self.slot_hash)

    @property
    def slot_bytes(self) -> int:
        return slot_bytes_for(self.hops)

    @property
    def write_bytes(self) -> int:
        """What one WRITE carries: checksum, present and every hop word (not the padding)."""
        return 8 + 4 * self.hops

    @property
    def size(self) -> int:
        return self.slots * self.slot_bytes

    def slot_offset(self, key: int) -> int:
        """Where flow ``key``'s slot starts in the region."""
        return slot_index(key, 0, self.slots, self.slot_hash) * self.slot_bytes

    def encode(self, key: int, hops: dict[int, int]) -> bytes:
        """The WRITE payload (:class:`headers.dta.PostcardSlot`) for flow ``key`` with ``hops``
        {hop number 1..H: data}."""
        words = [0] * self.hops
        present = 0
        for hop, data in hops.items():
            words[hop - 1] = data
            present |= 1 << (hop - 1)
        return PostcardSlot(key_checksum(key), present, words).to_bytes()

    def decode(self, key: int, raw: bytes) -> dict[int, int] | None:
        """{hop: data} of flow ``key`` from its slot's bytes, or None when the slot is not its own
        (another flow's checksum, nothing reported, or bytes no translator writes: torn or forged)."""
        try:
            slot = PostcardSlot.from_bytes(raw, 0, self.write_bytes, self.hops)
        except HeaderError:
            return None
        if slot.checksum != key_checksum(key) or not slot.present:
            return None
        return slot.reported()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "postcard", "slots": self.slots, "hops": self.hops, "slot_bytes": self.slot_bytes,
                "checksum_bits": 32, "slot_hash": self.slot_hash}

    @classmethod
    def from_dict(cls, layout: dict[str, Any]) -> PostcardLayout:
        """The layout a manifest or connect_info records (ValueError if it is not one)."""
        try:
            lay = cls(int(layout["slots"]), int(layout.get("hops", DEFAULT_HOPS)),
                      str(layout.get("slot_hash", DEFAULT_SLOT_HASH)))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"postcard layout {layout!r}: {exc}") from None
        if int(layout.get("slot_bytes", lay.slot_bytes)) != lay.slot_bytes:
            raise ValueError(f"postcard layout {layout!r}: slot_bytes must be {lay.slot_bytes}")
        return lay
