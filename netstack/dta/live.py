"""DTA on the live testbed: the translator inside a running switch daemon, the orchestration that
connects it to a collector daemon, and the reporter tool run inside host namespaces.

Switch side (loaded by ``daemons.switch`` through ``SWITCH_PLUGINS``)
    :func:`switch_handlers` adds three control commands to every switch daemon:

    - ``dta_enable``: ``{"port": collector-facing port, "connect_info": {...}, ["ip"], options}``
      builds a :class:`~netstack.dta.translator.DTATranslator` and attaches a
      :class:`~netstack.dta.translator.TranslatorFeature` to the running switch (an
      enabled translator is replaced). Options: ``grace_reports`` (default 1000) or
      ``grace_ms``; ``append_flush_ms`` (default 1; ``null`` = never flush idle Append
      batches, the public behaviour); ``max_redundancy``; ``ack_every``; ``track_seqnum``;
      ``sketch_nack_holdoff_ms``; ``udp_sport``; ``cls`` (egress class of the RoCEv2 frames).
      The translator's MAC is the collector-facing port's MAC; its IP (the source of the
      RoCEv2 requests and destination of the collector's ACK/NAKs) need not be routable.
    - ``dta_disable``: detach it (buffered Append entries that were never written are lost,
      as when a real translator is reprogrammed).
    - ``dta_status``: the translator's counters, PSNs, list heads, sketch progress.

Orchestration (any process with the run state, e.g. the CLI and tests)
    :func:`enable_translator` reads the collector daemon's ``connect_info`` (the stand-in for
    RDMA_CM, §7.2.1) and sends ``dta_enable`` to the collector's ToR, on the port that
    ``state.json`` says faces the collector. :func:`disable_translator`,
    :func:`translator_status`, :func:`collector_status`, :func:`memory_dir`.

Reporter tool (run inside a host namespace; what ``netstack dta report`` executes)::

    ip netns exec ns-h1 python -m netstack.dta.live report keywrite --dst 10.0.0.100 --key 1 --value 7
    ... report append --list 4 --value 100 --count 10 --rate 1000
    ... report increment --key 7 --by 1 --count 100
    ... report sketch --sketch-id 1 --reporter-id 1 --rows 4 --columns 256 --random 1000 --seed 1

Real UDP datagrams to the collector's IP, port 40040 (source port 40041), paced at
``--rate`` reports/s (0 = as fast as the socket takes them), or for ``--duration`` seconds
cycling through ``--count`` distinct reports. Sketch-Merge streams one column per report and
listens on UDP 40044 for the translator's NACKs, rewinding to the column a NACK asks for
(:class:`~netstack.dta.reporter.SketchReporter`). The last line of stdout is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import random
import socket
import sys
import time
from typing import Any

from headers.registry import UdpPort

from .reporter import CountMinSketch, Reporter, SketchReporter

#: Switch-side options of ``dta_enable`` -> (TranslatorConfig field, scale to ns or None).
_MS = 1_000_000
TRANSLATOR_OPTIONS = {
    "grace_reports": ("grace_reports", None),
    "grace_ms": ("grace_ns", _MS),
    "append_flush_ms": ("append_flush_ns", _MS),
    "max_redundancy": ("max_redundancy", None),
    "ack_every": ("ack_every", None),
    "track_seqnum": ("track_seqnum", None),
    "sketch_nack_holdoff_ms": ("sketch_nack_holdoff_ns", _MS),
    "udp_sport": ("udp_sport", None),
}
NOT_ENABLED = "DTA is not enabled on this switch: netstack dta enable"


# =========================================================================== switch daemon side


class TranslatorControl:
    """The DTA translator of one switch daemon, driven over its control socket."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.feature: Any = None
        self.settings: dict[str, Any] = {}

    def handlers(self) -> dict[str, Any]:
        return {"dta_enable": self.enable, "dta_disable": self.disable, "dta_status": self.status}

    def enable(self, req: dict[str, Any]) -> dict[str, Any]:
        from headers.inet import ip_bytes, mac_str

        from ..io.control import ControlError
        from ..switch.config import derived_mac
        from .translator import DTATranslator, TranslatorConfig, TranslatorFeature

        switch = self.shell.switch
        port = req.get("port")
        names = [p.name for p in switch.ports]
        if port not in names:
            raise ControlError(f"no port {port!r}; ports: {names}")
        info = req.get("connect_info")
        if not isinstance(info, dict):
            raise ControlError("connect_info (the collector's, from its daemon's connect_info) is required")
        kwargs: dict[str, Any] = {}
        for key, (field, scale) in TRANSLATOR_OPTIONS.items():
            if key in req:
                value = req[key]
                if scale is not None and value is not None:
                    if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                        raise ControlError(f"{key}={value!r} must be a non-negative number or null")
                    value = round(value * scale)
                kwargs[field] = value
        if "grace_ns" in kwargs and "grace_reports" not in kwargs:
            kwargs["grace_reports"] = None  # a time-based grace period replaces the default count
        cls = req.get("cls", 0)
        if not isinstance(cls, int) or not 0 <= cls <= 7:
            raise ControlError(f"cls={cls!r} must be a traffic class 0..7")
        mac = switch.config.port(port).mac or derived_mac(switch.config.name, port)
        try:
            ip = req.get("ip") or default_translator_ip(info["ip"])
            ip_bytes(ip)
            config = TranslatorConfig(info, mac, ip, **kwargs)
            translator = DTATranslator(config)
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlError(f"cannot enable the DTA translator on {port}: {exc}") from None
        replaced = self.feature is not None
        if replaced:
            self.feature.detach()
        now = time.monotonic_ns()
        translator.now = now
        self.feature = TranslatorFeature(switch, port, translator, cls=cls)
        self.settings = {"port": port, "translator_mac": mac_str(mac), "translator_ip": ip, "cls": cls,
                         "collector": translator.collector, "collector_ip": info["ip"],
                         "collector_mac": info["mac"], "enabled_at": time.time(),
                         "config": {k: getattr(config, k) for k in (
                             "grace_reports", "grace_ns", "append_flush_ns", "max_redundancy", "ack_every",
                             "track_seqnum", "sketch_nack_holdoff_ns", "udp_sport")},
                         "regions": [r.get("name") for r in info.get("regions", [])]}
        self.shell.flush()
        import logging

        logging.getLogger("netstack.switch").info("DTA translator %s on %s for collector %s (%s)",
                                                  "replaced" if replaced else "enabled", port,
                                                  translator.collector, info["ip"])
        return {**self.settings, "replaced": replaced}

    def disable(self, req: dict[str, Any]) -> dict[str, Any]:
        if self.feature is None:
            return {"enabled": False, "was_enabled": False}
        self.feature.detach()
        final = self.feature.translator.counters()
        self.feature = None
        settings, self.settings = self.settings, {}
        self.shell.flush()
        return {"enabled": False, "was_enabled": True, "port": settings.get("port"), "counters": final}

    def status(self, req: dict[str, Any]) -> dict[str, Any]:
        from ..io.control import ControlError

        if self.feature is None:
            if req.get("quiet"):
                return {"enabled": False}
            raise ControlError(NOT_ENABLED)
        port = self.settings["port"]
        pc = self.shell.switch.counters().get(port, {})
        return {"enabled": True, **self.settings, "enqueue_drops": self.feature.enqueue_drops,
                "in_grace": self.feature.translator.in_grace,
                "port_counters": {k: pc.get(k) for k in ("tx_frames", "tx_bytes", "rx_frames", "queue_drops",
                                                         "kernel_drops", "feature_consumed")},
                "counters": self.feature.translator.counters()}


