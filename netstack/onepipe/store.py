"""Where the 1Pipe controller keeps its state: one small async interface, two backends.

The controller of reliable 1Pipe (1Pipe §8, design topic §8 in docs/papers.md) stores the
processes, the failure records and the undeliverable recalls, and its replicas elect one active
instance. :class:`ControllerStore` is what the controller needs of a store:

- **processes**: ``register_process`` / ``get_process`` / ``list_processes``. An id is
  registered once; registering it again with the same address and host is a no-op (``False``),
  with another one a :class:`StoreError`: a failed process rejoins as a *new* process, under a
  new id (1Pipe §8, recovery step 4).
- **failure records** ``(process, T_f, declared_at, reason)``: ``record_failure`` is
  idempotent and a record is **write-once**. The same process failing twice with the same T_f
  is one record (the second call returns ``False``); any other T_f for it, lower (stale) or
  higher, raises :class:`StaleFailureError`, because T_f is final once broadcast: processes
  have already discarded everything from P above it (1Pipe §8, steps 3-4). Every record gets a
  ``revision``, increasing in the order records were written, and ``list_failures(since_revision=r)``
  returns those written after ``r``: what a recovering process fetches (recovery step 2).
- **undeliverable recalls**, keyed by the scattering ``(sender, seq)`` and the ``receiver`` the
  controller could not reach: ``add_recall`` (a duplicate returns ``False``, so the caller can
  count it), ``list_recalls``, ``resolve_recall`` (once delivered or settled by recovery).
- **leader election** among controller replicas: ``campaign(name, ttl_s)`` returns once this
  replica leads ``name``, holding a lease that a background task keeps alive; ``resign(name)``
  gives it up at once; ``leader(name)`` names the current leader's replica id. ``close()`` stops
  the keep-alive *without* resigning, as a crash would: the lead passes on when the lease expires.

Backends:

- :class:`SqliteStore` (the default; no server): one SQLite file in the run directory, WAL,
  schema version in ``PRAGMA user_version``, every statement on one dedicated thread. Its
  election is a lease row in the same file: correct between replicas sharing that file on one
  machine, with wall-clock expiry, and nothing more (no replication; the file is the single
  point of failure).
- :class:`EtcdStore`: an etcd v3 cluster (``netstack.onepipe.etcd`` starts a local one) through
  the asyncio client ``aetcd``; keys under ``/netstack/onepipe/<run>/``, values JSON. Every
  check-and-write is one etcd transaction; the election is a key created with
  ``create_revision == 0`` under a lease, as etcd's own election recipe does.

Malformed input and references to unknown processes raise :class:`StoreError`; backend errors
are wrapped in it too, never leaked.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import socket
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

SCHEMA_VERSION = 1
STORE_FILE = "onepipe-store.sqlite3"
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_MAX_INT = 2**63 - 1


class StoreError(Exception):
    """A store call was refused (bad or unknown input) or the backend failed; the message says which."""


class StaleFailureError(StoreError):
    """A failure record for this process already exists with another T_f (records are write-once)."""


@dataclass(frozen=True)
class ProcessRecord:
    proc_id: str
    address: str  #: where the process listens, e.g. ``"10.0.0.1:40101"``
    host: str
    registered_at: float  #: Unix time, s


@dataclass(frozen=True)
class FailureRecord:
    proc_id: str
    t_f: int  #: the failure timestamp, ns in 1Pipe's timestamp space (1Pipe §8)
    declared_at: float  #: Unix time, s
    reason: str
    revision: int = 0  #: store order of writing; set by the store


@dataclass(frozen=True)
class RecallRecord:
    sender: str
    seq: int  #: the sender's scattering counter: (sender, seq) names a scattering
    receiver: str
    created_at: float
    resolved_at: float | None = None


class ControllerStore(Protocol):
    """What the 1Pipe controller needs of a store (module docstring: the semantics)."""

    replica: str

    async def register_process(self, proc: ProcessRecord) -> bool: ...
    async def get_process(self, proc_id: str) -> ProcessRecord | None: ...
    async def list_processes(self) -> list[ProcessRecord]: ...
    async def record_failure(self, proc_id: str, t_f: int, reason: str = "",
                             declared_at: float | None = None) -> bool: ...
    async def get_failure(self, proc_id: str) -> FailureRecord | None: ...
    async def list_failures(self, since_revision: int = 0) -> list[FailureRecord]: ...
    async def add_recall(self, sender: str, seq: int, receiver: str) -> bool: ...
    async def list_recalls(self, receiver: str | None = None, *,
                           include_resolved: bool = False) -> list[RecallRecord]: ...
    async def resolve_recall(self, sender: str, seq: int, receiver: str) -> bool: ...
    async def campaign(self, name: str, ttl_s: float, *, timeout_s: float | None = None) -> None: ...
    async def resign(self, name: str) -> None: ...
    async def leader(self, name: str) -> str | None: ...
    def is_leader(self, name: str) -> bool: ...
    async def close(self) -> None: ...


# ---------------------------------------------------------------------------------- validation

def _check_id(what: str, value: object) -> str:
    # ids become etcd key segments: no "/", bounded length
    if not isinstance(value, str) or not _ID.match(value):
        raise StoreError(f"{what} {value!r} is not an id (1-64 of A-Z a-z 0-9 . _ -, starting alphanumeric)")
    return value


def _check_int(what: str, value: object) -> int:
    if type(value) is not int or not 0 <= value <= _MAX_INT:
        raise StoreError(f"{what} {value!r} is not an integer in 0..2^63-1")
    return value


def _check_time(what: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise StoreError(f"{what} {value!r} is not a finite, non-negative time in seconds")
    return float(value)


def _check_text(what: str, value: object, limit: int, *, empty: bool = False) -> str:
    if not isinstance(value, str) or len(value) > limit or (not value and not empty) \
            or any(ord(c) < 32 for c in value):
        raise StoreError(f"{what} {value!r} is not a printable string of {0 if empty else 1}-{limit} characters")
    return value


def _check_process(proc: object) -> ProcessRecord:
    if not isinstance(proc, ProcessRecord):
        raise StoreError(f"expected a ProcessRecord, not {type(proc).__name__}")
    _check_id("process id", proc.proc_id)
    _check_text("address", proc.address, 255)
    _check_id("host", proc.host)
    _check_time("registered_at", proc.registered_at)
    return proc


def _check_ttl(ttl_s: object) -> float:
    if isinstance(ttl_s, bool) or not isinstance(ttl_s, int | float) or not 0 < ttl_s <= 3600:
        raise StoreError(f"lease ttl {ttl_s!r} is not a number of seconds in (0, 3600]")
    return float(ttl_s)


def default_replica_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}".replace("/", "-")[:64]


# ---------------------------------------------------------------------------------- the shared half

@dataclass
class _Lease:
    ttl_s: float
    leading: bool = False
    task: asyncio.Task[None] | None = None
    lease_id: int = 0  #: the backend's lease (etcd's lease id; unused by SQLite)


class _BaseStore(ABC):
    """Validation and the lease keep-alive, shared; backends implement the underscored methods."""

    def __init__(self, replica: str | None) -> None:
        self.replica = _check_id("replica id", replica if replica is not None else default_replica_id())
        self._leases: dict[str, _Lease] = {}

    async def register_process(self, proc: ProcessRecord) -> bool:
        return await self._register(_check_process(proc))

    async def get_process(self, proc_id: str) -> ProcessRecord | None:
        return await self._get_process(_check_id("process id", proc_id))

    async def list_processes(self) -> list[ProcessRecord]:
        return sorted(await self._list_processes(), key=lambda p: p.proc_id)

    async def record_failure(self, proc_id: str, t_f: int, reason: str = "", declared_at: float | None = None) -> bool:
        rec = FailureRecord(_check_id("process id", proc_id), _check_int("T_f", t_f),
                            _check_time("declared_at", time.time() if declared_at is None else declared_at),
                            _check_text("reason", reason, 1024, empty=True))
        return await self._record_failure(rec)

    async def get_failure(self, proc_id: str) -> FailureRecord | None:
        return await self._get_failure(_check_id("process id", proc_id))

    async def list_failures(self, since_revision: int = 0) -> list[FailureRecord]:
        since = _check_int("revision", since_revision)
        return sorted((f for f in await self._list_failures() if f.revision > since), key=lambda f: f.revision)

    async def add_recall(self, sender: str, seq: int, receiver: str) -> bool:
        rec = RecallRecord(_check_id("sender", sender), _check_int("seq", seq), _check_id("receiver", receiver),
                           time.time())
        return await self._add_recall(rec)

    async def list_recalls(self, receiver: str | None = None, *, include_resolved: bool = False) -> list[RecallRecord]:
        if receiver is not None:
            _check_id("receiver", receiver)
        out = [r for r in await self._list_recalls() if (receiver is None or r.receiver == receiver)
               and (include_resolved or r.resolved_at is None)]
        return sorted(out, key=lambda r: (r.sender, r.seq, r.receiver))

    async def resolve_recall(self, sender: str, seq: int, receiver: str) -> bool:
        return await self._resolve_recall(_check_id("sender", sender), _check_int("seq", seq),
                                          _check_id("receiver", receiver), time.time())

    async def campaign(self, name: str, ttl_s: float, *, timeout_s: float | None = None) -> None:
        """Return once this replica leads ``name``; raise StoreError after ``timeout_s``, if given."""
        _check_id("election name", name)
        ttl = _check_ttl(ttl_s)
        if self.is_leader(name):
            return
        await self._drop_lease(name)
        lease = _Lease(ttl)
        self._leases[name] = lease
        try:
            await asyncio.wait_for(self._campaign(name, lease), timeout_s)
        except TimeoutError:
            await self._drop_lease(name, revoke=True)
            raise StoreError(f"replica {self.replica} did not win {name!r} within {timeout_s} s") from None
        except BaseException:
            await self._drop_lease(name, revoke=True)
            raise
        lease.leading = True

    async def resign(self, name: str) -> None:
        await self._drop_lease(_check_id("election name", name), revoke=True)

    async def leader(self, name: str) -> str | None:
        return await self._leader(_check_id("election name", name))

    def is_leader(self, name: str) -> bool:
        """This replica's own view: it won ``name`` and its lease has not been lost since."""
        lease = self._leases.get(name)
        return lease is not None and lease.leading

    def _start_keepalive(self, name: str, lease: _Lease) -> None:
        lease.task = asyncio.get_running_loop().create_task(self._keepalive(name, lease))

    async def _keepalive(self, name: str, lease: _Lease) -> None:
        # refresh three times per TTL: two refreshes may be lost before the lease lapses
        while True:
            await asyncio.sleep(lease.ttl_s / 3)
            try:
                alive = await self._refresh(name, lease)
            except StoreError:
                alive = True  # a backend hiccup: try again; the lease itself says when it is over
            if not alive:
                lease.leading = False
                return

    async def _drop_lease(self, name: str, *, revoke: bool = False) -> None:
        lease = self._leases.pop(name, None)
        if lease is None:
            return
        if lease.task is not None:
            lease.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await lease.task
        if revoke:
            with contextlib.suppress(StoreError):
                await self._revoke(name, lease)

    async def close(self) -> None:
        """Stop the keep-alives (without resigning: the leases lapse by themselves) and disconnect."""
        for name in list(self._leases):
            await self._drop_lease(name)
        await self._close()

    async def __aenter__(self) -> _BaseStore:
        await self.list_processes()  # opens the backend, so a bad path or endpoint fails here
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abstractmethod
    async def _register(self, proc: ProcessRecord) -> bool: ...
    @abstractmethod
    async def _get_process(self, proc_id: str) -> ProcessRecord | None: ...
    @abstractmethod
    async def _list_processes(self) -> list[ProcessRecord]: ...
    @abstractmethod
    async def _record_failure(self, rec: FailureRecord) -> bool: ...
    @abstractmethod
    async def _get_failure(self, proc_id: str) -> FailureRecord | None: ...
    @abstractmethod
    async def _list_failures(self) -> list[FailureRecord]: ...
    @abstractmethod
    async def _add_recall(self, rec: RecallRecord) -> bool: ...
    @abstractmethod
    async def _list_recalls(self) -> list[RecallRecord]: ...
    @abstractmethod
    async def _resolve_recall(self, sender: str, seq: int, receiver: str, now: float) -> bool: ...
    @abstractmethod
    async def _campaign(self, name: str, lease: _Lease) -> None: ...
    @abstractmethod
    async def _refresh(self, name: str, lease: _Lease) -> bool: ...
    @abstractmethod
    async def _revoke(self, name: str, lease: _Lease) -> None: ...
    @abstractmethod
    async def _leader(self, name: str) -> str | None: ...
    @abstractmethod
    async def _close(self) -> None: ...


