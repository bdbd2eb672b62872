"""Registered memory regions: bounds, rights, atomics, shared-memory files and the manifest."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from netstack.dta import CollectorMemory, CollectorQuery, MemoryAccessError, open_region
from netstack.dta.memory import MANIFEST, TRAILER_BYTES, MemoryRegion, default_directory


def region(size=64, access=("write", "atomic"), base=0x10000):
    return MemoryRegion.create("r", size, 0x1234, base, access)


def test_write_read_and_trailer():
    r = region()
    r.write(0x10008, b"abcd")
    assert r.read(8, 4) == b"abcd" and r.read(0, 8) == bytes(8)
    r.write(0x10000 + 60, b"wxyz")  # exactly to the end
    assert r.trailer() == {"writes": 2, "atomics": 0, "last_write_end": 64, "max_write_end": 64}


@pytest.mark.parametrize("va,n", [(0x10000 - 1, 1), (0x10000 + 61, 4), (0x10000 + 64, 1), (0, 4), (1 << 63, 8)])
def test_out_of_bounds_touches_nothing(va, n):
    r = region()
    with pytest.raises(MemoryAccessError):
        r.write(va, b"\xff" * n)
    assert r.read(0, 64) == bytes(64) and r.trailer()["writes"] == 0


def test_rights_are_enforced():
    w = region(access=("write",))
    with pytest.raises(MemoryAccessError):
        w.fetch_add(0x10000, 1)
    a = region(access=("atomic",))
    with pytest.raises(MemoryAccessError):
        a.write(0x10000, b"x")
    assert w.read(0, 64) == bytes(64) and a.read(0, 64) == bytes(64)


def test_atomics_are_little_endian_u64_and_wrap():
    r = region()
    assert r.fetch_add(0x10008, 5) == 0
    assert r.fetch_add(0x10008, 7) == 5
    assert r.read(8, 8) == (12).to_bytes(8, "little")  # a C program reads a native uint64_t
    assert r.read_u64(8) == 12
    assert r.fetch_add(0x10008, (1 << 64) - 12) == 12 and r.read_u64(8) == 0  # mod 2**64
    assert r.cmp_swap(0x10010, 1, 99) == 0 and r.read_u64(16) == 0  # compare failed
    assert r.cmp_swap(0x10010, 0, 99) == 0 and r.read_u64(16) == 99
    with pytest.raises(MemoryAccessError):
        r.fetch_add(0x10004, 1)  # misaligned
    with pytest.raises(MemoryAccessError):
        r.fetch_add(0x10000 + 64, 1)  # out of bounds
    assert r.trailer()["atomics"] == 5


@given(st.integers(-100, 200), st.integers(0, 80), st.sampled_from(["write", "atomic"]))
def test_any_access_is_checked_before_touching_memory(off, n, op):
    r = region()
    va = 0x10000 + off
    try:
        if op == "write":
            r.write(va, b"\x01" * n)
            assert off >= 0 and off + n <= 64
        else:
            r.fetch_add(va, 1)
            assert off % 8 == 0 and 0 <= off <= 56
    except MemoryAccessError:
        assert r.read(0, 64) == bytes(64)


def test_validation():
    for kw in ({"size": 0}, {"rkey": 0}, {"base_va": 3}, {"access": ("exec",)}):
        args = {"name": "r", "size": 8, "rkey": 1, "base_va": 0, "access": ("write",)} | kw
        with pytest.raises(ValueError):
            MemoryRegion.create(**args)
    with pytest.raises(ValueError):
        MemoryRegion.create("../x", 8, 1, 0, ("write",))
    mem = CollectorMemory("c", None)
    with pytest.raises(ValueError):
        mem.add_append_list(1, entries=10, batch=4)  # not a multiple of the batch
    with pytest.raises(ValueError):
        mem.add_append_list(1, entries=16, batch=3)
    with pytest.raises(ValueError):
        mem.add_keywrite(slots=100)
    with pytest.raises(ValueError):
        mem.add_sketch(1, rows=2, columns=4, reporters=())
    mem.add_append_list(1, entries=16)
    with pytest.raises(ValueError):
        mem.add_append_list(1, entries=16)


def test_collector_memory_assigns_distinct_rkeys_and_disjoint_addresses():
    mem = CollectorMemory("c", None, rng=random.Random(0))
    regions = [mem.add_keywrite(1 << 10), mem.add_keyincrement(1 << 10)] + [
        mem.add_append_list(i, entries=64) for i in range(5)]
    assert len({r.rkey for r in regions}) == len(regions)
    spans = sorted((r.base_va, r.base_va + r.size) for r in regions)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    assert mem.by_rkey(regions[3].rkey) is regions[3]
    assert mem.find("append", list_id=4) is regions[-1]


def test_default_directory_is_dev_shm():
    assert str(default_directory("c1")) == "/dev/shm/netstack-c1"


def test_files_manifest_and_read_only_views(tmp_path):
    mem = CollectorMemory("c1", tmp_path, rng=random.Random(1))
    kw = mem.add_keywrite(1 << 8, checksum_bits=16)
    mem.add_append_list(3, entries=32, batch=8)
    kw.write(kw.base_va + 16, b"\x00\x00\x12\x34\xde\xad\xbe\xef")
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["collector"] == "c1" and [r["name"] for r in manifest["regions"]] == ["keywrite", "append-3"]
    entry = manifest["regions"][0]
    assert entry["file"] == "keywrite.mem" and entry["rkey"] == kw.rkey and entry["base_va"] == kw.base_va
    assert entry["layout"]["checksum_bits"] == 16 and entry["access"] == ["write"]
    assert (tmp_path / "keywrite.mem").stat().st_size == kw.size + TRAILER_BYTES

    ro = open_region(tmp_path / "keywrite.mem")
    assert ro.readonly and ro.rkey == kw.rkey and ro.layout == kw.layout
    assert ro.read(16, 8) == b"\x00\x00\x12\x34\xde\xad\xbe\xef"
    kw.write(kw.base_va, b"live")  # the writer's later stores are visible through the mapping
    assert ro.read(0, 4) == b"live"
    with pytest.raises((MemoryAccessError, TypeError)):
        ro.write(ro.base_va, b"x")
    ro.close()

    view = CollectorMemory.open(tmp_path)
    assert set(view.regions) == {"keywrite", "append-3"} and view.readonly
    view.close()
    mem.close(unlink=True)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_another_process_reads_what_the_responder_wrote(tmp_path):
    """The point of shared-memory files: a query tool in another process sees the NIC's writes."""
    mem = CollectorMemory("c2", tmp_path, rng=random.Random(2))
    mem.add_keyincrement(1 << 4, max_redundancy=1)
    r = mem.region("keyincrement")
    from netstack.dta.keywrite import slot_index

    r.fetch_add(r.base_va + slot_index(77, 0, 16) * 8, 41)
    code = ("import sys; from netstack.dta import CollectorQuery; "
            "q = CollectorQuery.open(sys.argv[1]); print(q.counter_get(77)); q.close()")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "41"
    mem.close(unlink=True)


def test_open_rejects_garbage(tmp_path):
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(ValueError):
        CollectorMemory.open(tmp_path)
    (tmp_path / MANIFEST).write_text(json.dumps({"version": 1, "regions": [{"name": "x"}]}))
    with pytest.raises(ValueError):
        CollectorQuery.open(tmp_path)
    (tmp_path / "tiny.mem").write_bytes(b"1")
    (tmp_path / MANIFEST).unlink()
    with pytest.raises(ValueError):
        open_region(tmp_path / "tiny.mem")
