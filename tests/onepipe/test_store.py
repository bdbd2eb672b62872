"""The 1Pipe controller's state store (1Pipe §8, design topic §8 in docs/papers.md): one contract,
run against the embedded SQLite backend and a real 3-member etcd cluster, plus what only one
backend has (SQLite reopening its file, etcd losing a member).

etcd is installed by scripts/install.sh, so a missing etcd fails these tests rather than
skipping them."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from netstack.onepipe import etcd
from netstack.onepipe.store import (
    STORE_FILE,
    EtcdStore,
    ProcessRecord,
    SqliteStore,
    StaleFailureError,
    StoreError,
)

MakeStore = Callable[[str], Awaitable[SqliteStore | EtcdStore]]


def _cluster(parent: Path) -> etcd.EtcdCluster:
    if not etcd.etcd_available():
        pytest.fail("etcd is not installed: run bash scripts/install.sh (it installs Debian's etcd-server)")
    return etcd.start_cluster(parent)


@pytest.fixture(scope="module")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[etcd.EtcdCluster]:
    cluster = _cluster(tmp_path_factory.mktemp("etcd"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest_asyncio.fixture(params=["sqlite", "etcd"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MakeStore]:
    """A factory of stores that share one state (one file, or one run on the cluster): each call
    is another controller replica. All are closed at the end."""
    stores: list[SqliteStore | EtcdStore] = []
    run = f"t{uuid.uuid4().hex[:10]}"  # the module's tests share the cluster; each its own keys

    async def make(replica: str) -> SqliteStore | EtcdStore:
        store: SqliteStore | EtcdStore
        if request.param == "sqlite":
            store = SqliteStore.in_run_dir(tmp_path, replica=replica)
        else:
            store = EtcdStore(request.getfixturevalue("etcd_cluster").endpoints, run=run, replica=replica)
        stores.append(store)
        return store

    yield make
    for s in stores:
        await s.close()


def _proc(pid: str, host: str = "h1") -> ProcessRecord:
    return ProcessRecord(pid, f"10.0.0.1:{40100 + len(pid)}", host, time.time())


async def _registered(make: MakeStore, *pids: str) -> SqliteStore | EtcdStore:
    store = await make("c1")
    for p in pids:
        assert await store.register_process(_proc(p))
    return store


# ------------------------------------------------------------------------------- the contract

@pytest.mark.asyncio
async def test_processes_register_once_and_list_in_id_order(make_store: MakeStore) -> None:
    store = await _registered(make_store, "p2", "p1")
    assert [p.proc_id for p in await store.list_processes()] == ["p1", "p2"]
    assert await store.get_process("p1") == (await store.list_processes())[0]
    assert await store.get_process("p9") is None
    assert not await store.register_process(_proc("p1"))  # the same again: a no-op
    with pytest.raises(StoreError, match="new id"):
        await store.register_process(_proc("p1", host="h2"))  # a rejoin takes a new id


@pytest.mark.asyncio
async def test_a_failure_is_one_record_and_its_t_f_is_final(make_store: MakeStore) -> None:
    store = await _registered(make_store, "p1")
    assert await store.record_failure("p1", 1000, "beacon timeout")
    assert not await store.record_failure("p1", 1000, "reported again")
    with pytest.raises(StaleFailureError, match="stale"):
        await store.record_failure("p1", 999)
    with pytest.raises(StaleFailureError, match="final"):
        await store.record_failure("p1", 1001)
    rec = await store.get_failure("p1")
    assert rec is not None and (rec.t_f, rec.reason) == (1000, "beacon timeout")
    assert [f.proc_id for f in await store.list_failures()] == ["p1"]


@pytest.mark.asyncio
async def test_failures_since_a_revision_are_what_a_recovering_process_fetches(make_store: MakeStore) -> None:
    store = await _registered(make_store, "p1", "p2", "p3")
    await store.record_failure("p1", 10)
    own = await store.get_failure("p1")
    assert own is not None and own.revision > 0
    await store.record_failure("p2", 20)
    await store.record_failure("p3", 30)
    later = await store.list_failures(since_revision=own.revision)
    assert [(f.proc_id, f.t_f) for f in later] == [("p2", 20), ("p3", 30)]
    assert later[0].revision < later[1].revision
    assert await store.list_failures(since_revision=later[1].revision) == []


@pytest.mark.asyncio
async def test_recalls_are_added_once_listed_and_resolved(make_store: MakeStore) -> None:
    store = await _registered(make_store, "p1", "p2", "p3")
    assert await store.add_recall("p1", 7, "p2")
    assert await store.add_recall("p1", 7, "p3")
    assert not await store.add_recall("p1", 7, "p2")  # a duplicate: refused, for the caller to count
    assert [(r.sender, r.seq, r.receiver) for r in await store.list_recalls()] == [("p1", 7, "p2"), ("p1", 7, "p3")]
    assert [r.receiver for r in await store.list_recalls("p3")] == ["p3"]
    assert await store.resolve_recall("p1", 7, "p2")
    assert not await store.resolve_recall("p1", 7, "p2")
    assert [r.receiver for r in await store.list_recalls()] == ["p3"]
    resolved = [r for r in await store.list_recalls(include_resolved=True) if r.receiver == "p2"]
    assert resolved[0].resolved_at is not None
    with pytest.raises(StoreError, match="no recall"):
        await store.resolve_recall("p1", 8, "p2")


@pytest.mark.asyncio
@pytest.mark.parametrize("call", [
    lambda s: s.record_failure("ghost", 5),                      # unknown process
    lambda s: s.add_recall("p1", 1, "ghost"),
    lambda s: s.add_recall("ghost", 1, "p1"),
    lambda s: s.get_process("a/b"),                              # malformed ids
    lambda s: s.get_process(""),
    lambda s: s.register_process(ProcessRecord("p/1", "x:1", "h1", 0.0)),
    lambda s: s.register_process(ProcessRecord("p5", "", "h1", 0.0)),
    lambda s: s.register_process(ProcessRecord("p5", "x:1", "h1", float("nan"))),
    lambda s: s.register_process(("p5", "x:1", "h1", 0.0)),
    lambda s: s.record_failure("p1", -1),                        # malformed numbers
    lambda s: s.record_failure("p1", True),
    lambda s: s.record_failure("p1", 2**64),
    lambda s: s.record_failure("p1", "5"),
    lambda s: s.add_recall("p1", 1.5, "p1"),
    lambda s: s.list_failures(since_revision=-1),
    lambda s: s.campaign("ctl", 0),
    lambda s: s.campaign("a b", 1),
], ids=["unknown-failed", "unknown-receiver", "unknown-sender", "slash-id", "empty-id", "bad-record-id",
        "empty-address", "nan-time", "not-a-record", "negative-tf", "bool-tf", "huge-tf", "str-tf", "float-seq",
        "negative-revision", "zero-ttl", "bad-election"])
async def test_bad_input_is_a_store_error_and_changes_nothing(make_store: MakeStore, call) -> None:  # type: ignore[no-untyped-def]
    store = await _registered(make_store, "p1")
    with pytest.raises(StoreError):
        await call(store)
    assert [p.proc_id for p in await store.list_processes()] == ["p1"]
    assert await store.list_failures() == [] and await store.list_recalls() == []


@pytest.mark.asyncio
async def test_the_lead_passes_when_the_leader_resigns(make_store: MakeStore) -> None:
    a, b = await make_store("ctl-a"), await make_store("ctl-b")
    await a.campaign("controller", 2)
    assert a.is_leader("controller") and await b.leader("controller") == "ctl-a"
    waiting = asyncio.create_task(b.campaign("controller", 2))
    await asyncio.sleep(0.3)
    assert not waiting.done()  # one leader at a time
    t0 = time.monotonic()
    await a.resign("controller")
    await asyncio.wait_for(waiting, 3)
    assert time.monotonic() - t0 < 1.5  # resigning hands over at once, not after the TTL
    assert b.is_leader("controller") and not a.is_leader("controller")
    assert await a.leader("controller") == "ctl-b"


@pytest.mark.asyncio
async def test_the_lead_passes_when_the_leaders_lease_expires(make_store: MakeStore) -> None:
    a, b = await make_store("ctl-a"), await make_store("ctl-b")
    await a.campaign("controller", 1)
    await asyncio.sleep(1.5)  # the keep-alive holds the lead past one TTL
    assert await b.leader("controller") == "ctl-a"
    waiting = asyncio.create_task(b.campaign("controller", 1))
    await a.close()  # a crash: no resign, the lease just stops being refreshed
    await asyncio.wait_for(waiting, 6)
    assert await b.leader("controller") == "ctl-b"


@pytest.mark.asyncio
async def test_a_campaign_gives_up_after_its_timeout(make_store: MakeStore) -> None:
    a, b = await make_store("ctl-a"), await make_store("ctl-b")
    await a.campaign("controller", 2)
    with pytest.raises(StoreError, match="did not win"):
        await b.campaign("controller", 2, timeout_s=0.3)
    assert await b.leader("controller") == "ctl-a" and not b.is_leader("controller")


# ------------------------------------------------------------------------------- SQLite only

@pytest.mark.asyncio
async def test_sqlite_state_survives_reopening_the_file(tmp_path: Path) -> None:
    async with SqliteStore.in_run_dir(tmp_path) as store:
        await store.register_process(_proc("p1"))
        await store.record_failure("p1", 42, "host down")
        await store.add_recall("p1", 3, "p1")
    assert (tmp_path / STORE_FILE).exists()
    async with SqliteStore.in_run_dir(tmp_path) as again:
        assert [p.proc_id for p in await again.list_processes()] == ["p1"]
        assert [(f.proc_id, f.t_f, f.reason) for f in await again.list_failures()] == [("p1", 42, "host down")]
        assert [(r.sender, r.seq) for r in await again.list_recalls()] == [("p1", 3)]
        with pytest.raises(StaleFailureError):
            await again.record_failure("p1", 41)


@pytest.mark.asyncio
async def test_sqlite_refuses_a_newer_schema_and_a_non_database(tmp_path: Path) -> None:
    newer = tmp_path / "newer.sqlite3"
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version=99")
    store = SqliteStore(newer)
    with pytest.raises(StoreError, match="schema 99"):
        await store.list_processes()
    await store.close()
    junk = tmp_path / "junk.sqlite3"
    junk.write_bytes(b"not a database" * 100)
    store = SqliteStore(junk)
    with pytest.raises(StoreError, match="sqlite store"):
        await store.list_processes()
    await store.close()


# ------------------------------------------------------------------------------- etcd only

@pytest.mark.asyncio
async def test_etcd_failure_records_survive_killing_a_member(tmp_path: Path) -> None:
    cluster = _cluster(tmp_path)
    try:
        store = EtcdStore(cluster.endpoints, run="kill")
        try:
            for p in ("p1", "p2"):
                await store.register_process(_proc(p))
            await store.record_failure("p1", 100, "before the kill")
            cluster.members[0].kill()  # the member the store is talking to: 2 of 3 remain, a quorum
            await store.record_failure("p2", 200, "after the kill")
            assert store.endpoints[store._current] != store.endpoints[0]  # it moved to a live member
            assert not await store.record_failure("p1", 100)
        finally:
            await store.close()
        async with EtcdStore(cluster.endpoints[1:], run="kill") as other:
            assert [(f.proc_id, f.t_f) for f in await other.list_failures()] == [("p1", 100), ("p2", 200)]
    finally:
        cluster.stop()
    assert not cluster.root.exists() and not any(m.alive() for m in cluster.members)


def test_etcd_missing_binary_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(etcd, "etcd_binary", lambda: None)
    assert not etcd.etcd_available()
    with pytest.raises(etcd.EtcdError, match=r"scripts/install\.sh"):
        etcd.start_cluster(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_etcd_bad_endpoint_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="host:port"):
        EtcdStore(["localhost"])
    with pytest.raises(StoreError, match="at least one"):
        EtcdStore([])
