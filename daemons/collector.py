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
  trailers, socket drops), ``connect_info`` (the exchange standing in for RDMA_CM: per
  region QPN, peer QPN, rkey, base address, size, layout and the PSN the next request must
  carry, plus the collector's MAC/IP and ``memory_dir``), ``bind`` (the other half of that
  exchange: ``{"ip", "mac", "qps": {region: peer QPN}}`` connects those QPs to the
  translator, and requests from anyone else are then dropped unanswered; until the first
  ``bind`` a QP accepts nothing), ``layout`` (the layout in force);
- on SIGTERM/SIGINT: stops, closes the regions and deletes their files
  (``CollectorMemory.close(unlink=True)``), so nothing stays in /dev/shm.

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
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from daemons.common import daemon_parser, run_daemon
from headers.inet import ip_bytes, mac_bytes
from netstack.dta.collector import RoceResponder
from netstack.dta.memory import MANIFEST, CollectorMemory
from netstack.engine import Transmit
from netstack.io.control import ControlError, ControlServer
from netstack.io.packet import PacketPort

log = logging.getLogger("netstack.collector")

#: Frames drained per readiness callback (bounded, as in the switch daemon).
RX_BATCH = 256
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


# --------------------------------------------------------------------------- UDP 4791 guard


class PortGuard:
    """Keep the collector's kernel from answering RoCEv2 with ICMP port-unreachable."""

    def __init__(self) -> None:
        self.kind = "none"
        self.sock: socket.socket | None = None
        self.drained = 0

    def install(self, loop: asyncio.AbstractEventLoop, ip: str) -> str:
        rules = (f"table inet {NFT_TABLE} {{\n  chain input {{\n    type filter hook input priority 0; "
                 f"policy accept;\n    ip daddr {ip} udp dport {ROCE_PORT} counter drop\n  }}\n}}\n")
        try:
            subprocess.run(["nft", "-f", "-"], input=rules, text=True, check=True, capture_output=True, timeout=10)
            self.kind = "nft"
            return self.kind
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("nft unavailable (%s); binding a UDP socket on %d instead", exc, ROCE_PORT)
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
                subprocess.run(["nft", "delete", "table", "inet", NFT_TABLE], check=False, capture_output=True,
                               timeout=10)
        elif self.sock is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(self.sock.fileno())
            self.sock.close()
        self.kind = "none"


# --------------------------------------------------------------------------- the shell


class CollectorShell:
    def __init__(self, cfg: dict[str, Any], memory: CollectorMemory, nic: RoceResponder, port: PacketPort,
                 layout: dict[str, Any], guard: PortGuard) -> None:
        self.cfg = cfg
        self.memory = memory
        self.nic = nic
        self.port = port
        self.layout = layout
        self.guard = guard
        self.internal_errors = 0
        self.responses_sent = 0
        self.started_ns = time.monotonic_ns()

    def on_readable(self) -> None:
        try:
            frames = self.port.recv_batch(RX_BATCH)
        except OSError:
            self.internal_errors += 1
            return
        now = time.monotonic_ns()
        out: list[bytes] = []
        receive = self.nic.receive
        for frame in frames:
            try:
                out += receive(frame, now)
            except Exception:  # receive() never raises on content; this is a bug, never fatal
                self.internal_errors += 1
                if self.internal_errors <= 10:
                    log.exception("internal error on a frame")
        if self.nic.actions:  # the engine contract; the responder answers with return values only
            out += [a.data for a in self.nic.actions.take_all() if isinstance(a, Transmit)]
        if out:
            self.responses_sent += self.port.send_batch(out)

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
            "internal_errors": self.internal_errors,
            "responses_sent": self.responses_sent,
            "send_errors": self.port.send_errors,
            "tx_dropped": self.port.tx_dropped,
            "kernel_packets": self.port.kernel_packets,
            "kernel_drops": self.port.kernel_drops,
            "responder": self.nic.counters(),
            "regions": regions,
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
    directory = Path(cfg["memory_dir"])
    clean_memory_dir(directory)
    memory = CollectorMemory(cfg["name"], directory=directory)
    loop = asyncio.get_running_loop()
    guard = PortGuard()
    port: PacketPort | None = None
    control: ControlServer | None = None
    stats: asyncio.Task[None] | None = None
    try:
        build_memory(memory, layout)
        nic = RoceResponder(memory, mac_bytes(cfg["mac"]), ip_bytes(cfg["ip"]),
                            nak_policy=cfg.get("nak_policy", "once"))
        port = PacketPort(cfg["ifname"])
        guard.install(loop, cfg["ip"])
        shell = CollectorShell(cfg, memory, nic, port, layout, guard)
        loop.add_reader(port.fd, shell.on_readable)
        control = ControlServer(str(args.control), shell.handlers())
        await control.start()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        stats = asyncio.create_task(shell.poll_kernel_stats())
        log.info("collector %s up on %s (%s, %s): %d regions in %s, UDP 4791 guard: %s", cfg["name"],
                 cfg["ifname"], cfg["mac"], cfg["ip"], len(memory.regions), directory, guard.kind)
        await stop.wait()
        log.info("collector %s shutting down", cfg["name"])
    except (LayoutError, OSError, ValueError) as exc:
        log.error("collector %s cannot start: %s", cfg["name"], exc)
        return 1
    finally:
        if stats is not None:
            stats.cancel()
        if port is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(port.fd)
            port.close()
        guard.remove(loop)
        if control is not None:
            await control.close()
        memory.close(unlink=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = daemon_parser("python -m daemons.collector", __doc__, "collector")
    parser.add_argument("--layout", default=None, help="JSON layout file overriding the default stores")
    return run_daemon(parser.parse_args(argv), amain)


if __name__ == "__main__":
    sys.exit(main())