def switch_handlers(shell: Any) -> dict[str, Any]:
    """Control commands this module adds to a switch daemon (``daemons.switch.SWITCH_PLUGINS``)."""
    return TranslatorControl(shell).handlers()


def default_translator_ip(collector_ip: str) -> str:
    """An address for the translator when none is given: the collector's /24 with host .254
    (.253 if that is the collector). It only has to be an address nobody else uses."""
    a = ipaddress.IPv4Address(collector_ip).packed
    last = 254 if a[3] != 254 else 253
    return str(ipaddress.IPv4Address(a[:3] + bytes([last])))


# =========================================================================== orchestration


class DTAError(RuntimeError):
    """A DTA operation on the running testbed failed; the message says what to do."""


def _state(prefix: str) -> dict[str, Any]:
    from ..runtime import RuntimeErrorNS, load_state

    try:
        return load_state(prefix)
    except RuntimeErrorNS as exc:
        raise DTAError(str(exc)) from None


def _daemon_kinds(state: dict[str, Any]) -> dict[str, str]:
    return {d["node"]: d["kind"] for d in state.get("daemons", [])}


def _control(prefix: str, node: str, cmd: str, **args: Any) -> Any:
    from ..io.control import ControlError
    from ..runtime import RuntimeErrorNS, control

    try:
        return control(prefix, node, cmd, **args)
    except (RuntimeErrorNS, ControlError) as exc:
        raise DTAError(str(exc)) from None
    except OSError as exc:
        raise DTAError(f"the daemon of {node} does not answer ({exc}); is the topology up? "
                       f"('netstack status --prefix {prefix}')") from None


