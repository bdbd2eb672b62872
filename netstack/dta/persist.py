"""The DTA collector across a crash: its RDMA identity and expected PSNs saved beside its
config, and restored when it starts again (docs/dta.md "Collector restart").

A real collector NIC that reboots loses its QPs; here a restarted collector daemon can come
back as *the same* responder, so that the translator keeps its QPNs and rkeys and only
resynchronises its PSNs, through the NAK and grace period of "Direct Telemetry Access" §5.3:

- beside the config (the run directory) ``<config stem>.collector-state.json`` holds per region
  its rkey and base address and per QP its QPN, the peer's QPN and address (written atomically,
  mode 0600, at start and at every ``bind``), and ``<config stem>.collector-psn`` each QP's
  expected PSN and MSN (a mapped page, updated after each batch of requests and before any of
  their responses leaves, so it is never behind what the translator was told);
- started again over a state that matches its config, layout and region files, the collector
  re-opens its region files with what they held and re-creates the same QPs expecting the saved
  PSNs (:func:`open_collector`); anything else (no state, a malformed or foreign one, a region
  file missing) is one log line and a fresh start: new QPNs, rkeys and PSNs, empty memory;
- a clean stop removes the state (:meth:`SavedState.remove`), so a later start is a fresh one.

The daemon (``daemons/collector.py``) calls :func:`open_collector` at start,
:meth:`SavedState.record` after every receive batch, :meth:`SavedState.save_identity` after a
``bind`` and :meth:`SavedState.remove` when it stops. Log lines go to the daemon's logger.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import random
import stat
import struct
import zlib
from pathlib import Path
from typing import Any

from headers.inet import ip_bytes, mac_bytes

from .collector import DEFAULT_ACK_EVERY, QueuePair, RoceResponder
from .layout import build_memory
from .memory import MANIFEST, CollectorMemory

log = logging.getLogger("netstack.collector")


def clean_memory_dir(directory: Path) -> None:
    """Remove what a previous (killed) collector left: region files and the manifest only."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.suffix == ".mem" or path.name in (MANIFEST, f".{MANIFEST}.tmp"):
            with contextlib.suppress(OSError):
                path.unlink()




#: Beside the config (``<run dir>/<node>.json``): the identity, and the expected PSNs.
STATE_SUFFIX = ".collector-state.json"
PSN_SUFFIX = ".collector-psn"
STATE_FORMAT = "netstack-dta-collector-state"
STATE_VERSION = 1
#: What of the config a saved state must match to be this collector's.
IDENTITY_KEYS = ("name", "ifname", "mac", "ip", "memory_dir", "nak_policy")
_PSN_MAGIC = b"NSDTAPSN"
_PSN_HEADER = struct.Struct("<8sIIQ")  # magic, version, QP count, token (the identity file's)
_PSN_RECORD = struct.Struct("<Q")  # epsn | msn << 24 | check << 48, one per QP in the identity's order
_PSN_CHECKED = struct.Struct("<QIQ")  # token, QP index, epsn | msn << 24: what the 16-bit check covers


class StateError(ValueError):
    """A saved state that cannot be used; the message says why."""


def _psn_word(token: int, index: int, value: int) -> int:
    """One PSN record: ``value`` (epsn | msn << 24) and a check over it, its index and the token,
    so that a torn, stale or foreign record is caught."""
    return value | (zlib.crc32(_PSN_CHECKED.pack(token, index, value)) & 0xFFFF) << 48


def _json(value: Any) -> Any:
    """``value`` as it reads back from JSON (tuples become lists), for comparisons."""
    return json.loads(json.dumps(value))