def _same_process(old: ProcessRecord, new: ProcessRecord) -> bool:
    if (old.address, old.host) == (new.address, new.host):
        return True
    raise StoreError(f"process {new.proc_id} is already registered at {old.address} on {old.host}; "
                     "a rejoining process takes a new id (1Pipe §8)")


def _same_failure(old: FailureRecord, new: FailureRecord) -> bool:
    if old.t_f == new.t_f:
        return True
    word = "stale (lower)" if new.t_f < old.t_f else "different (higher)"
    raise StaleFailureError(f"process {new.proc_id} already failed at T_f={old.t_f}; T_f={new.t_f} is {word} "
                            "and a broadcast T_f is final (1Pipe §8)")


# ---------------------------------------------------------------------------------- SQLite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS processes (proc_id TEXT PRIMARY KEY, address TEXT NOT NULL, host TEXT NOT NULL,
    registered_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS failures (revision INTEGER PRIMARY KEY AUTOINCREMENT,
    proc_id TEXT NOT NULL UNIQUE REFERENCES processes(proc_id), t_f INTEGER NOT NULL, declared_at REAL NOT NULL,
    reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS recalls (sender TEXT NOT NULL REFERENCES processes(proc_id), seq INTEGER NOT NULL,
    receiver TEXT NOT NULL REFERENCES processes(proc_id), created_at REAL NOT NULL, resolved_at REAL,
    PRIMARY KEY (sender, seq, receiver));
CREATE TABLE IF NOT EXISTS leaders (name TEXT PRIMARY KEY, replica TEXT NOT NULL, expires_at REAL NOT NULL);
"""


class SqliteStore(_BaseStore):
    """The embedded backend: one SQLite file (default: ``<run dir>/onepipe-store.sqlite3``)."""

    def __init__(self, path: str | Path, *, replica: str | None = None, poll_s: float = 0.05) -> None:
        super().__init__(replica)
        self.path = Path(path)
        self._poll_s = poll_s
        # one thread owns the connection: sqlite3 objects stay on the thread that made them
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="onepipe-store")
        self._db: sqlite3.Connection | None = None

    @classmethod
    def in_run_dir(cls, run_dir: str | Path, *, replica: str | None = None) -> SqliteStore:
        return cls(Path(run_dir) / STORE_FILE, replica=replica)

    def _open(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit; writers take BEGIN IMMEDIATE so replicas sharing the file serialize
        db = sqlite3.connect(self.path, isolation_level=None, timeout=5.0)
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has store schema {version}; this netstack reads up to {SCHEMA_VERSION}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA foreign_keys=ON")
            if version < SCHEMA_VERSION:
                db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;")
        except BaseException:
            db.close()
            raise
        self._db = db
        return db

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def call() -> T:
            try:
                return fn(self._open())
            except sqlite3.Error as e:
                if self._db is not None and self._db.in_transaction:
                    self._db.rollback()
                raise StoreError(f"sqlite store {self.path}: {e}") from e
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    @staticmethod
    def _write(db: sqlite3.Connection, fn: Callable[[], T]) -> T:
        db.execute("BEGIN IMMEDIATE")
        try:
            out = fn()
        except BaseException:
            db.rollback()
            raise
        db.commit()
        return out

    async def _register(self, proc: ProcessRecord) -> bool:
        def op(db: sqlite3.Connection) -> bool:
            def tx() -> bool:
                old = db.execute("SELECT address, host, registered_at FROM processes WHERE proc_id=?",
                                 (proc.proc_id,)).fetchone()
                if old is not None:
                    return not _same_process(ProcessRecord(proc.proc_id, *old), proc)
                db.execute("INSERT INTO processes VALUES (?, ?, ?, ?)",
                           (proc.proc_id, proc.address, proc.host, proc.registered_at))
                return True
            return self._write(db, tx)
        return await self._run(op)

    async def _get_process(self, proc_id: str) -> ProcessRecord | None:
        row = await self._run(lambda db: db.execute("SELECT * FROM processes WHERE proc_id=?", (proc_id,)).fetchone())
        return None if row is None else ProcessRecord(*row)

    async def _list_processes(self) -> list[ProcessRecord]:
        rows = await self._run(lambda db: db.execute("SELECT * FROM processes").fetchall())
        return [ProcessRecord(*r) for r in rows]

    @staticmethod
    def _failure(row: Sequence[Any]) -> FailureRecord:
        revision, proc_id, t_f, declared_at, reason = row
        return FailureRecord(proc_id, t_f, declared_at, reason, revision)

    async def _record_failure(self, rec: FailureRecord) -> bool:
        def op(db: sqlite3.Connection) -> bool:
            def tx() -> bool:
                if db.execute("SELECT 1 FROM processes WHERE proc_id=?", (rec.proc_id,)).fetchone() is None:
                    raise StoreError(f"failure of unknown process {rec.proc_id}")
                old = db.execute("SELECT * FROM failures WHERE proc_id=?", (rec.proc_id,)).fetchone()
                if old is not None:
                    return not _same_failure(self._failure(old), rec)
                db.execute("INSERT INTO failures (proc_id, t_f, declared_at, reason) VALUES (?, ?, ?, ?)",
                           (rec.proc_id, rec.t_f, rec.declared_at, rec.reason))
                return True
            return self._write(db, tx)
        return await self._run(op)

    async def _get_failure(self, proc_id: str) -> FailureRecord | None:
        row = await self._run(lambda db: db.execute("SELECT * FROM failures WHERE proc_id=?", (proc_id,)).fetchone())
        return None if row is None else self._failure(row)

    async def _list_failures(self) -> list[FailureRecord]:
        rows = await self._run(lambda db: db.execute("SELECT * FROM failures").fetchall())
        return [self._failure(r) for r in rows]

    async def _add_recall(self, rec: RecallRecord) -> bool:
        def op(db: sqlite3.Connection) -> bool:
            def tx() -> bool:
                for who in (rec.sender, rec.receiver):
                    if db.execute("SELECT 1 FROM processes WHERE proc_id=?", (who,)).fetchone() is None:
                        raise StoreError(f"recall names unknown process {who}")
                cur = db.execute("INSERT OR IGNORE INTO recalls VALUES (?, ?, ?, ?, NULL)",
                                 (rec.sender, rec.seq, rec.receiver, rec.created_at))
                return cur.rowcount == 1
            return self._write(db, tx)
        return await self._run(op)

    async def _list_recalls(self) -> list[RecallRecord]:
        rows = await self._run(lambda db: db.execute("SELECT * FROM recalls").fetchall())
        return [RecallRecord(*r) for r in rows]

    async def _resolve_recall(self, sender: str, seq: int, receiver: str, now: float) -> bool:
        def op(db: sqlite3.Connection) -> bool:
            def tx() -> bool:
                row = db.execute("SELECT resolved_at FROM recalls WHERE sender=? AND seq=? AND receiver=?",
                                 (sender, seq, receiver)).fetchone()
                if row is None:
                    raise StoreError(f"no recall of scattering ({sender}, {seq}) to {receiver}")
                if row[0] is not None:
                    return False
                db.execute("UPDATE recalls SET resolved_at=? WHERE sender=? AND seq=? AND receiver=?",
                           (now, sender, seq, receiver))
                return True
            return self._write(db, tx)
        return await self._run(op)

    async def _campaign(self, name: str, lease: _Lease) -> None:
        def try_take(db: sqlite3.Connection) -> bool:
            def tx() -> bool:
                now = time.time()
                row = db.execute("SELECT replica, expires_at FROM leaders WHERE name=?", (name,)).fetchone()
                if row is not None and row[0] != self.replica and row[1] > now:
                    return False
                db.execute("INSERT OR REPLACE INTO leaders VALUES (?, ?, ?)", (name, self.replica, now + lease.ttl_s))
                return True
            return self._write(db, tx)
        while not await self._run(try_take):
            await asyncio.sleep(self._poll_s)
        self._start_keepalive(name, lease)

    async def _refresh(self, name: str, lease: _Lease) -> bool:
        def op(db: sqlite3.Connection) -> bool:
            # only while still ours and unexpired: a lapsed lease may already be someone else's
            cur = db.execute("UPDATE leaders SET expires_at=? WHERE name=? AND replica=? AND expires_at>?",
                             (time.time() + lease.ttl_s, name, self.replica, time.time()))
            return cur.rowcount == 1
        return await self._run(op)

    async def _revoke(self, name: str, lease: _Lease) -> None:
        await self._run(lambda db: db.execute("DELETE FROM leaders WHERE name=? AND replica=?", (name, self.replica)))

    async def _leader(self, name: str) -> str | None:
        row = await self._run(lambda db: db.execute("SELECT replica FROM leaders WHERE name=? AND expires_at>?",
                                                    (name, time.time())).fetchone())
        return None if row is None else str(row[0])

    async def _close(self) -> None:
        def shut(db: sqlite3.Connection) -> None:
            db.close()
            self._db = None
        if self._db is not None:
            await self._run(shut)
        self._executor.shutdown(wait=True)


# ---------------------------------------------------------------------------------- etcd

class EtcdStore(_BaseStore):
    """The replicated backend: an etcd v3 cluster, ``endpoints`` as ``host:port`` (client URLs).

    One client connection at a time; when its member is unreachable the call moves to the next
    endpoint and is retried until ``op_timeout_s``. A retried write is safe, being a
    compare-and-write: if the first attempt did commit, the retry sees the record and returns
    ``False`` as for a duplicate.
    """

    def __init__(self, endpoints: Sequence[str], *, run: str = "default", replica: str | None = None,
                 op_timeout_s: float = 10.0, poll_s: float = 0.1) -> None:
        super().__init__(replica)
        import aetcd  # here, not at module import: the default SQLite store needs no gRPC
        self._aetcd = aetcd
        self.endpoints = [self._parse_endpoint(e) for e in endpoints]
        if not self.endpoints:
            raise StoreError("EtcdStore needs at least one endpoint")
        self.prefix = f"/netstack/onepipe/{_check_id('run', run)}/"
        self._op_timeout_s = op_timeout_s
        self._poll_s = poll_s
        self._current = 0
        self._client: Any = None

    @staticmethod
    def _parse_endpoint(endpoint: str) -> tuple[str, int]:
        host, _, port = str(endpoint).removeprefix("http://").rstrip("/").rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise StoreError(f"etcd endpoint {endpoint!r} is not host:port")
        return host, int(port)

    def _key(self, *parts: object) -> bytes:
        return (self.prefix + "/".join(str(p) for p in parts)).encode()

    async def _call(self, op: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``op(client)``, moving to the next member while the current one is unreachable."""
        errors = self._aetcd.exceptions
        deadline = time.monotonic() + self._op_timeout_s
        while True:
            if self._client is None:
                host, port = self.endpoints[self._current]
                self._client = self._aetcd.Client(host=host, port=port, timeout=2)
            try:
                return await op(self._client)
            except (errors.ConnectionFailedError, errors.ConnectionTimeoutError) as e:
                await self._disconnect()
                self._current = (self._current + 1) % len(self.endpoints)
                if time.monotonic() > deadline:
                    raise StoreError(f"etcd unreachable at {self.endpoints}: {e}") from e
                await asyncio.sleep(0.05)
            except errors.ClientError as e:
                raise StoreError(f"etcd: {e}") from e

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _get_json(self, key: bytes) -> tuple[dict[str, Any], int] | None:
        """The value at ``key`` decoded, with its create revision; None if absent."""
        got = await self._call(lambda c: c.get(key))
        return None if got is None else (json.loads(got.value), int(got.create_revision))

    async def _prefix_json(self, *parts: object) -> list[tuple[dict[str, Any], int]]:
        key = self._key(*parts) + b"/"
        got = await self._call(lambda c: c.get_prefix(key))
        return [(json.loads(kv.value), int(kv.create_revision)) for kv in got]

    async def _create(self, key: bytes, value: dict[str, Any], must_exist: Sequence[bytes] = ()) -> tuple[bool, Any]:
        """Put ``value`` at ``key`` if the key is absent and every ``must_exist`` key exists, in
        one transaction. Returns (written, responses): the put's, or the gets of key and must_exist."""
        async def txn(c: Any) -> tuple[bool, Any]:
            t = c.transactions
            compare = [t.create(key) == 0, *(t.version(k) > 0 for k in must_exist)]
            ok, responses = await c.transaction(compare=compare, success=[t.put(key, json.dumps(value).encode())],
                                                failure=[t.get(key), *(t.get(k) for k in must_exist)])
            return bool(ok), responses
        return await self._call(txn)

    async def _register(self, proc: ProcessRecord) -> bool:
        ok, responses = await self._create(self._key("processes", proc.proc_id), asdict(proc))
        return ok or not _same_process(ProcessRecord(**json.loads(responses[0][0][0])), proc)

    async def _get_process(self, proc_id: str) -> ProcessRecord | None:
        got = await self._get_json(self._key("processes", proc_id))
        return None if got is None else ProcessRecord(**got[0])

    async def _list_processes(self) -> list[ProcessRecord]:
        return [ProcessRecord(**v) for v, _ in await self._prefix_json("processes")]

    async def _record_failure(self, rec: FailureRecord) -> bool:
        value = {k: v for k, v in asdict(rec).items() if k != "revision"}
        ok, responses = await self._create(self._key("failures", rec.proc_id), value,
                                           [self._key("processes", rec.proc_id)])
        if ok:
            return True
        if not responses[1]:
            raise StoreError(f"failure of unknown process {rec.proc_id}")
        kv = responses[0][0]
        return not _same_failure(FailureRecord(**json.loads(kv[0]), revision=kv[1].create_revision), rec)

    async def _get_failure(self, proc_id: str) -> FailureRecord | None:
        got = await self._get_json(self._key("failures", proc_id))
        return None if got is None else FailureRecord(**got[0], revision=got[1])

    async def _list_failures(self) -> list[FailureRecord]:
        # the revision is etcd's create revision of the record: the cluster-wide write order
        return [FailureRecord(**v, revision=rev) for v, rev in await self._prefix_json("failures")]

    async def _add_recall(self, rec: RecallRecord) -> bool:
        ok, responses = await self._create(self._key("recalls", rec.sender, rec.seq, rec.receiver), asdict(rec),
                                           [self._key("processes", rec.sender), self._key("processes", rec.receiver)])
        if ok:
            return True
        for who, got in zip((rec.sender, rec.receiver), responses[1:], strict=True):
            if not got:
                raise StoreError(f"recall names unknown process {who}")
        return False

    async def _list_recalls(self) -> list[RecallRecord]:
        return [RecallRecord(**v) for v, _ in await self._prefix_json("recalls")]

    async def _resolve_recall(self, sender: str, seq: int, receiver: str, now: float) -> bool:
        key = self._key("recalls", sender, seq, receiver)
        while True:
            got = await self._call(lambda c: c.get(key))
            if got is None:
                raise StoreError(f"no recall of scattering ({sender}, {seq}) to {receiver}")
            value = json.loads(got.value)
            if value["resolved_at"] is not None:
                return False
            value["resolved_at"] = now
            mod = int(got.mod_revision)

            async def txn(c: Any, value: dict[str, Any] = value, mod: int = mod) -> bool:
                t = c.transactions
                put = t.put(key, json.dumps(value).encode())
                ok, _ = await c.transaction(compare=[t.mod(key) == mod], success=[put], failure=[])
                return bool(ok)
            if await self._call(txn):
                return True  # else someone changed it in between: read again

    async def _campaign(self, name: str, lease: _Lease) -> None:
        # etcd leases are whole seconds; a shorter TTL is rounded up (and etcd may raise it to its minimum)
        granted = await self._call(lambda c: c.lease(max(1, math.ceil(lease.ttl_s))))
        lease.lease_id = int(granted.id)
        self._start_keepalive(name, lease)  # the lease must outlive the wait, not only the lead
        key = self._key("election", name)

        async def txn(c: Any) -> bool:
            t = c.transactions
            ok, _ = await c.transaction(compare=[t.create(key) == 0],
                                        success=[t.put(key, self.replica.encode(), lease=lease.lease_id)], failure=[])
            return bool(ok)
        while not await self._call(txn):
            await asyncio.sleep(self._poll_s)

    async def _refresh(self, name: str, lease: _Lease) -> bool:
        reply = await self._call(lambda c: c.refresh_lease(lease.lease_id))
        return reply is not None and int(reply.TTL) > 0

    async def _revoke(self, name: str, lease: _Lease) -> None:
        if lease.lease_id:
            await self._call(lambda c: c.revoke_lease(lease.lease_id))  # deletes the election key with it

    async def _leader(self, name: str) -> str | None:
        got = await self._call(lambda c: c.get(self._key("election", name)))
        return None if got is None else bytes(got.value).decode()

    async def _close(self) -> None:
        await self._disconnect()