def check_collector(state: dict[str, Any], collector: str) -> None:
    kinds = _daemon_kinds(state)
    if kinds.get(collector) != "collector":
        collectors = [n for n, k in kinds.items() if k == "collector"]
        raise DTAError(f"no collector daemon runs on {collector!r} (collectors: {', '.join(collectors) or 'none'})")


def check_switch(state: dict[str, Any], switch: str) -> None:
    kinds = _daemon_kinds(state)
    if kinds.get(switch) != "switch":
        switches = [n for n, k in kinds.items() if k == "switch"]
        raise DTAError(f"{switch!r} is not a switch of this topology (switches: {', '.join(switches)})")


def collector_tor(state: dict[str, Any], collector: str) -> str:
    """The switch the collector hangs off (its ToR, where the translator belongs)."""
    kinds = _daemon_kinds(state)
    for p in state["ports"]:
        if p["node"] == collector and kinds.get(p["peer"]) == "switch":
            return p["peer"]
    raise DTAError(f"{collector!r} is not attached to any switch")


def collector_port(state: dict[str, Any], switch: str, collector: str) -> str:
    """The port of ``switch`` that faces ``collector`` (from state.json "ports")."""
    for p in state["ports"]:
        if p["node"] == switch and p["peer"] == collector:
            return p["ifname"]
    tor = [p["peer"] for p in state["ports"] if p["node"] == collector]
    raise DTAError(f"{switch} has no port facing {collector} (the translator runs on the collector's ToR: "
                   f"{', '.join(tor) or 'none'}; use --switch {tor[0] if tor else '...'})")


def collector_ip(state: dict[str, Any], collector: str) -> str:
    try:
        return str(ipaddress.ip_interface(state["hosts"][collector]).ip)
    except KeyError:
        raise DTAError(f"{collector!r} has no IP address in this topology") from None


def translator_ip(state: dict[str, Any], collector: str) -> str:
    """The highest address of the collector's subnet that no node uses."""
    iface = ipaddress.ip_interface(state["hosts"][collector])
    used = {ipaddress.ip_interface(v).ip for v in state["hosts"].values()}
    net = iface.network
    if net.num_addresses < 4:
        return default_translator_ip(str(iface.ip))
    addr = net.broadcast_address - 1
    while addr > net.network_address:
        if addr not in used:
            return str(addr)
        addr -= 1
    return default_translator_ip(str(iface.ip))


def enable_translator(prefix: str, switch_node: str | None = "sw2", collector_node: str = "c1",
                      **options: Any) -> dict[str, Any]:
    """Connect ``switch_node``'s translator to ``collector_node``'s daemon: fetch its
    connect_info and send ``dta_enable`` on the port facing it. ``switch_node=None`` picks the
    collector's ToR. ``options``: see :data:`TRANSLATOR_OPTIONS` (and ``cls``, ``ip``)."""
    state = _state(prefix)
    check_collector(state, collector_node)
    if switch_node is None:
        switch_node = collector_tor(state, collector_node)
    check_switch(state, switch_node)
    port = collector_port(state, switch_node, collector_node)
    info = _control(prefix, collector_node, "connect_info")
    options.setdefault("ip", translator_ip(state, collector_node))
    result = _control(prefix, switch_node, "dta_enable", port=port, connect_info=info, **options)
    return {"switch": switch_node, "collector_node": collector_node, "memory_dir": info.get("memory_dir"), **result}


def disable_translator(prefix: str, switch_node: str = "sw2") -> dict[str, Any]:
    state = _state(prefix)
    check_switch(state, switch_node)
    return _control(prefix, switch_node, "dta_disable")


