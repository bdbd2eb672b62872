"""Collector memory: registered regions backed by shared-memory files.

In the real system ("Direct Telemetry Access", §7.3) the collector registers huge-page buffers with its RDMA
NIC and the translator's WRITEs and Fetch&Adds land there with no CPU involvement; the
collector's CPU then answers queries by reading the same memory. Here the "NIC" is the
userspace :class:`netstack.dta.collector.RoceResponder`, and each registered region is a
file (default under ``/dev/shm/netstack-<collector>/``) that the responder maps read-write
and that query tools in other processes map read-only (:func:`open_region`,
:meth:`CollectorMemory.open`): the same split as NIC DMA versus collector CPU.

Region = ``name``, ``size`` bytes, a 32-bit ``rkey`` and a virtual base address
``base_va`` (what the translator puts in RETH/AtomicETH; ``va - base_va`` is the offset in
the file), and the access rights it was registered with (``write``, ``atomic``, ``read``,
as IBV_ACCESS_REMOTE_*). Every access is bounds- and rights-checked; a violation raises
:class:`MemoryAccessError` *before* any byte is touched, which the responder turns into a
NAK (remote access error).

Byte order in memory
--------------------
- Bytes carried by a WRITE are stored as they came off the wire. Our translator builds its
  payloads in network order, so Key-Write slots (checksum, data words), Append entries and
  Sketch-Merge counters are **big-endian** 32-bit words.
- Fetch&Add / Compare&Swap operate on **little-endian** 64-bit words. The AtomicETH and
  AtomicAckETH carry their operands big-endian (IBTA), but an RDMA NIC applies the atomic
  to a 64-bit word in host order, and the collectors of the paper are x86; we do the same,
  so a C program mapping the file reads the counters as native ``uint64_t``.

File format
-----------
``<directory>/<name>.mem`` is ``size`` bytes of region followed by a 64-byte trailer that
the RDMA path can never address (bounds checks stop at ``size``). The trailer is the
emulated NIC's bookkeeping, little-endian u64s: ``writes`` (WRITEs executed),
``atomics`` (atomics executed), ``last_write_end`` (offset just past the most recent
WRITE), ``max_write_end`` (furthest offset any WRITE reached). A real collector has no
such record; the Append query uses it to find the newest entry of a ring whose head
pointer lives in the translator (§7.2.3). ``<directory>/manifest.json`` lists the regions
(name, file, size, rkey, base_va, access, layout) of one collector.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import random
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .keywrite import DEFAULT_SLOT_HASH, KeyWriteLayout, check_slot_hash, is_power_of_two
from .postcard import PostcardLayout

MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
TRAILER_BYTES = 64
#: Where regions live unless told otherwise: /dev/shm is tmpfs, so the "memory" is RAM.
DEFAULT_ROOT = Path("/dev/shm")
ACCESS_RIGHTS = frozenset({"write", "atomic", "read"})
#: Fake virtual address space for region bases (user-space-looking, 2 MiB aligned like huge pages).
VA_START = 0x7F00_0000_0000
VA_ALIGN = 2 << 20
#: Append batch sizes the translator supports (§7.2.3; the P4 code's 1/2/4/8/16).
APPEND_BATCHES = (1, 2, 4, 8, 16)

_U64LE = struct.Struct("<Q")
#: The emulated NIC's per-region bookkeeping after the region (module docstring).
TRAILER = struct.Struct("<QQQQ")  # writes, atomics, last_write_end, max_write_end


class MemoryAccessError(Exception):
    """An access outside a region, without the right, or misaligned. Nothing was touched."""


def default_directory(collector: str) -> Path:
    """``/dev/shm/netstack-<collector>``."""
    return DEFAULT_ROOT / f"netstack-{collector}"


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not name or "/" in name or name.startswith(".") or len(name) > 100:
        raise ValueError(f"region name {name!r}: 1..100 characters, no '/', not starting with '.'")


class MemoryRegion:
    """One registered memory region, mapped from a file (or anonymous memory).

    Use :meth:`create` (read-write, for the responder) or :func:`open_region` (read-only,
    for queries). Offsets are relative to the region start; ``va`` arguments are absolute
    virtual addresses as they appear in RETH/AtomicETH.
    """

    def __init__(self, name: str, size: int, rkey: int, base_va: int, access: Iterable[str],
                 mm: mmap.mmap, *, path: Path | None = None, layout: dict[str, Any] | None = None,
                 readonly: bool = False) -> None:
        self.name = name
        self.size = size
        self.rkey = rkey
        self.base_va = base_va
        self.access = frozenset(access)
        self.layout: dict[str, Any] = dict(layout or {})
        self.path = path
        self.readonly = readonly
        self._mm: mmap.mmap | None = mm

    # ------------------------------------------------------------------ construction
    @classmethod
    def create(cls, name: str, size: int, rkey: int, base_va: int, access: Iterable[str],
               directory: Path | None = None, layout: dict[str, Any] | None = None, *,
               keep: bool = False) -> MemoryRegion:
        """A zeroed region; backed by ``directory/<name>.mem`` or, with None, anonymous memory
        (visible to this process only: for tests). ``keep``: map the existing file instead, with
        what it holds (a collector restarting over its memory, docs/dta.md "Collector restart");
        ValueError if it is missing or not ``size`` bytes plus the trailer."""
        _check_name(name)
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"region {name!r}: size={size!r} must be a positive int")
        if not isinstance(rkey, int) or not 0 < rkey <= 0xFFFFFFFF:
            raise ValueError(f"region {name!r}: rkey={rkey!r} must be a nonzero 32-bit int")
        if not isinstance(base_va, int) or base_va < 0 or base_va + size > 1 << 64 or base_va % 8:
            raise ValueError(f"region {name!r}: base_va={base_va!r} must be 8-byte aligned and fit in 64 bits")
        rights = frozenset(access)
        if not rights <= ACCESS_RIGHTS:
            raise ValueError(f"region {name!r}: unknown access rights {sorted(rights - ACCESS_RIGHTS)}")
        total = size + TRAILER_BYTES
        if directory is None:
            if keep:
                raise ValueError(f"region {name!r}: anonymous memory cannot be kept")
            return cls(name, size, rkey, base_va, rights, mmap.mmap(-1, total), layout=layout)
        path = Path(directory) / f"{name}.mem"
        if keep:
            try:
                fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
            except OSError as exc:
                raise ValueError(f"region {name!r}: cannot re-open {path}: {exc.strerror}") from None
        else:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if keep and os.fstat(fd).st_size != total:
                raise ValueError(f"region {name!r}: {path} is {os.fstat(fd).st_size} bytes, "
                                 f"not {size} + {TRAILER_BYTES}")
            if not keep:
                os.ftruncate(fd, total)  # sparse and zeroed
            mm = mmap.mmap(fd, total, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        return cls(name, size, rkey, base_va, rights, mm, path=path, layout=layout)

    # ------------------------------------------------------------------ checks
    @property
    def mm(self) -> mmap.mmap:
        if self._mm is None:
            raise MemoryAccessError(f"region {self.name!r} is closed")
        return self._mm

    @property
    def mapping(self) -> mmap.mmap | None:
        """The mapping (None once closed), for a data path that does its own checks: the
        responder's fast path (:mod:`netstack.dta.collector`) checks rights and bounds as
        :meth:`write` does and stores with one slice assignment."""
        return None if self.readonly else self._mm

    def allows(self, right: str) -> bool:
        return right in self.access

    def contains(self, va: int, length: int) -> bool:
        """Whether ``[va, va + length)`` lies inside the region (length 0: ``va`` within or at the end)."""
        off = va - self.base_va
        return off >= 0 and length >= 0 and off + length <= self.size

    def _offset(self, va: int, length: int, right: str | None) -> int:
        if right is not None and right not in self.access:
            raise MemoryAccessError(f"region {self.name!r} is not registered for remote {right}")
        if not self.contains(va, length):
            raise MemoryAccessError(f"[{va:#x}, +{length}) outside region {self.name!r} "
                                    f"[{self.base_va:#x}, +{self.size})")
        return va - self.base_va

    def _check_offset(self, offset: int, length: int) -> None:
        if not (isinstance(offset, int) and isinstance(length, int) and offset >= 0 and length >= 0
                and offset + length <= self.size):
            raise MemoryAccessError(f"offset {offset!r}+{length!r} outside region {self.name!r} of {self.size} bytes")

    # ------------------------------------------------------------------ RDMA-side operations
    def write(self, va: int, data: bytes | bytearray | memoryview) -> None:
        """RDMA WRITE: ``data`` at ``va`` (needs the ``write`` right)."""
        n = len(data)
        off = self._offset(va, n, "write")
        if self.readonly:
            raise MemoryAccessError(f"region {self.name!r} is mapped read-only")
        mm = self.mm
        mm[off:off + n] = data
        writes, atomics, _, max_end = TRAILER.unpack_from(mm, self.size)
        TRAILER.pack_into(mm, self.size, writes + 1, atomics, off + n, max(max_end, off + n))

    def _atomic_offset(self, va: int) -> int:
        if va % 8:
            raise MemoryAccessError(f"atomic at {va:#x} is not 8-byte aligned")
        off = self._offset(va, 8, "atomic")
        if self.readonly:
            raise MemoryAccessError(f"region {self.name!r} is mapped read-only")
        return off

    def _count_atomic(self) -> None:
        mm = self.mm
        writes, atomics, last, max_end = TRAILER.unpack_from(mm, self.size)
        TRAILER.pack_into(mm, self.size, writes, atomics + 1, last, max_end)

    def fetch_add(self, va: int, add: int) -> int:
        """RDMA FETCH_ADD on the little-endian u64 at ``va``; returns the value before (mod 2**64)."""
        off = self._atomic_offset(va)
        mm = self.mm
        orig: int = _U64LE.unpack_from(mm, off)[0]
        _U64LE.pack_into(mm, off, (orig + add) & 0xFFFFFFFFFFFFFFFF)
        self._count_atomic()
        return orig

    def cmp_swap(self, va: int, compare: int, swap: int) -> int:
        """RDMA CMP_SWAP on the little-endian u64 at ``va``; returns the value before."""
        off = self._atomic_offset(va)
        mm = self.mm
        orig: int = _U64LE.unpack_from(mm, off)[0]
        if orig == compare:
            _U64LE.pack_into(mm, off, swap & 0xFFFFFFFFFFFFFFFF)
        self._count_atomic()
        return orig

    # ------------------------------------------------------------------ CPU-side (query) reads
    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` from the region start (a local read: no rights needed)."""
        self._check_offset(offset, length)
        return self.mm[offset:offset + length]

    def read_u64(self, offset: int) -> int:
        """The little-endian u64 at ``offset`` (an atomic counter)."""
        self._check_offset(offset, 8)
        value: int = _U64LE.unpack_from(self.mm, offset)[0]
        return value

    def read_words(self, offset: int, count: int) -> tuple[int, ...]:
        """``count`` big-endian 32-bit words at ``offset`` (WRITE-carried data)."""
        self._check_offset(offset, 4 * count)
        return struct.unpack_from(f"!{count}I", self.mm, offset)

    def trailer(self) -> dict[str, int]:
        """The emulated NIC's bookkeeping for this region (see the module docstring)."""
        writes, atomics, last, max_end = TRAILER.unpack_from(self.mm, self.size)
        return {"writes": writes, "atomics": atomics, "last_write_end": last, "max_write_end": max_end}

    def clear(self) -> None:
        """Zero the region and its trailer (a fresh registration)."""
        if self.readonly:
            raise MemoryAccessError(f"region {self.name!r} is mapped read-only")
        mm = self.mm
        mm[:] = bytes(len(mm))

    # ------------------------------------------------------------------ misc
    def describe(self) -> dict[str, Any]:
        """The manifest entry of this region."""
        return {"name": self.name, "file": self.path.name if self.path else None, "size": self.size,
                "rkey": self.rkey, "base_va": self.base_va, "access": sorted(self.access), "layout": self.layout}

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def __repr__(self) -> str:
        return (f"MemoryRegion({self.name!r}, size={self.size}, rkey={self.rkey:#010x}, "
                f"base_va={self.base_va:#x}, access={sorted(self.access)})")


