"""Queries on collector memory: what the collector's CPU does while the NIC ingests
("Direct Telemetry Access", §6.5, §7.3).

Everything is read from the region files and their manifest (:mod:`netstack.dta.memory`),
so a query tool can run in another process while the responder writes; reads are not
synchronised with the writes (as with real RDMA: a slot read mid-WRITE may be torn, and
then its checksum simply does not match).

    q = CollectorQuery.open("/dev/shm/netstack-c1")     # or CollectorQuery(memory) in-process
    q.keywrite_get(key)              # -> data words, or None ("not found")
    q.keywrite_get(key, consensus=2) # at least two agreeing copies (§8.1.4)
    q.append_read(list_id, last=10)  # the 10 newest entries, oldest first
    q.counter_get(key)               # Key-Increment: min over the N counters (count-min)
    q.sketch_point(sketch_id, key)   # Count-Min estimate from the merged sketch
    q.postcard_get(flow_key)         # Postcarding: {hop: data} of the flow, or None

Key-Write (§6.1.2): the reader does not know the N a reporter used, so it tries
n = 0..``redundancy``-1 (default: the store's ``max_redundancy``), keeps the copies whose
checksum is the key's, and returns the plurality value if at least ``consensus`` copies
agree (:func:`netstack.dta.keywrite.consensus_value`).

Key-Increment: query with the N the reporters used (default: the store's
``max_redundancy``; reporters should use it too). A larger N reads counters this key never
touched and can *under*-estimate.

Append (§7.2.3): the head pointer lives in the translator, so the newest entry is found
from the emulated NIC's record of the most recent WRITE's end in the region trailer
(memory.py): entries are returned oldest first, and the oldest is the one after the newest:
once the ring has been filled, and also before, when a re-enabled translator restarted its head
at 0 under entries an earlier one wrote (those come first, as older).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .keywrite import DEFAULT_SLOT_HASH, KeyWriteLayout, consensus_value, sketch_index, slot_index
from .memory import CollectorMemory, MemoryRegion
from .postcard import PostcardLayout


class QueryError(LookupError):
    """The collector has no such store (or its layout is unusable)."""


class CollectorQuery:
    """Read-side API over one collector's memory (see the module docstring)."""

    def __init__(self, memory: CollectorMemory) -> None:
        self.memory = memory

    @classmethod
    def open(cls, directory: str | Path) -> CollectorQuery:
        """Map the collector in ``directory`` (or its ``manifest.json``) read-only."""
        return cls(CollectorMemory.open(directory))

    def close(self) -> None:
        self.memory.close()

    def __enter__(self) -> CollectorQuery:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ lookup
    def _store(self, kind: str, what: str, **match: Any) -> MemoryRegion:
        region = self.memory.find(kind, **match)
        if region is None:
            raise QueryError(f"collector {self.memory.name!r} has no {what}")
        return region

    def _keywrite(self) -> tuple[MemoryRegion, KeyWriteLayout]:
        r = self._store("keywrite", "Key-Write store")
        lay = r.layout
        try:
            kw = KeyWriteLayout.from_dict(lay)
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        if kw.size > r.size:
            raise QueryError(f"Key-Write layout {lay!r} is larger than its region ({r.size} bytes)")
        return r, kw

    # ------------------------------------------------------------------ Key-Write
    def keywrite_candidates(self, key: int, redundancy: int | None = None) -> list[tuple[int, ...] | None]:
        """Per copy n, the data in slot ``hash(key || n)`` if its checksum is ``key``'s, else None."""
        r, kw = self._keywrite()
        n_max = kw.max_redundancy if redundancy is None else redundancy
        return [kw.decode_slot(key, r.read(kw.slot_offset(key, n), kw.slot_bytes)) for n in range(n_max)]

    def keywrite_get(self, key: int, redundancy: int | None = None, consensus: int = 1) -> tuple[int, ...] | None:
        """The data words stored under ``key``, or None when no ``consensus`` copies agree."""
        return consensus_value(self.keywrite_candidates(key, redundancy), consensus)

    # ------------------------------------------------------------------ Append
    def append_read(self, list_id: int, last: int | None = None) -> list[int]:
        """Entries of list ``list_id``, oldest first; only the ``last`` newest when given."""
        r = self._store("append", f"Append list {list_id}", list_id=list_id)
        entries = int(r.layout["entries"])
        t = r.trailer()
        max_end, newest_end = t["max_write_end"] // 4, t["last_write_end"] // 4
        if max_end == 0:
            return []
        ring = list(r.read_words(0, entries))
        # The newest entry ends at the last WRITE's end, whether or not the ring has wrapped: a
        # translator enabled again restarts its head at 0 (docs/dta.md "The translator, as built"),
        # so below the furthest end the slots past the newest one hold older entries (a previous
        # translator's), and only those up to the furthest end were ever written (issue 33).
        cut = newest_end % entries
        top = entries if max_end >= entries else max_end
        values = ring[cut:top] + ring[:cut]
        if last is not None:
            values = values[-last:] if last > 0 else []
        return values

    # ------------------------------------------------------------------ Key-Increment
    def counters_of(self, key: int, redundancy: int | None = None) -> list[int]:
        """The N counters of ``key`` (little-endian u64s in the counter store)."""
        r = self._store("keyincrement", "Key-Increment store")
        slots = int(r.layout["slots"])
        mode = str(r.layout.get("slot_hash", DEFAULT_SLOT_HASH))
        n_max = int(r.layout.get("max_redundancy", 4)) if redundancy is None else redundancy
        return [r.read_u64(slot_index(key, n, slots, mode) * 8) for n in range(n_max)]

    def counter_get(self, key: int, redundancy: int | None = None) -> int:
        """Count-min estimate of ``key``'s total: the minimum of its N counters (§6.4)."""
        return min(self.counters_of(key, redundancy))

    # ------------------------------------------------------------------ Sketch-Merge
    def _sketch(self, sketch_id: int, epoch: int) -> tuple[MemoryRegion, int, int, int]:
        r = self._store("sketch", f"sketch {sketch_id}", sketch_id=sketch_id)
        rows, cols, epochs = int(r.layout["rows"]), int(r.layout["columns"]), int(r.layout.get("epochs", 1))
        return r, rows, cols, (epoch % epochs) * cols * rows * 4

    def sketch_matrix(self, sketch_id: int, epoch: int = 0) -> list[list[int]]:
        """The merged sketch (rows x columns) stored for ``epoch`` (slot ``epoch % epochs``)."""
        r, rows, cols, base = self._sketch(sketch_id, epoch)
        flat = r.read_words(base, rows * cols)  # rotated: column-major
        return [[flat[c * rows + row] for c in range(cols)] for row in range(rows)]

    def sketch_point(self, sketch_id: int, key: int, epoch: int = 0) -> int:
        """Point estimate of ``key`` from the merged sketch: the minimum over rows of the
        counter ``key`` hashes to (Count-Min; meaningful for ``sum``-merged sketches)."""
        r, rows, cols, base = self._sketch(sketch_id, epoch)
        return min(int.from_bytes(r.read(base + (sketch_index(key, row, cols) * rows + row) * 4, 4), "big")
                   for row in range(rows))

    # ------------------------------------------------------------------ Postcarding
    def _postcard(self) -> tuple[MemoryRegion, PostcardLayout]:
        r = self._store("postcard", "Postcarding store")
        try:
            pc = PostcardLayout.from_dict(r.layout)
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        if pc.size > r.size:
            raise QueryError(f"Postcarding layout {r.layout!r} is larger than its region ({r.size} bytes)")
        return r, pc

    def postcard_get(self, key: int) -> dict[int, int] | None:
        """Flow ``key``'s per-hop data {hop number: 32-bit value}, the hops that reported, from its
        slot (:mod:`netstack.dta.postcard`); None when the slot holds another flow or nothing."""
        r, pc = self._postcard()
        return pc.decode(key, r.read(pc.slot_offset(key), pc.write_bytes))


def open_collector(directory: str | Path) -> CollectorQuery:
    """:meth:`CollectorQuery.open`."""
    return CollectorQuery.open(directory)