def translator_status(prefix: str, switch_node: str = "sw2", *, quiet: bool = False) -> dict[str, Any]:
    """The switch's ``dta_status``; DTAError("DTA is not enabled ...") unless ``quiet``."""
    state = _state(prefix)
    check_switch(state, switch_node)
    st = _control(prefix, switch_node, "dta_status", quiet=True)
    if not st.get("enabled") and not quiet:
        raise DTAError(f"DTA is not enabled on {switch_node}: netstack dta enable"
                       + (f" --prefix {prefix}" if prefix != "ns" else ""))
    return st


def collector_status(prefix: str, collector_node: str = "c1") -> dict[str, Any]:
    state = _state(prefix)
    check_collector(state, collector_node)
    return _control(prefix, collector_node, "status")


def connect_info(prefix: str, collector_node: str = "c1") -> dict[str, Any]:
    state = _state(prefix)
    check_collector(state, collector_node)
    return _control(prefix, collector_node, "connect_info")


def memory_dir(prefix: str, collector_node: str = "c1") -> str:
    """Where the collector's regions live (asked from the daemon, else its config file)."""
    from ..runtime import run_dir

    state = _state(prefix)
    check_collector(state, collector_node)
    with contextlib.suppress(DTAError):
        return _control(prefix, collector_node, "status")["memory_dir"]
    try:
        return json.loads((run_dir(prefix) / f"{collector_node}.json").read_text())["collector"]["memory_dir"]
    except (OSError, ValueError, KeyError):
        raise DTAError(f"cannot find the memory of collector {collector_node}: its daemon does not answer") from None


def region_layout(info: dict[str, Any], kind: str, **match: Any) -> dict[str, Any] | None:
    """The layout of the first region of ``kind`` in a connect_info whose layout matches."""
    for r in info.get("regions", []):
        lay = r.get("layout") or {}
        if lay.get("kind") == kind and all(lay.get(k) == v for k, v in match.items()):
            return lay
    return None


# =========================================================================== reporter tool


def sketch_items(seed: int, count: int, keys: int) -> list[int]:
    """``count`` keys drawn from ``1..keys`` (a reproducible flow trace for a Count-Min sketch)."""
    rng = random.Random(seed)
    return [rng.randint(1, keys) for _ in range(count)]


def parse_items(text: str) -> dict[int, int]:
    """``"KEY[:COUNT],..."`` -> {key: count}."""
    out: dict[int, int] = {}
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        key, _, count = part.partition(":")
        try:
            k, c = int(key, 0), int(count or "1", 0)
        except ValueError:
            raise ValueError(f"--items: {part!r} is not KEY or KEY:COUNT") from None
        if not 0 <= k <= 0xFFFFFFFF or c < 0:
            raise ValueError(f"--items: {part!r}: keys are 32-bit, counts >= 0")
        out[k] = out.get(k, 0) + c
    return out


def build_sketch(args: argparse.Namespace) -> CountMinSketch:
    cms = CountMinSketch(args.rows, args.columns)
    if args.items:
        for key, count in parse_items(args.items).items():
            cms.add(key, count)
    if args.random:
        for key in sketch_items(args.seed, args.random, args.keys):
            cms.add(key)
    return cms