def _map_readonly(path: Path) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY)
    try:
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


def open_region(path: str | Path) -> MemoryRegion:
    """Map a region file read-only (a query tool's view). Its rkey, base address, access and
    layout come from the ``manifest.json`` beside it; without one, the size is the file size
    minus the trailer and the rest is unknown (rkey 0, base 0, no layout)."""
    path = Path(path)
    meta: dict[str, Any] | None = None
    manifest = path.parent / MANIFEST
    if manifest.exists():
        for entry in _read_manifest(manifest)["regions"]:
            if entry.get("file") == path.name:
                meta = entry
                break
    mm = _map_readonly(path)
    if meta is None:
        size = len(mm) - TRAILER_BYTES
        if size < 1:
            mm.close()
            raise ValueError(f"{path}: {len(mm)} bytes is too small to be a region file")
        return MemoryRegion(path.stem, size, 0, 0, (), mm, path=path, readonly=True)
    if len(mm) != meta["size"] + TRAILER_BYTES:
        n = len(mm)
        mm.close()
        raise ValueError(f"{path}: {n} bytes, the manifest says {meta['size']} + {TRAILER_BYTES}")
    return MemoryRegion(meta["name"], meta["size"], meta["rkey"], meta["base_va"], meta["access"], mm,
                        path=path, layout=meta.get("layout"), readonly=True)


