"""The DTA collector daemon: a userspace RoCEv2 responder over shared-memory regions.

Runs inside the collector's namespace (``netstack up`` starts one per collector node)::

    python -m daemons.collector --config c1.json --control c1.sock [--layout layout.json]

What it does ("Direct Telemetry Access", §7.3; docs/dta.md, "The collector daemon"):

- registers memory regions (:class:`netstack.dta.memory.CollectorMemory`) as files under
  ``memory_dir`` (``/dev/shm/netstack-<prefix>-<node>``), with the default layout below
  unless a layout file says otherwise;
- answers RoCEv2 requests arriving on its interface with a
  :class:`netstack.dta.collector.RoceResponder` (the collector's RDMA NIC in software) read
  from an AF_PACKET :class:`netstack.io.packet.PacketPort`, so the CPU does no per-report
  work above that "NIC";
- tells the kernel not to answer UDP 4791 itself: the RoCEv2 frames are addressed to our IP,
  so without help the kernel would send an ICMP port-unreachable for every one. An nftables
  ``inet`` table in this namespace drops UDP 4791 at the input hook (after AF_PACKET has
  seen the frame; the table goes with the namespace). If ``nft`` is not usable, a UDP socket
  bound to 4791 takes the datagrams instead and is drained and ignored;
- serves its control socket: ``ping``, ``status`` (responder counters per QP, region
  trailers, socket drops, ``restart``: whether its QPs were restored, from which file, at
  which PSNs, or why not), ``connect_info`` (the exchange standing in for RDMA_CM: per
  region QPN, peer QPN, rkey, base address, size, layout and the PSN the next request must
  carry, plus the collector's MAC/IP and ``memory_dir``), ``bind`` (the other half of that
  exchange: ``{"ip", "mac", "qps": {region: peer QPN}}`` connects those QPs to the
  translator, and requests from anyone else are then dropped unanswered; until the first
  ``bind`` a QP accepts nothing), ``layout`` (the layout in force);
- keeps its RDMA identity across a crash (docs/dta.md, "Collector restart"): beside its
  config (the run directory) ``<config stem>.collector-state.json`` holds per region its rkey
  and base address and per QP its QPN, the peer's QPN and address (written atomically, mode
  0600, at start and at every ``bind``), and ``<config stem>.collector-psn`` each QP's expected
  PSN and MSN (a mapped page, updated after each batch of requests and before any of their
  responses leaves, so it is never behind what the translator was told). Started again over
  a state that matches its config, layout and region files (``netstack fault kill c1
  --restart``), it re-opens its region files with what they held and re-creates the same
  QPs expecting the saved PSNs: the translator's next request past them is NAK'd (to the bound
  peer only) and the translator resynchronises with a grace period (DTA §5.3). Anything else
  (no state, a malformed or foreign one, a region file missing) is one log line and a fresh
  start: new QPNs, rkeys and PSNs, empty memory;
- on SIGTERM/SIGINT (a clean stop: ``netstack down``): stops, closes the regions and deletes
  their files (``CollectorMemory.close(unlink=True)``) and its saved state, so nothing stays in
  /dev/shm and a later start is a fresh one.

A frame never kills it: the responder counts every drop, and anything unexpected is logged
and counted (``internal_errors``).

Default layout (override any part with ``--layout FILE`` or a ``"layout"`` object / path in
the config; keys absent from the file keep their defaults, ``null`` removes a store):

========================  =========================================================  ========
store                      geometry                                                   size
========================  =========================================================  ========
``keywrite``               65,536 slots x (4 B checksum + 4 B data), N <= 4           512 KiB
``append-1/2/4/8/16``      list id = batch size B (1, 2, 4, 8, 16), 65,536 x 4 B each  256 KiB each
``keyincrement``           65,536 little-endian u64 counters, N <= 4                  512 KiB
``sketch-1``               Count-Min, 4 rows x 256 columns, sum, reporters 1 and 2,   16 KiB
                           4 columns per WRITE, 4 epoch slots
========================  =========================================================  ========
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import logging
import mmap
import os
import random
import signal
import socket
import stat
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from daemons.common import daemon_parser, run_daemon, serve_metrics
from headers.inet import ip_bytes, mac_bytes
from netstack.argtypes import non_negative_float, positive_int
from netstack.dta.collector import DEFAULT_ACK_EVERY, QueuePair, RoceResponder
from netstack.dta.memory import MANIFEST, CollectorMemory
from netstack.engine import Transmit
from netstack.io.control import ControlError, ControlServer
from netstack.io.packet import PacketPort

log = logging.getLogger("netstack.collector")

#: Frames drained per readiness callback (bounded, as in the switch daemon).
RX_BATCH = 256
#: ``--ack-every`` default: AckReq WRITEs of one QP answered by one ACK within a receive batch. An
#: RC ACK covers every earlier PSN (IBTA vol. 1 ch. 9), so the translator's window moves as far
#: (DTA §5.3); every batch still ends with the owed ACKs, so none waits for later traffic.
DAEMON_ACK_EVERY = 16
#: ``--rx-holdoff-ms`` default (see :class:`CollectorShell`): off. Measured (netstack bench dta,
#: 2026-11-25): 4 ms cut c1's wake-ups under Append but made Key-Write N=4's sustained rate fall
#: from 9.3 k to 2.7 k reports/s (4 frames per report overflow the ring while it rests).
DAEMON_RX_HOLDOFF_MS = 0.0
STATS_INTERVAL_S = 1.0
ROCE_PORT = 4791
NFT_TABLE = "netstack_dta_collector"

#: The default memory layout (see the module docstring). Append list ids equal their batch size
#: so that one collector serves every batch size of the Fig. 10 experiment.
DEFAULT_LAYOUT: dict[str, Any] = {
    "keywrite": {"slots": 1 << 16, "data_words": 1, "checksum_bits": 32, "max_redundancy": 4,
                 "slot_hash": "crc32+mix"},
    "append": [{"list_id": b, "entries": 1 << 16, "batch": b} for b in (1, 2, 4, 8, 16)],
    "keyincrement": {"slots": 1 << 16, "max_redundancy": 4, "slot_hash": "crc32+mix"},
    "sketches": [{"sketch_id": 1, "rows": 4, "columns": 256, "merge": "sum", "reporters": [1, 2],
                  "batch_columns": 4, "epochs": 4}],
}
_LAYOUT_KEYS = frozenset(DEFAULT_LAYOUT)


class LayoutError(ValueError):
    """The layout file/object is unusable; the message says which part."""


def resolve_layout(override: dict[str, Any] | None) -> dict[str, Any]:
    """:data:`DEFAULT_LAYOUT` with the stores ``override`` gives replaced (``None`` removes one;
    for ``keywrite`` / ``keyincrement`` a dict is merged into the default's keys)."""
    layout = copy.deepcopy(DEFAULT_LAYOUT)
    if override is None:
        return layout
    if not isinstance(override, dict):
        raise LayoutError("the layout must be a JSON object")
    unknown = set(override) - _LAYOUT_KEYS
    if unknown:
        raise LayoutError(f"unknown layout keys {sorted(unknown)}; known: {sorted(_LAYOUT_KEYS)}")
    for key, value in override.items():
        if value is None:
            layout[key] = None
        elif key in ("keywrite", "keyincrement"):
            if not isinstance(value, dict):
                raise LayoutError(f"layout.{key} must be an object or null")
            layout[key] = {**DEFAULT_LAYOUT[key], **value}
        else:
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise LayoutError(f"layout.{key} must be a list of objects (or null)")
            layout[key] = value
    return layout


def build_memory(memory: CollectorMemory, layout: dict[str, Any]) -> None:
    """Register every store of ``layout`` in ``memory`` (LayoutError names the bad store)."""
    def add(what: str, fn: Any, spec: dict[str, Any]) -> None:
        try:
            fn(**spec)
        except (TypeError, ValueError) as exc:
            raise LayoutError(f"layout {what} {spec}: {exc}") from None

    if layout.get("keywrite"):
        add("keywrite", memory.add_keywrite, layout["keywrite"])
    for spec in layout.get("append") or []:
        add("append", memory.add_append_list, spec)
    if layout.get("keyincrement"):
        add("keyincrement", memory.add_keyincrement, layout["keyincrement"])
    for spec in layout.get("sketches") or []:
        add("sketch", memory.add_sketch, spec)
    if not memory.regions:
        raise LayoutError("the layout defines no store at all")


def load_layout(source: str | dict[str, Any] | None) -> dict[str, Any]:
    """A layout from a file path, an inline object or None (the default)."""
    if source is None or isinstance(source, dict):
        return resolve_layout(source)
    try:
        data = json.loads(Path(source).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise LayoutError(f"cannot read the layout file {source}: {exc}") from None
    return resolve_layout(data)


def clean_memory_dir(directory: Path) -> None:
    """Remove what a previous (killed) collector left: region files and the manifest only."""
    if not directory.is_dir():
        return
    for path in directory.iterdir():
        if path.suffix == ".mem" or path.name in (MANIFEST, f".{MANIFEST}.tmp"):
            with contextlib.suppress(OSError):
                path.unlink()


# --------------------------------------------------------------------------- the saved state

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


# --------------------------------------------------------------------------- UDP 4791 guard


class PortGuard:
    """Keep the collector's kernel from answering RoCEv2 with ICMP port-unreachable."""

    def __init__(self) -> None:
        self.kind = "none"
        self.sock: socket.socket | None = None
        self.drained = 0
        self.family = "inet"  # of the nft table, when kind is "nft"

    def install(self, loop: asyncio.AbstractEventLoop, ip: str, ifname: str | None = None) -> str:
        # replaced whole if a killed collector left it (else a restart would add its rule twice).
        # First choice: the interface's ingress hook (netdev family), which AF_PACKET taps precede
        # and which spares every RoCEv2 frame the IP input path (routing, INPUT hooks): that work
        # runs in the sender's context, the translator's switch, once per frame. Else the inet
        # input hook, as before.
        chains = []
        if ifname is not None:
            chains.append(("netdev", f"type filter hook ingress device \"{ifname}\" priority 0;"))
        chains.append(("inet", "type filter hook input priority 0;"))
        for family, hook in chains:
            rules = (f"table {family} {NFT_TABLE}\ndelete table {family} {NFT_TABLE}\n"
                     f"table {family} {NFT_TABLE} {{\n  chain {'ingress' if family == 'netdev' else 'input'} {{\n"
                     f"    {hook} policy accept;\n    ip daddr {ip} udp dport {ROCE_PORT} counter drop\n  }}\n}}\n")
            try:
                subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True, capture_output=True,
                               timeout=10)
                self.kind, self.family = "nft", family
                return self.kind
            except (OSError, subprocess.SubprocessError) as exc:
                log.warning("nft %s table unusable (%s)", family, exc)
        log.warning("nft unavailable; binding a UDP socket on %d instead", ROCE_PORT)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        self.sock.bind((ip, ROCE_PORT))
        self.sock.setblocking(False)
        loop.add_reader(self.sock.fileno(), self._drain)
        self.kind = "socket"
        return self.kind

    def _drain(self) -> None:
        assert self.sock is not None
        for _ in range(RX_BATCH):
            try:
                self.sock.recv(1)
            except OSError:  # BlockingIOError: drained
                return
            self.drained += 1

    def remove(self, loop: asyncio.AbstractEventLoop) -> None:
        if self.kind == "nft":
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(["nft", "delete", "table", self.family, NFT_TABLE], check=False, capture_output=True,
                               timeout=10)
        elif self.sock is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(self.sock.fileno())
            self.sock.close()
        self.kind = "none"


# --------------------------------------------------------------------------- the shell


class CollectorShell:
    def __init__(self, cfg: dict[str, Any], memory: CollectorMemory, nic: RoceResponder, port: PacketPort,
                 layout: dict[str, Any], guard: PortGuard, store: SavedState | None = None,
                 restart: dict[str, Any] | None = None, *, loop: asyncio.AbstractEventLoop | None = None,
                 holdoff_s: float = 0.0) -> None:
        self.cfg = cfg
        #: ``--rx-holdoff-ms``: after a drain that emptied the ring, stop watching it for this long
        #: (interrupt moderation, as a NIC's rx-usecs): frames queue in the ring meanwhile and the
        #: next drain takes them together, one wake-up for many instead of one each
        self.loop = loop
        self.holdoff_s = holdoff_s
        self.watching = True
        self.stopped = False
        self.wakeups = 0
        self.memory = memory
        self.nic = nic
        self.port = port
        self.layout = layout
        self.guard = guard
        self.store = store
        self.restart = restart or {"restored": False}
        self.internal_errors = 0
        self.responses_sent = 0
        self.started_ns = time.monotonic_ns()

    def on_readable(self) -> None:
        self.wakeups += 1
        try:
            frames = self.port.recv_batch(RX_BATCH)
        except OSError:
            self.internal_errors += 1
            return
        if not frames:
            return
        if self.holdoff_s > 0 and len(frames) < RX_BATCH and self.loop is not None:
            self.loop.remove_reader(self.port.fd)
            self.watching = False
            self.loop.call_later(self.holdoff_s, self._rearm)
        try:
            # the whole drain in one call: ACKs coalesced within it (--ack-every), no per-frame call from here
            out = self.nic.receive_batch(frames, time.monotonic_ns())
        except Exception:  # receive_batch() never raises on content; this is a bug, never fatal
            out = []
            self.internal_errors += 1
            if self.internal_errors <= 10:
                log.exception("internal error on a batch of frames")
        if self.nic.actions:  # the engine contract; the responder answers with return values only
            out += [a.data for a in self.nic.actions.take_all() if isinstance(a, Transmit)]
        if self.store is not None:  # the PSNs saved before any response tells the translator of them
            try:
                self.store.record()
            except Exception:
                self.internal_errors += 1
                if self.internal_errors <= 10:
                    log.exception("cannot record the expected PSNs")
        if out:
            self.responses_sent += self.port.send_batch(out)

    def _rearm(self) -> None:
        if not self.stopped and self.loop is not None and not self.watching:
            self.watching = True
            self.loop.add_reader(self.port.fd, self.on_readable)

    async def poll_kernel_stats(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.port.read_kernel_stats()
            await asyncio.sleep(STATS_INTERVAL_S)

    # --- control ---------------------------------------------------------------------
    def handlers(self) -> dict[str, Any]:
        return {
            "ping": lambda req: "pong",
            "status": self.ctl_status,
            "connect_info": self.ctl_connect_info,
            "bind": self.ctl_bind,
            "layout": lambda req: self.layout,
        }

    def ctl_connect_info(self, req: dict[str, Any]) -> dict[str, Any]:
        """The responder's connect_info, with each QP's *current* expected PSN as ``initial_psn``:
        every call stands for a fresh connection set-up, so a translator that (re)connects after
        traffic has flowed starts in sequence instead of looking like a stream of duplicates."""
        info = self.nic.connect_info()
        for entry in info["regions"]:
            entry["initial_psn"] = self.nic.qp(entry["name"]).epsn
        info["memory_dir"] = str(self.memory.directory)
        return info

    def ctl_bind(self, req: dict[str, Any]) -> dict[str, Any]:
        """Connect QPs to their peer, the translator (``netstack.dta.control.enable_translator``
        sends this before ``dta_enable``): ``{"ip", "mac", "qps": {region name: the
        translator's QPN}}``; ``qps`` absent binds every QP to the peer QPN connect_info
        proposed. A later ``bind`` replaces the peer (a translator replaced by another)."""
        ip, mac, qps = req.get("ip"), req.get("mac"), req.get("qps")
        if not isinstance(ip, str) or not isinstance(mac, str):
            raise ControlError("bind needs the translator's ip and mac as strings")
        if qps is not None and not isinstance(qps, dict):
            raise ControlError("qps must be an object {region name: the translator's QPN}")
        try:
            bound = self.nic.bind(mac, ip, qps)
        except ValueError as exc:
            raise ControlError(f"cannot bind: {exc}") from None
        log.info("QPs %s bound to the translator %s (%s)", ", ".join(bound), ip, mac)
        if self.store is not None:  # the peer is part of what a restart restores
            try:
                self.store.save_identity()
            except OSError as exc:
                log.error("cannot save the QPs' new peer in %s (%s): a restart would restore the old one",
                          self.store.path, exc)
        return {"bound": bound, "ip": ip, "mac": mac}

    def ctl_status(self, req: dict[str, Any]) -> dict[str, Any]:
        with contextlib.suppress(OSError):
            self.port.read_kernel_stats()
        regions = {}
        for name, r in self.memory.regions.items():
            regions[name] = {"kind": r.layout.get("kind"), "size": r.size, **r.trailer()}
        return {
            "collector": self.memory.name,
            "pid": os.getpid(),
            "uptime_s": (time.monotonic_ns() - self.started_ns) / 1e9,
            "ifname": self.port.ifname,
            "mac": self.cfg["mac"],
            "ip": self.cfg["ip"],
            "memory_dir": str(self.memory.directory),
            "udp4791_guard": self.guard.kind,
            "udp4791_guard_hook": (f"{self.guard.family} {'ingress' if self.guard.family == 'netdev' else 'input'}"
                                   if self.guard.kind == "nft" else None),
            "internal_errors": self.internal_errors,
            "responses_sent": self.responses_sent,
            "rx_wakeups": self.wakeups,
            "send_errors": self.port.send_errors,
            "tx_dropped": self.port.tx_dropped,
            "kernel_packets": self.port.kernel_packets,
            "kernel_drops": self.port.kernel_drops,
            "responder": self.nic.counters(),
            "regions": regions,
            "restart": self.restart,
        }


def load_config(path: Path) -> dict[str, Any]:
    """``{"collector": {"name", "ifname", "mac", "ip", "memory_dir", ["layout"], ["nak_policy"]}}``."""
    try:
        data = json.loads(path.read_text())
        cfg: dict[str, Any] = data["collector"]
        if not isinstance(cfg, dict):
            raise ValueError(f"collector must be an object, not {type(cfg).__name__}")
        for key in ("name", "ifname", "mac", "ip", "memory_dir"):
            if not isinstance(cfg.get(key), str):
                raise ValueError(f"collector.{key} must be a string")
        mac_bytes(cfg["mac"])
        ip_bytes(cfg["ip"])
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise SystemExit(f"collector daemon: bad config {path}: {exc}") from None
    return cfg


async def amain(args: argparse.Namespace) -> int:
    cfg = load_config(args.config)
    try:
        layout = load_layout(args.layout if args.layout is not None else cfg.get("layout"))
    except LayoutError as exc:
        log.error("%s", exc)
        return 1
    store = SavedState.beside(args.config)
    try:
        memory, nic, restart = open_collector(cfg, layout, store, args.ack_every)
    except (LayoutError, OSError, ValueError) as exc:
        log.error("collector %s cannot start: %s", cfg["name"], exc)
        return 1
    loop = asyncio.get_running_loop()
    guard = PortGuard()
    port: PacketPort | None = None
    shell: CollectorShell | None = None
    control: ControlServer | None = None
    metrics: asyncio.Server | None = None
    stats: asyncio.Task[None] | None = None
    try:
        port = PacketPort(cfg["ifname"])
        guard.install(loop, cfg["ip"], cfg["ifname"])
        shell = CollectorShell(cfg, memory, nic, port, layout, guard, store, restart, loop=loop,
                               holdoff_s=args.rx_holdoff_ms / 1000)
        loop.add_reader(port.fd, shell.on_readable)
        control = ControlServer(str(args.control), shell.handlers())
        await control.start()
        metrics = await serve_metrics(shell.handlers()["status"], {"node": cfg["name"]})
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        stats = asyncio.create_task(shell.poll_kernel_stats())
        log.info("collector %s up on %s (%s, %s): %d regions in %s (%s), UDP 4791 guard: %s", cfg["name"],
                 cfg["ifname"], cfg["mac"], cfg["ip"], len(memory.regions), memory.directory,
                 "restored" if restart["restored"] else "fresh", guard.kind)
        await stop.wait()
        log.info("collector %s shutting down", cfg["name"])
    except (LayoutError, OSError, ValueError) as exc:
        log.error("collector %s cannot start: %s", cfg["name"], exc)
        return 1
    finally:
        if stats is not None:
            stats.cancel()
        if shell is not None:
            shell.stopped = True
        if port is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(port.fd)
            port.close()
        guard.remove(loop)
        if control is not None:
            await control.close()
        if metrics is not None:
            metrics.close()
        memory.close(unlink=True)  # a clean stop deregisters everything: a later start is a fresh one
        store.remove()
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The daemon's command line (``python -m daemons.collector --help``)."""
    parser = daemon_parser("python -m daemons.collector", __doc__, "collector")
    parser.add_argument("--layout", default=None, help="JSON layout file overriding the default stores")
    parser.add_argument("--ack-every", type=positive_int("N"), default=DAEMON_ACK_EVERY, metavar="N",
                        help="ACK coalescing: answer up to N AckReq WRITEs of a queue pair with one ACK (for the "
                             "newest PSN, which acknowledges all before it); the owed ACK still leaves at the "
                             "end of each receive batch and before any NAK or ATOMIC ACKNOWLEDGE. 1 = one ACK "
                             f"per AckReq request (default: {DAEMON_ACK_EVERY})")
    parser.add_argument("--rx-holdoff-ms", type=non_negative_float("the hold-off", most=1000),
                        default=DAEMON_RX_HOLDOFF_MS, metavar="MS",
                        help="after a drain that emptied the receive ring, leave it alone for MS milliseconds so "
                             "that the next drain takes the frames that arrived meanwhile together (a NIC's "
                             "interrupt moderation; responses wait as long). 0 = drain on every arrival "
                             f"(default: {DAEMON_RX_HOLDOFF_MS:g})")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_daemon(build_parser().parse_args(argv), amain)


if __name__ == "__main__":
    sys.exit(main())
