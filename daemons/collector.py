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
  start: new QPNs, rkeys and PSNs, empty memory (``netstack/dta/persist.py``);
- connects the translator the topology declares for it (``[links.features.<end>] dta``,
  netstack/dta/topology.py) at start, before it answers on its control socket: its QPs bound to
  the translator, then ``dta_enable`` on the ToR's switch daemon (not when it restored its QPs:
  the translator it had stays in sequence);
- on SIGTERM/SIGINT (a clean stop: ``netstack down``): stops, closes the regions and deletes
  their files (``CollectorMemory.close(unlink=True)``) and its saved state, so nothing stays in
  /dev/shm and a later start is a fresh one.

A frame never kills it: the responder counts every drop, and anything unexpected is logged
and counted (``internal_errors``).

Default layout: netstack/dta/layout.py (override any part with ``--layout FILE`` or a
``"layout"`` object / path in the config; keys absent from the file keep their defaults,
``null`` removes a store).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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

from daemons.common import daemon_parser, run_daemon, serve_metrics
from headers.inet import ip_bytes, mac_bytes
from netstack.argtypes import non_negative_float, positive_int
from netstack.dta.collector import RoceResponder
from netstack.dta.control import DTAError, enable_declared
from netstack.dta.layout import LayoutError, load_layout
from netstack.dta.memory import CollectorMemory
from netstack.dta.persist import SavedState, open_collector
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

    async def connect_translator(self, decl: dict[str, Any]) -> None:
        """Connect the translator the topology declares (``[links.features] dta``,
        netstack/dta/topology.py): bind the QPs to it, then ``dta_enable`` on its switch with this
        collector's connect_info (``netstack.dta.control.enable_declared``), before this daemon
        answers on its control socket, so that it is on when ``netstack up`` returns. A failure is
        one log line: ``netstack dta enable`` can still connect it."""
        info = self.ctl_connect_info({})
        opts = decl.get("options") or {}
        try:
            self.ctl_bind({"ip": opts.get("ip"), "mac": opts.get("mac"),
                           "qps": {r["name"]: r["peer_qpn"] for r in info["regions"]}})
            out = await asyncio.to_thread(enable_declared, decl, info)
        except (ControlError, DTAError) as exc:
            log.error("collector %s: the translator the topology declares is not connected: %s", self.cfg["name"], exc)
            return
        log.info("collector %s: translator on %s/%s (%s) connected, as the topology declares", self.cfg["name"],
                 decl.get("switch"), out.get("port"), out.get("translator_ip"))

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
    """``{"collector": {"name", "ifname", "mac", "ip", "memory_dir", ["layout"], ["nak_policy"], ["translator"]}}``
    (``translator``: the one the topology declares, netstack.dta.control.declared_translator_config)."""
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
        if cfg.get("translator") and not restart["restored"]:  # (restored: the translator it had is in sequence)
            await shell.connect_translator(cfg["translator"])
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