def _read_manifest(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: cannot read the collector manifest: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != MANIFEST_VERSION or not isinstance(
            data.get("regions"), list):
        raise ValueError(f"{path}: not a version-{MANIFEST_VERSION} collector manifest")
    for entry in data["regions"]:
        if not isinstance(entry, dict) or not {"name", "file", "size", "rkey", "base_va", "access"} <= entry.keys():
            raise ValueError(f"{path}: malformed region entry {entry!r}")
    return data


class CollectorMemory:
    """All regions of one collector, and their manifest.

    ``directory``: where the region files go; ``"default"`` means
    :func:`default_directory` (``/dev/shm/netstack-<name>``), None means anonymous memory
    (in-process only, for tests). ``rng`` chooses rkeys and base addresses (seed it for
    reproducible runs). The ``add_*`` helpers create a region with the layout each DTA
    primitive expects and record that layout in the manifest, so the translator (through
    :meth:`netstack.dta.collector.RoceResponder.connect_info`) and the queries agree on it.
    """

    def __init__(self, name: str, directory: str | Path | None = "default", *,
                 rng: random.Random | None = None) -> None:
        _check_name(name)
        self.name = name
        if directory == "default":
            directory = default_directory(name)
        self.directory = Path(directory) if directory is not None else None
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.readonly = False
        self._rng = rng or random.Random()
        self.regions: dict[str, MemoryRegion] = {}
        self._by_rkey: dict[int, MemoryRegion] = {}
        self._next_va = VA_START + self._rng.randrange(0, 1 << 16) * VA_ALIGN

    # ------------------------------------------------------------------ regions
    def add_region(self, name: str, size: int, access: Iterable[str], layout: dict[str, Any] | None = None, *,
                   rkey: int | None = None, base_va: int | None = None, keep: bool = False) -> MemoryRegion:
        """Register a zeroed region; rkey and base address are drawn at random unless given.
        ``keep``: register the region file already in the directory, with its contents (the
        same rkey and base address should be given: a collector restarting over its memory)."""
        if self.readonly:
            raise ValueError("this collector memory was opened read-only")
        if name in self.regions:
            raise ValueError(f"region {name!r} already exists")
        if rkey is None:
            rkey = self._rng.randrange(1, 1 << 32)
            while rkey in self._by_rkey:
                rkey = self._rng.randrange(1, 1 << 32)
        elif rkey in self._by_rkey:
            raise ValueError(f"rkey {rkey:#x} is already in use")
        if base_va is None:
            base_va = self._next_va
            self._next_va += -(-size // VA_ALIGN) * VA_ALIGN + VA_ALIGN  # a guard gap between regions
        region = MemoryRegion.create(name, size, rkey, base_va, access, self.directory, layout, keep=keep)
        self.regions[name] = region
        self._by_rkey[rkey] = region
        self.write_manifest()
        return region

    def add_keywrite(self, slots: int, data_words: int = 1, checksum_bits: int = 32, max_redundancy: int = 4,
                     name: str = "keywrite", slot_hash: str = DEFAULT_SLOT_HASH) -> MemoryRegion:
        """The Key-Write store (§6.1, §7.2.2): ``slots`` (a power of two) slots of checksum + data.
        ``slot_hash``: see :mod:`netstack.dta.keywrite` ("crc32" = the public, correlated form)."""
        kw = KeyWriteLayout(slots, data_words, checksum_bits, max_redundancy, slot_hash)
        return self.add_region(name, kw.size, ("write",), kw.to_dict())

    def add_keyincrement(self, slots: int, max_redundancy: int = 4, name: str = "keyincrement",
                         slot_hash: str = DEFAULT_SLOT_HASH) -> MemoryRegion:
        """The Key-Increment counters (§6.4): ``slots`` (a power of two) little-endian u64s."""
        check_slot_hash(slot_hash)
        if not is_power_of_two(slots):
            raise ValueError(f"slots={slots!r} must be a power of two")
        if not isinstance(max_redundancy, int) or not 1 <= max_redundancy <= 255:
            raise ValueError(f"max_redundancy={max_redundancy!r} outside 1..255")
        layout = {"kind": "keyincrement", "slots": slots, "max_redundancy": max_redundancy, "counter_bytes": 8,
                  "byte_order": "little", "slot_hash": slot_hash}
        return self.add_region(name, slots * 8, ("atomic",), layout)

    def add_append_list(self, list_id: int, entries: int, batch: int = 4, name: str | None = None) -> MemoryRegion:
        """An Append ring buffer (§6.2, §7.2.3) of ``entries`` 32-bit entries, written ``batch`` at a time.
        ``entries`` must be a multiple of ``batch`` so a batch never straddles the wrap (§7.2.3 fn. 4)."""
        if not isinstance(list_id, int) or not 0 <= list_id <= 0xFFFFFFFF:
            raise ValueError(f"list_id={list_id!r} must be a 32-bit int")
        if batch not in APPEND_BATCHES:
            raise ValueError(f"batch={batch!r} must be one of {APPEND_BATCHES}")
        if not isinstance(entries, int) or entries < batch or entries % batch:
            raise ValueError(f"entries={entries!r} must be a positive multiple of the batch size {batch}")
        if any(r.layout.get("kind") == "append" and r.layout.get("list_id") == list_id for r in self.regions.values()):
            raise ValueError(f"list {list_id} already exists")
        layout = {"kind": "append", "list_id": list_id, "entries": entries, "entry_bytes": 4, "batch": batch}
        return self.add_region(name or f"append-{list_id}", entries * 4, ("write",), layout)

    def add_sketch(self, sketch_id: int, rows: int, columns: int, merge: str = "sum",
                   reporters: Iterable[int] = (), batch_columns: int = 4, epochs: int = 1,
                   name: str | None = None) -> MemoryRegion:
        """A merged sketch (§6.3, §7.2.4) in the rotated layout (Fig. 5d): column ``c`` of epoch
        slot ``e`` is ``rows`` big-endian u32 at offset ``((e * columns) + c) * rows * 4``, so
        consecutive columns are contiguous and ``batch_columns`` of them go in one WRITE.
        ``reporters``: the reporter ids whose columns make a column complete."""
        if not isinstance(sketch_id, int) or not 0 <= sketch_id <= 0xFFFF:
            raise ValueError(f"sketch_id={sketch_id!r} must be a 16-bit int")
        if not isinstance(rows, int) or not 1 <= rows <= 255:
            raise ValueError(f"rows={rows!r} outside 1..255")
        if not isinstance(columns, int) or columns < 1:
            raise ValueError(f"columns={columns!r} must be >= 1")
        if merge not in ("sum", "max"):
            raise ValueError(f"merge={merge!r} must be 'sum' or 'max'")
        ids = sorted(set(reporters))
        if not ids or any(not isinstance(r, int) or not 0 <= r <= 0xFFFF for r in ids):
            raise ValueError("reporters must be a non-empty set of 16-bit reporter ids")
        if not isinstance(batch_columns, int) or batch_columns < 1:
            raise ValueError(f"batch_columns={batch_columns!r} must be >= 1")
        if not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"epochs={epochs!r} must be >= 1")
        if any(r.layout.get("kind") == "sketch" and r.layout.get("sketch_id") == sketch_id
               for r in self.regions.values()):
            raise ValueError(f"sketch {sketch_id} already exists")
        layout = {"kind": "sketch", "sketch_id": sketch_id, "rows": rows, "columns": columns, "merge": merge,
                  "reporters": ids, "batch_columns": batch_columns, "epochs": epochs, "counter_bytes": 4,
                  "layout": "rotated"}
        return self.add_region(name or f"sketch-{sketch_id}", epochs * columns * rows * 4, ("write",), layout)

    def add_postcard(self, slots: int, hops: int = 5, name: str = "postcard",
                     slot_hash: str = DEFAULT_SLOT_HASH) -> MemoryRegion:
        """The Postcarding store (issue 33, :mod:`netstack.dta.postcard`): ``slots`` (a power of two)
        slots, one per flow, each the checksum of the flow key, a present-hops mask and ``hops``
        32-bit hop words, padded to a power of two."""
        pc = PostcardLayout(slots, hops, slot_hash)
        return self.add_region(name, pc.size, ("write",), pc.to_dict())

    def region(self, name: str) -> MemoryRegion:
        try:
            return self.regions[name]
        except KeyError:
            raise KeyError(f"collector {self.name!r} has no region {name!r} "
                           f"(regions: {', '.join(self.regions) or 'none'})") from None

    def by_rkey(self, rkey: int) -> MemoryRegion | None:
        return self._by_rkey.get(rkey)

    def find(self, kind: str, **match: Any) -> MemoryRegion | None:
        """The first region whose layout has ``kind`` and every ``match`` item."""
        for r in self.regions.values():
            lay = r.layout
            if lay.get("kind") == kind and all(lay.get(k) == v for k, v in match.items()):
                return r
        return None

    # ------------------------------------------------------------------ manifest
    def manifest(self) -> dict[str, Any]:
        return {"version": MANIFEST_VERSION, "collector": self.name,
                "regions": [r.describe() for r in self.regions.values()]}

    def write_manifest(self) -> None:
        """(Re)write ``manifest.json`` atomically (no-op for anonymous memory)."""
        if self.directory is None or self.readonly:
            return
        tmp = self.directory / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(self.manifest(), indent=1) + "\n")
        os.replace(tmp, self.directory / MANIFEST)

    @classmethod
    def open(cls, directory: str | Path) -> CollectorMemory:
        """Map every region of the collector in ``directory`` read-only (for queries)."""
        directory = Path(directory)
        if directory.name == MANIFEST:
            directory = directory.parent
        data = _read_manifest(directory / MANIFEST)
        self = cls.__new__(cls)
        self.name = str(data.get("collector", directory.name))
        self.directory = directory
        self.readonly = True
        self._rng = random.Random(0)
        self.regions = {}
        self._by_rkey = {}
        self._next_va = VA_START
        try:
            for entry in data["regions"]:
                region = open_region(directory / entry["file"])
                self.regions[region.name] = region
                self._by_rkey[region.rkey] = region
        except BaseException:
            self.close()
            raise
        return self

    def close(self, unlink: bool = False) -> None:
        """Unmap every region; with ``unlink`` also delete the files and the manifest."""
        for r in self.regions.values():
            r.close()
            if unlink and r.path is not None:
                r.path.unlink(missing_ok=True)
        if unlink and self.directory is not None and not self.readonly:
            (self.directory / MANIFEST).unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # not empty (someone else's files) or already gone
                self.directory.rmdir()

    def __enter__(self) -> CollectorMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