def _wait_neighbour(dst: str, timeout: float = 1.0) -> bool:
    """Resolve the collector's MAC before the timed part (an unresolved neighbour queues only a
    few datagrams and drops the rest): poke it with a datagram to the discard port and watch
    /proc/net/arp of this namespace."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                probe.sendto(b"", (dst, 9))
            with contextlib.suppress(OSError), open("/proc/net/arp") as f:
                for line in f.readlines()[1:]:
                    cols = line.split()
                    if len(cols) >= 3 and cols[0] == dst and int(cols[2], 16) & 0x2:
                        return True
            time.sleep(0.01)
        return False
    finally:
        probe.close()


def _socket(sport: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    try:
        s.bind(("0.0.0.0", sport))
    except OSError:
        s.bind(("0.0.0.0", 0))  # another reporter holds the public source port: any port works
    return s


def _payloads(args: argparse.Namespace, reporter: Reporter) -> list[bytes]:
    n = args.count
    if args.kind == "keywrite":
        return [reporter.key_write((args.key + i) & 0xFFFFFFFF, (args.value + i) & 0xFFFFFFFF, args.redundancy)
                for i in range(n)]
    if args.kind == "append":
        return [reporter.append(args.list, (args.value + i) & 0xFFFFFFFF) for i in range(n)]
    keys = max(1, args.keys)
    return [reporter.key_increment((args.key + i % keys) & 0xFFFFFFFF, args.by, args.redundancy) for i in range(n)]


def _send_paced(sock: socket.socket, dst: tuple[str, int], payloads: list[bytes], rate: float,
                duration: float | None) -> dict[str, Any]:
    """Send ``payloads`` in order at ``rate``/s (0: as fast as possible); with ``duration``,
    cycle through them for that many seconds instead of sending each once."""
    sendto = sock.sendto
    n = len(payloads)
    total = None if duration else n
    sent = retries = 0
    clock = time.perf_counter
    started = time.monotonic()
    t0 = clock()
    end = t0 + duration if duration else None
    while True:
        now = clock()
        if end is not None and now >= end:
            break
        if total is not None and sent >= total:
            break
        if rate:
            due = int((now - t0) * rate) + 1 - sent
            if due <= 0:
                time.sleep(min(0.001, (sent - (now - t0) * rate) / rate))
                continue
            burst = min(due, 256)
        else:
            burst = 256
        if total is not None:
            burst = min(burst, total - sent)
        for _ in range(burst):
            try:
                sendto(payloads[sent % n], dst)
            except OSError:  # ENOBUFS and friends: back off a little, resend the same report
                retries += 1
                time.sleep(0.0002)
                break
            sent += 1
    elapsed = clock() - t0
    return {"sent": sent, "seconds": elapsed, "offered_rate": sent / elapsed if elapsed > 0 else 0.0,
            "send_retries": retries, "started_monotonic": started, "ended_monotonic": time.monotonic()}


def _report_sketch(args: argparse.Namespace, sock: socket.socket, dst: tuple[str, int]) -> dict[str, Any]:
    cms = build_sketch(args)
    nack_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        nack_sock.bind(("0.0.0.0", UdpPort.DTA_NACK))
    except OSError as exc:
        raise SystemExit(f"dta report sketch: cannot listen for NACKs on UDP {UdpPort.DTA_NACK} ({exc}); "
                         "is another sketch reporter running in this namespace?") from None
    nack_sock.setblocking(False)
    reporter = Reporter()
    sr = SketchReporter(reporter, args.reporter_id, args.sketch_id, args.rows, args.columns,
                        probe_interval_ns=int(args.probe_ms * _MS), probes=args.probes)
    sr.epoch = args.epoch - 1  # start_epoch() moves on to the next one
    clock = time.monotonic_ns
    sr.start_epoch(cms.matrix, clock())
    nacks = 0
    sent = 0
    t0 = clock()
    deadline = t0 + int(args.timeout * 1e9)
    linger_until: int | None = None
    try:
        while True:
            now = clock()
            if now > deadline:
                raise SystemExit(f"dta report sketch: not done after {args.timeout:g} s "
                                 f"({sr.columns_sent} columns sent, {nacks} NACKs)")
            while True:
                try:
                    data = nack_sock.recv(64)
                except (BlockingIOError, InterruptedError):
                    break
                nacks += 1
                sr.on_nack(data, now)
                linger_until = None
            if args.rate:
                budget = int((now - t0) / 1e9 * args.rate) + 1 - sent
            else:
                budget = 64
            out = sr.poll(now, max(0, budget)) if budget > 0 else []
            out += sr.on_timer(now)
            for p in out:
                with contextlib.suppress(OSError):
                    sock.sendto(p, dst)
                sent += 1
            if sr.done:
                if linger_until is None:
                    linger_until = now + int(args.linger_ms * _MS)
                elif now >= linger_until:
                    break
            if not out:
                time.sleep(0.0005)
    finally:
        nack_sock.close()
    elapsed = (clock() - t0) / 1e9
    return {"sent": sent, "columns_sent": sr.columns_sent, "rewinds": sr.rewinds, "nacks": nacks,
            "epoch": sr.epoch, "seconds": elapsed, "matrix": cms.matrix,
            "total": sum(cms.matrix[0])}


def _report_main(args: argparse.Namespace) -> int:
    if args.cpu is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, {args.cpu})
    dst = (args.dst, UdpPort.DTA)
    resolved = _wait_neighbour(args.dst)
    sock = _socket(args.sport)
    result: dict[str, Any] = {"tool": "dta-report", "kind": args.kind, "dst": args.dst,
                              "sport": sock.getsockname()[1], "neighbour_resolved": resolved}
    try:
        if args.kind == "sketch":
            result.update(_report_sketch(args, sock, dst))
        else:
            payloads = _payloads(args, Reporter())
            if not args.quiet:
                what = f"for {args.duration:g} s" if args.duration else str(len(payloads))
                print(f"sending {what} {args.kind} reports to {args.dst}:{UdpPort.DTA}", file=sys.stderr, flush=True)
            result.update(_send_paced(sock, dst, payloads, args.rate, args.duration))
    finally:
        sock.close()
    print(json.dumps(result), flush=True)
    return 0


def report_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Arguments of the reporter tool (shared with ``netstack dta report``'s help)."""
    p = parser or argparse.ArgumentParser(prog="python -m netstack.dta.live report")
    p.add_argument("kind", choices=["keywrite", "append", "increment", "sketch"])
    p.add_argument("--dst", required=True, help="the collector's IP")
    p.add_argument("--key", type=lambda s: int(s, 0), default=1, help="(first) key")
    p.add_argument("--value", type=lambda s: int(s, 0), default=1, help="(first) 32-bit data value")
    p.add_argument("--list", type=int, default=4, help="Append list id")
    p.add_argument("--by", type=int, default=1, help="Key-Increment amount")
    p.add_argument("--keys", type=int, default=1, help="increment: spread over KEY..KEY+keys-1; sketch: key space")
    p.add_argument("--redundancy", type=int, default=2, help="N copies (Key-Write / Key-Increment)")
    p.add_argument("--count", type=int, default=1, help="reports (distinct reports with --duration)")
    p.add_argument("--rate", type=float, default=0.0, help="reports/s; 0 = as fast as possible")
    p.add_argument("--duration", type=float, default=None, help="send for this many seconds, cycling")
    p.add_argument("--sport", type=int, default=UdpPort.DTA_SOURCE)
    p.add_argument("--cpu", type=int, default=None, help="pin the reporter to this CPU")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--sketch-id", type=int, default=1)
    p.add_argument("--reporter-id", type=int, default=1)
    p.add_argument("--rows", type=int, default=4)
    p.add_argument("--columns", type=int, default=256)
    p.add_argument("--epoch", type=int, default=0)
    p.add_argument("--items", default="", help="sketch content: KEY[:COUNT],...")
    p.add_argument("--random", type=int, default=0, help="sketch content: this many random keys")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--probe-ms", type=float, default=2.0, help="tail-probe interval")
    p.add_argument("--probes", type=int, default=3)
    p.add_argument("--linger-ms", type=float, default=30.0, help="wait for late NACKs after the last column")
    p.add_argument("--timeout", type=float, default=30.0)
    return p


def check_report_args(args: argparse.Namespace) -> str | None:
    """A message for arguments the tool cannot use, else None."""
    if args.count < 1:
        return "--count must be >= 1"
    if args.rate < 0:
        return "--rate must be >= 0"
    if args.duration is not None and args.duration <= 0:
        return "--duration must be > 0"
    if args.kind in ("keywrite", "increment") and not 1 <= args.redundancy <= 255:
        return "--redundancy must be 1..255"
    if args.kind == "sketch":
        if not (1 <= args.rows <= 255 and args.columns >= 1):
            return "--rows must be 1..255 and --columns >= 1"
        if args.epoch < 0:
            return "--epoch must be >= 0"
        if not args.items and not args.random:
            return "give the sketch's content: --items KEY[:COUNT],... and/or --random N"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.dta.live",
                                     description="DTA reporter tool (run inside a host namespace)")
    sub = parser.add_subparsers(dest="cmd", required=True)
    report_parser(sub.add_parser("report", help="send DTA reports to a collector"))
    args = parser.parse_args(argv)
    err = check_report_args(args)
    if err:
        parser.error(err)
    return _report_main(args)


if __name__ == "__main__":
    sys.exit(main())