def _write_private(path: Path, data: bytes) -> None:
    """``data`` into ``path`` atomically (a temporary file renamed over it), mode 0600."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _identity(cfg: dict[str, Any]) -> dict[str, Any]:
    return {k: cfg.get(k, "once") if k == "nak_policy" else cfg.get(k) for k in IDENTITY_KEYS}


def _expected_regions(cfg: dict[str, Any], layout: dict[str, Any]) -> list[Any]:
    """(name, size, access, layout) of every region ``layout`` makes, as saved in JSON."""
    probe = CollectorMemory(cfg["name"], directory=None)
    build_memory(probe, layout)
    out = _json([[r.name, r.size, sorted(r.access), r.layout] for r in probe.regions.values()])
    probe.close()
    return list(out)


class SavedState:
    """The collector's RDMA identity and expected PSNs, kept beside its config across a crash
    (module docstring). :meth:`load` reads and checks a saved state (StateError says why it
    cannot be used); :meth:`start` saves a fresh collector's, :meth:`resume` carries on with
    a restored one's; :meth:`record` (after each batch, before the responses are sent),
    :meth:`save_identity` (after a bind); :meth:`remove` at a clean stop."""

    def __init__(self, directory: Path, stem: str) -> None:
        self.path = directory / f"{stem}{STATE_SUFFIX}"
        self.psn_path = directory / f"{stem}{PSN_SUFFIX}"
        self.doc: dict[str, Any] = {}
        self._mm: mmap.mmap | None = None
        self._qps: list[QueuePair] = []
        self._last: list[int] = []
        self._nic: RoceResponder | None = None

    @classmethod
    def beside(cls, config: Path) -> SavedState:
        return cls(config.parent, config.stem)

    # ------------------------------------------------------------------ reading
    def load(self, cfg: dict[str, Any], layout: dict[str, Any]) -> dict[str, Any] | None:
        """The saved state (its ``qps`` with their saved ``epsn``/``msn``) if it is this
        collector's; None if there is none; StateError if it is unusable."""
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise StateError(f"{self.path} is not a regular file of ours that only we can write")
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StateError(f"cannot read it ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT or doc.get("version") != STATE_VERSION:
            raise StateError(f"not a version-{STATE_VERSION} {STATE_FORMAT} file")
        for key, kind in (("config", dict), ("layout", dict), ("regions", list), ("qps", list), ("token", int)):
            if not isinstance(doc.get(key), kind):
                raise StateError(f"its {key!r} is missing or not a {kind.__name__}")
        self._check_ours(doc, cfg, layout)
        doc["qps"] = self._read_psns(doc["token"], doc["qps"])
        return doc

    @staticmethod
    def _check_ours(doc: dict[str, Any], cfg: dict[str, Any], layout: dict[str, Any]) -> None:
        mine = _identity(cfg)
        for key in IDENTITY_KEYS:
            if doc["config"].get(key) != mine[key]:
                raise StateError(f"it is another collector's (its {key} is {doc['config'].get(key)!r}, "
                                 f"this collector's {mine[key]!r})")
        if doc["layout"] != _json(layout):
            raise StateError("it was saved for another memory layout")
        if not all(isinstance(r, dict) for r in doc["regions"]):
            raise StateError("its regions are not objects")
        saved = [[r.get("name"), r.get("size"), r.get("access"), r.get("layout")] for r in doc["regions"]]
        if saved != _expected_regions(cfg, layout):
            raise StateError("its regions are not the ones the layout makes")
        for r in doc["regions"]:
            if (not all(isinstance(r.get(k), int) and not isinstance(r.get(k), bool) for k in ("rkey", "base_va"))
                    or r.get("file") != f"{r['name']}.mem"):
                raise StateError(f"region {r['name']!r}: bad rkey, base_va or file")

    def _read_psns(self, token: int, qps: list[Any]) -> list[dict[str, Any]]:
        try:
            data = self.psn_path.read_bytes()
        except OSError as exc:
            raise StateError(f"cannot read the PSN page {self.psn_path} ({exc.strerror})") from None
        n = len(qps)
        if len(data) != _PSN_HEADER.size + n * _PSN_RECORD.size:
            raise StateError(f"the PSN page {self.psn_path} is {len(data)} bytes, not one record per QP")
        if _PSN_HEADER.unpack_from(data) != (_PSN_MAGIC, STATE_VERSION, n, token):
            raise StateError(f"the PSN page {self.psn_path} is not the state file's")
        out = []
        for i, entry in enumerate(qps):
            (word,) = _PSN_RECORD.unpack_from(data, _PSN_HEADER.size + i * _PSN_RECORD.size)
            value = word & 0xFFFF_FFFF_FFFF
            if not isinstance(entry, dict) or word != _psn_word(token, i, value):
                raise StateError(f"the PSN record of QP {i} is damaged")
            out.append({**entry, "epsn": value & 0xFFFFFF, "msn": value >> 24})
        return out

    # ------------------------------------------------------------------ writing
    def start(self, cfg: dict[str, Any], layout: dict[str, Any], memory: CollectorMemory,
              nic: RoceResponder) -> None:
        """Save a fresh collector's identity: a new PSN page first, then the identity naming it
        (a crash in between leaves no identity, so the next start is a fresh one too)."""
        token = random.SystemRandom().getrandbits(63)
        self.doc = {"format": STATE_FORMAT, "version": STATE_VERSION, "token": token, "config": _identity(cfg),
                    "layout": _json(layout), "regions": [r.describe() for r in memory.regions.values()],
                    "psn_file": self.psn_path.name, "qps": []}
        self._attach(nic)
        page = bytearray(_PSN_HEADER.pack(_PSN_MAGIC, STATE_VERSION, len(self._qps), token))
        for i, qp in enumerate(self._qps):
            page += _PSN_RECORD.pack(_psn_word(token, i, qp.epsn | qp.msn << 24))
        _write_private(self.psn_path, bytes(page))
        self._map()
        self.save_identity()

    def resume(self, doc: dict[str, Any], nic: RoceResponder) -> None:
        """Carry on with a restored collector's state (``doc`` from :meth:`load`)."""
        self.doc = {k: v for k, v in doc.items() if k != "qps"}
        self.doc["qps"] = []
        self._attach(nic)
        self._map()

    def _attach(self, nic: RoceResponder) -> None:
        self._nic = nic
        self._qps = [nic.qp(entry["name"]) for entry in nic.qp_state()]
        self._last = [qp.epsn | qp.msn << 24 for qp in self._qps]
        self.doc["qps"] = self._identity_qps()

    def _identity_qps(self) -> list[dict[str, Any]]:
        assert self._nic is not None
        return [{k: v for k, v in e.items() if k not in ("epsn", "msn")} for e in self._nic.qp_state()]

    def _map(self) -> None:
        fd = os.open(self.psn_path, os.O_RDWR | os.O_NOFOLLOW)
        try:
            self._mm = mmap.mmap(fd, _PSN_HEADER.size + len(self._qps) * _PSN_RECORD.size)
        finally:
            os.close(fd)

    def save_identity(self) -> None:
        """(Re)write the identity file: the regions, and the QPs with their current peers."""
        if self._nic is not None:
            self.doc["qps"] = self._identity_qps()
        _write_private(self.path, (json.dumps(self.doc, indent=1) + "\n").encode())

    def record(self) -> None:
        """Each QP's expected PSN and MSN into the PSN page, where they changed. Called after a
        batch was executed and before its responses are sent: a PSN the translator saw answered
        is never ahead of the saved one (else its NAK would be refused, docs/dta.md)."""
        mm = self._mm
        if mm is None:
            return
        token = self.doc["token"]
        last = self._last
        for i, qp in enumerate(self._qps):
            value = qp.epsn | qp.msn << 24
            if value != last[i]:
                last[i] = value
                _PSN_RECORD.pack_into(mm, _PSN_HEADER.size + i * _PSN_RECORD.size, _psn_word(token, i, value))

    def close(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def remove(self) -> None:
        """A clean stop, or a state that will not be used: the files go."""
        self.close()
        for path in (self.path, self.psn_path):
            with contextlib.suppress(OSError):
                path.unlink()


def restore_collector(cfg: dict[str, Any], saved: dict[str, Any],
                      ack_every: int = DEFAULT_ACK_EVERY) -> tuple[CollectorMemory, RoceResponder]:
    """The memory and responder of a collector restarting over ``saved`` (:meth:`SavedState.load`):
    its region files re-opened with what they hold, under the same rkeys and base addresses, and
    the same QPs expecting the saved PSNs. StateError (nothing kept open) if it cannot be done."""
    memory = CollectorMemory(cfg["name"], directory=Path(cfg["memory_dir"]))
    try:
        for r in saved["regions"]:
            memory.add_region(r["name"], r["size"], r["access"], r["layout"], rkey=r["rkey"], base_va=r["base_va"],
                              keep=True)
        nic = RoceResponder(memory, mac_bytes(cfg["mac"]), ip_bytes(cfg["ip"]),
                            nak_policy=cfg.get("nak_policy", "once"), qps=saved["qps"], ack_every=ack_every)
    except (KeyError, TypeError, ValueError) as exc:
        memory.close()
        raise StateError(str(exc)) from None
    return memory, nic


def open_collector(cfg: dict[str, Any], layout: dict[str, Any], store: SavedState,
                   ack_every: int = DEFAULT_ACK_EVERY) -> tuple[CollectorMemory, RoceResponder, dict[str, Any]]:
    """The collector's memory and responder: restored from ``store`` when it holds this
    collector's state, else fresh (one log line says which, and why). Returns them and what
    ``status`` reports under ``restart``. LayoutError/OSError if even a fresh start fails.
    ``ack_every``: the responder's ACK coalescing (``--ack-every``)."""
    name = cfg["name"]
    fresh = "a fresh start: new QPNs, rkeys and PSNs, empty memory"
    info: dict[str, Any] = {"restored": False, "state_file": str(store.path), "reason": None}
    try:
        saved = store.load(cfg, layout)
        if saved is None:
            info["reason"] = "no saved state"
            log.info("collector %s: no saved state in %s: %s", name, store.path, fresh)
        else:
            memory, nic = restore_collector(cfg, saved, ack_every)
            store.resume(saved, nic)
            info.update(restored=True, epsn={q["name"]: q["epsn"] for q in saved["qps"]})
            held = {k: sum(r.trailer()[k] for r in memory.regions.values()) for k in ("writes", "atomics")}
            log.info("collector %s restored from %s: %d QPs with their QPNs, rkeys and peers, expecting PSNs %s; "
                     "memory kept (%d WRITEs and %d atomics executed before)", name, store.path, len(nic.qps),
                     ", ".join(f"{k}={v}" for k, v in info["epsn"].items()), held["writes"], held["atomics"])
            return memory, nic, info
    except StateError as exc:
        info["reason"] = f"refused: {exc}"
        log.warning("collector %s: refusing the saved state %s: %s; %s", name, store.path, exc, fresh)
    store.remove()
    clean_memory_dir(Path(cfg["memory_dir"]))
    memory = CollectorMemory(name, directory=Path(cfg["memory_dir"]))
    try:
        build_memory(memory, layout)
        nic = RoceResponder(memory, mac_bytes(cfg["mac"]), ip_bytes(cfg["ip"]),
                            nak_policy=cfg.get("nak_policy", "once"), ack_every=ack_every)
        store.start(cfg, layout, memory, nic)
    except BaseException:
        memory.close(unlink=True)
        store.remove()
        raise
    return memory, nic, info


__all__ = ["IDENTITY_KEYS", "PSN_SUFFIX", "STATE_FORMAT", "STATE_SUFFIX", "STATE_VERSION", "SavedState", "StateError",
           "clean_memory_dir", "open_collector", "restore_collector"]
