"""DTA's control plug-in: what the switch daemon serves, the collector node's daemon, and the
orchestration that connects a translator to a collector.

Switch side (:func:`switch_handlers`, loaded by every switch daemon through the protocol
registry, ``netstack.protocols``): three control commands,

- ``dta_enable``: ``{"port": collector-facing port, "connect_info": {...}, ["ip"], ["mac"], options}``
  builds a :class:`~netstack.dta.translator.DTATranslator` and attaches a
  :class:`~netstack.dta.feature.TranslatorFeature` to the running switch (an
  enabled translator is replaced). Options: ``grace_reports`` (default 1000) or
  ``grace_ms``; ``append_flush_ms`` (default 1; ``null`` = never flush idle Append
  batches, the public behaviour); ``max_redundancy``; ``ack_every``; ``track_seqnum``;
  ``sketch_nack_holdoff_ms``; ``udp_sport``; ``nak_window_ms`` (``null``: no time bound)
  and ``nak_window_slack`` (which ACK/NAKs are believed, docs/security.md#dta); ``window``
  (outstanding requests per QP, default ``DEFAULT_WINDOW``, 1536; 0 = no window, the old
  behaviour) and ``window_timeout_ms`` (default 50: a full window with no ACK progress for that
  long goes back to its oldest un-acknowledged PSN; docs/dta.md "Output window"); ``cls``
  (egress class of the RoCEv2 frames); ``reporters`` (IPv4 addresses: required when the switch
  has keys, i.e. the topology names a key file; the translator then authenticates every report,
  docs/dta.md "Authenticated reports"). The translator's MAC is the collector-facing port's
  MAC unless ``mac`` says otherwise; its IP (the source of the RoCEv2 requests and
  destination of the collector's ACK/NAKs) need not be routable.
- ``dta_disable``: detach it (buffered Append entries that were never written are lost,
  as when a real translator is reprogrammed).
- ``dta_status``: the translator's counters, PSNs, list heads, sketch progress.

Collector nodes (:func:`node_daemon`): a topology node of kind ``collector`` runs
``daemons.collector`` (the userspace RoCEv2 responder); this module writes its config (its
memory lives in ``/dev/shm/netstack-<prefix>-<node>``) for ``netstack up``.

Orchestration (any process with the run state, e.g. the CLI and tests)
    :func:`enable_translator` reads the collector daemon's ``connect_info`` (the stand-in for
    RDMA_CM, "Direct Telemetry Access" §7.2.1), tells the collector daemon who the QPs' peer
    is (``bind``: the translator's IP, MAC and QPNs, so that its responder accepts requests
    from that peer only, as a real RC QP is connected to one remote GID and QPN) and then
    sends ``dta_enable`` to the collector's ToR, on the port that ``state.json`` says faces
    the collector. :func:`disable_translator`,
    :func:`translator_status`, :func:`collector_status`, :func:`memory_dir`. :func:`plan_report`
    checks a ``netstack dta report`` against the testbed and builds the reporter tool's command
    line (the sketch epoch, the era of authenticated reports); :func:`run_report`
    runs the reporter tool and judges the run (netstack/dta/verdict.py: reports as planned, the
    reporter's and every daemon's scheduling delay).
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NetstackError
from ..validity import verdict_line as verdict_line  # (re-exported: netstack dta report prints it)
from .options import translator_kwargs

if TYPE_CHECKING:
    from ..runtime import RunState

NOT_ENABLED = "DTA is not enabled on this switch: netstack dta enable"


# =========================================================================== switch daemon side


class TranslatorControl:
    """The DTA translator of one switch daemon, driven over its control socket."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.feature: Any = None
        self.settings: dict[str, Any] = {}
        #: reporter address -> its opener, kept across enables so that a new translator keeps
        #: every reporter's replay window (authenticated reports only)
        self.openers: dict[str, Any] = {}
        #: the Postcarding hop reporter of this switch (issue 33), or None
        self.postcards: Any = None

    def handlers(self) -> dict[str, Any]:
        return {"dta_enable": self.enable, "dta_disable": self.disable, "dta_status": self.status,
                "dta_postcards": self.postcards_ctl}

    def postcards_ctl(self, req: dict[str, Any]) -> dict[str, Any]:
        """This switch's postcards (:mod:`.hopreport`): ``{"on": true, "hop", "collector_ip",
        "collector_mac", "ip", "mac", "value"?, "interval_ms"?, "uplink"?, "cls"?}`` starts (or
        replaces) them (``uplink``: the port toward the collector's ToR, None on the ToR itself:
        :class:`.feature.HopReporterFeature`),
        ``{"on": false}`` stops them, ``{}`` reports; the answer is the reporter's counters."""
        from headers.inet import ip_bytes, mac_bytes

        from ..io.control import ControlError
        from .feature import HopReporterFeature
        from .hopreport import DEFAULT_INTERVAL_NS, HopReporter, HopReporterConfig, switch_id

        on = req.get("on")
        if on is not None and not isinstance(on, bool):
            raise ControlError(f"on={on!r} must be true or false")
        final = self.postcards.counters() if self.postcards is not None else None
        if on is not None and self.postcards is not None:
            self.postcards.detach()
            self.postcards = None
        if on:
            interval = req.get("interval_ms")
            try:
                if interval is not None and (not isinstance(interval, int | float) or isinstance(interval, bool)
                                             or interval < 0):
                    raise ValueError(f"interval_ms={interval!r} must be a non-negative number")
                value = req.get("value")
                config = HopReporterConfig(
                    req["hop"], switch_id(self.shell.switch.config.name) if value is None else value,
                    ip_bytes(req["collector_ip"]), mac_bytes(req["collector_mac"]), mac_bytes(req["mac"]),
                    ip_bytes(req["ip"]), DEFAULT_INTERVAL_NS if interval is None else round(interval * 1_000_000))
            except (KeyError, TypeError, ValueError) as exc:
                raise ControlError(f"cannot start postcards: {exc}") from None
            uplink, cls = req.get("uplink"), req.get("cls", 0)
            names = [p.name for p in self.shell.switch.ports]
            if uplink is not None and uplink not in names:
                raise ControlError(f"uplink {uplink!r}: no such port; ports: {names}")
            if not isinstance(cls, int) or isinstance(cls, bool) or not 0 <= cls <= 7:
                raise ControlError(f"cls={cls!r} must be a traffic class 0..7")
            self.postcards = HopReporterFeature(self.shell.switch, HopReporter(config), uplink=uplink, cls=cls)
            self.shell.flush()
        current = self.postcards.counters() if self.postcards is not None else None
        return {"enabled": current is not None, "counters": current, "final": final if on is not None else None}

    def enable(self, req: dict[str, Any]) -> dict[str, Any]:
        from headers.inet import ip_bytes, mac_bytes, mac_str

        from ..io.control import ControlError
        from ..switch.config import derived_mac
        from .feature import TranslatorFeature
        from .translator import DTATranslator, TranslatorConfig

        switch = self.shell.switch
        port = req.get("port")
        names = [p.name for p in switch.ports]
        if not isinstance(port, str) or port not in names:
            raise ControlError(f"no port {port!r}; ports: {names}")
        info = req.get("connect_info")
        if not isinstance(info, dict):
            raise ControlError("connect_info (the collector's, from its daemon's connect_info) is required")
        try:
            kwargs = translator_kwargs(req)
        except ValueError as exc:
            raise ControlError(str(exc)) from None
        cls = req.get("cls", 0)
        if not isinstance(cls, int) or not 0 <= cls <= 7:
            raise ControlError(f"cls={cls!r} must be a traffic class 0..7")
        if req.get("mac") is not None and not isinstance(req["mac"], str):
            raise ControlError(f"mac={req['mac']!r} must be a MAC address string")
        try:
            mac = mac_bytes(req["mac"]) if req.get("mac") else (switch.config.port(port).mac
                                                                 or derived_mac(switch.config.name, port))
            ip = str(req.get("ip") or default_translator_ip(info["ip"]))
            config = TranslatorConfig(info, mac, ip_bytes(ip), **kwargs)
            auth, auth_settings = self._report_auth(req)
            translator = DTATranslator(config, time.monotonic_ns(), auth=auth)
        except (KeyError, TypeError, ValueError) as exc:
            raise ControlError(f"cannot enable the DTA translator on {port}: {exc}") from None
        replaced = self.feature is not None
        if replaced:
            self.feature.detach()
        self.feature = TranslatorFeature(switch, port, translator, cls=cls)
        self.settings = {"port": port, "translator_mac": mac_str(mac), "translator_ip": ip, "cls": cls,
                         "collector": translator.collector, "collector_ip": info["ip"],
                         "collector_mac": info["mac"], "enabled_at": time.time(),
                         "config": {k: getattr(config, k) for k in (
                             "grace_reports", "grace_ns", "append_flush_ns", "max_redundancy", "ack_every",
                             "track_seqnum", "sketch_nack_holdoff_ns", "udp_sport", "nak_window_ns",
                             "nak_window_slack", "window", "window_timeout_ns", "postcard_flush_ns")},
                         "regions": [r.get("name") for r in info.get("regions", [])], "auth": auth_settings}
        self.shell.flush()
        import logging

        logging.getLogger("netstack.switch").info("DTA translator %s on %s for collector %s (%s)",
                                                  "replaced" if replaced else "enabled", port,
                                                  translator.collector, info["ip"])
        return {**self.settings, "replaced": replaced}

    def _report_auth(self, req: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """The translator's :class:`~netstack.dta.reportauth.ReportAuth` when this switch has keys
        (``switch.auth``: the topology names a key file), from ``req["reporters"]`` (the
        reporters' IPv4 addresses; ValueError if missing), and what ``settings`` says of it."""
        from ..io.control import ControlError
        from .reportauth import ReportAuth, report_openers

        ctx = getattr(self.shell.switch, "auth", None)
        if ctx is None:
            return None, None
        reporters = req.get("reporters")
        if not isinstance(reporters, list) or not all(isinstance(r, str) for r in reporters):
            raise ControlError("this switch authenticates DTA reports (its topology names a key file): "
                               "'reporters' must list the reporters' IPv4 addresses")
        openers = report_openers(ctx, reporters, keep=self.openers)
        self.openers = openers
        table: dict[str | bytes, Any] = {k: v for k, v in openers.items()}  # (ReportAuth takes either key)
        return ReportAuth(table), {"keys": ctx.ring.source, "reporters": sorted(openers)}

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
        return {"enabled": True, **self.settings, "enqueue_drops": self.feature.c.enqueue_drops,
                "in_grace": self.feature.translator.in_grace,
                "port_counters": {k: pc.get(k) for k in ("tx_frames", "tx_bytes", "rx_frames", "queue_drops",
                                                         "kernel_drops", "feature_consumed")},
                "counters": self.feature.translator.counters()}


def switch_handlers(shell: Any) -> dict[str, Any]:
    """Control commands DTA adds to a switch daemon (loaded through ``netstack.protocols``)."""
    return TranslatorControl(shell).handlers()


def default_translator_ip(collector_ip: str) -> str:
    """An address for the translator when none is given: the collector's /24 with host .254
    (.253 if that is the collector). It only has to be an address nobody else uses."""
    a = ipaddress.IPv4Address(collector_ip).packed
    last = 254 if a[3] != 254 else 253
    return str(ipaddress.IPv4Address(a[:3] + bytes([last])))


# =========================================================================== orchestration


class DTAError(NetstackError, RuntimeError):
    """A DTA operation on the running testbed failed; the message says what to do."""


def run_state(prefix: str) -> RunState:
    """The run state of the testbed under ``prefix`` (DTAError if none runs)."""
    from ..runtime import RuntimeErrorNS, load_state

    try:
        return load_state(prefix)
    except RuntimeErrorNS as exc:
        raise DTAError(str(exc)) from None


def _daemon_kinds(state: RunState) -> dict[str, str]:
    return {d.node: d.kind for d in state.daemons}


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


def check_collector(state: RunState, collector: str) -> None:
    kinds = _daemon_kinds(state)
    if kinds.get(collector) != "collector":
        collectors = [n for n, k in kinds.items() if k == "collector"]
        raise DTAError(f"no collector daemon runs on {collector!r} (collectors: {', '.join(collectors) or 'none'})")


def check_switch(state: RunState, switch: str) -> None:
    kinds = _daemon_kinds(state)
    if kinds.get(switch) != "switch":
        switches = [n for n, k in kinds.items() if k == "switch"]
        raise DTAError(f"{switch!r} is not a switch of this topology (switches: {', '.join(switches)})")


def collector_tor(state: RunState, collector: str) -> str:
    """The switch the collector hangs off (its ToR, where the translator belongs)."""
    kinds = _daemon_kinds(state)
    for p in state.ports_of(collector):
        if kinds.get(p.peer) == "switch":
            return p.peer
    raise DTAError(f"{collector!r} is not attached to any switch")


def collector_port(state: RunState, switch: str, collector: str) -> str:
    """The port of ``switch`` that faces ``collector`` (from the run state's ports)."""
    for p in state.ports_of(switch):
        if p.peer == collector:
            return p.ifname
    tor = [p.peer for p in state.ports_of(collector)]
    raise DTAError(f"{switch} has no port facing {collector} (the translator runs on the collector's ToR: "
                   f"{', '.join(tor) or 'none'}; use --switch {tor[0] if tor else '...'})")


def collector_ip(state: RunState, collector: str) -> str:
    try:
        return str(ipaddress.ip_interface(state.hosts[collector]).ip)
    except KeyError:
        raise DTAError(f"{collector!r} has no IP address in this topology") from None


def translator_ip(hosts: Mapping[str, str], collector: str) -> str:
    """The highest address of the collector's subnet that no node uses (``hosts``: a run state's,
    node -> address with prefix length)."""
    iface = ipaddress.IPv4Interface(hosts[collector])  # (hosts are IPv4: docs/topology.md)
    used = {ipaddress.ip_interface(v).ip for v in hosts.values()}
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
    connect_info, bind the collector's QPs to the translator (its IP, MAC and QPNs) and send
    ``dta_enable`` on the port facing it. ``switch_node=None`` picks the collector's ToR.
    ``options``: see :data:`.options.TRANSLATOR_OPTIONS` (and ``cls``, ``ip``, ``mac``)."""
    state = run_state(prefix)
    check_collector(state, collector_node)
    if switch_node is None:
        switch_node = collector_tor(state, collector_node)
    check_switch(state, switch_node)
    port = collector_port(state, switch_node, collector_node)
    info = _control(prefix, collector_node, "connect_info")
    options.setdefault("ip", translator_ip(state.hosts, collector_node))
    options.setdefault("reporters", reporter_ips(state, collector_node))
    options.setdefault("mac", port_mac(state, switch_node, port))
    # the peer first: a request the collector would refuse would open a PSN gap (a resync)
    bound = _control(prefix, collector_node, "bind", ip=options["ip"], mac=options["mac"],
                     qps={r["name"]: r["peer_qpn"] for r in info.get("regions", [])})
    result = _control(prefix, switch_node, "dta_enable", port=port, connect_info=info, **options)
    return {"switch": switch_node, "collector_node": collector_node, "memory_dir": info.get("memory_dir"),
            "bound": bound.get("bound", []), **result}


def reporter_ips(state: RunState, collector: str) -> list[str]:
    """Who may report to ``collector``: the addresses of the topology's other nodes (its hosts).
    A switch that authenticates reports (the topology names a key file) makes one opener each
    and refuses reports from any other source (``unknown_reporter``)."""
    return sorted(str(ipaddress.ip_interface(v).ip) for n, v in state.hosts.items() if n != collector)


def port_mac(state: RunState, switch: str, port: str) -> str:
    """The MAC of ``switch``'s ``port`` (the run state's ports; the switch derives one if none)."""
    from headers.inet import mac_str

    from ..switch.config import derived_mac

    for p in state.ports_of(switch):
        if p.ifname == port and p.mac:
            return p.mac
    return mac_str(derived_mac(switch, port))


def enable_postcards(prefix: str, switches: list[str], collector_node: str = "c1", *,
                     interval_ms: float | None = None, translator_ip_: str | None = None) -> dict[str, Any]:
    """Postcarding (issue 33): ``switches``, in the order of the path (hop 1 first), each postcard
    the flows they forward to ``collector_node`` (:mod:`.hopreport`); a switch not listed keeps
    what it had. Postcards leave from the translator's address (``translator_ip_``: default the
    same choice as :func:`enable_translator`'s) and each switch's MAC for them."""
    from headers.inet import mac_str

    from ..switch.config import derived_mac

    state = run_state(prefix)
    check_collector(state, collector_node)
    out: dict[str, Any] = {}
    info = _control(prefix, collector_node, "connect_info")
    tor = collector_tor(state, collector_node)
    for hop, sw in enumerate(switches, 1):
        check_switch(state, sw)
        out[sw] = _control(prefix, sw, "dta_postcards", on=True, hop=hop, collector_ip=info["ip"],
                           uplink=None if sw == tor else uplink_port(state, sw, tor),
                           collector_mac=info["mac"], mac=mac_str(derived_mac(sw, "dta-postcards")),
                           ip=translator_ip_ or translator_ip(state.hosts, collector_node),
                           **({} if interval_ms is None else {"interval_ms": interval_ms}))
    return out


def uplink_port(state: RunState, switch: str, tor: str) -> str:
    """The port of ``switch`` on a shortest path of switches to ``tor`` (the first by name)."""
    kinds = _daemon_kinds(state)
    dist = {tor: 0}
    todo = [tor]
    while todo:  # breadth first from the ToR over switch-to-switch links
        node = todo.pop(0)
        for p in state.ports_of(node):
            if kinds.get(p.peer) == "switch" and p.peer not in dist:
                dist[p.peer] = dist[node] + 1
                todo.append(p.peer)
    if switch not in dist:
        raise DTAError(f"{switch} has no path of switches to {tor}, the collector's ToR")
    return min(p.ifname for p in state.ports_of(switch) if dist.get(p.peer) == dist[switch] - 1)


def disable_postcards(prefix: str) -> dict[str, Any]:
    """Stop the postcards of every switch (each answers with its final counters)."""
    state = run_state(prefix)
    kinds = _daemon_kinds(state)
    return {sw: _control(prefix, sw, "dta_postcards", on=False) for sw in sorted(kinds) if kinds[sw] == "switch"}


def disable_translator(prefix: str, switch_node: str = "sw2") -> dict[str, Any]:
    state = run_state(prefix)
    check_switch(state, switch_node)
    return dict(_control(prefix, switch_node, "dta_disable"))


def translator_status(prefix: str, switch_node: str = "sw2", *, quiet: bool = False) -> dict[str, Any]:
    """The switch's ``dta_status``; DTAError("DTA is not enabled ...") unless ``quiet``."""
    state = run_state(prefix)
    check_switch(state, switch_node)
    st: dict[str, Any] = dict(_control(prefix, switch_node, "dta_status", quiet=True))
    if not st.get("enabled") and not quiet:
        raise DTAError(f"DTA is not enabled on {switch_node}: netstack dta enable"
                       + (f" --prefix {prefix}" if prefix != "ns" else ""))
    return st


@dataclass(frozen=True)
class ReportPlan:
    """One ``netstack dta report`` run, checked against the running testbed and ready to go
    (:func:`plan_report`): the reporter tool's command line in ``src``'s namespace, and what the
    command says about it."""

    src: str
    switch: str  # the translator's switch
    collector: str
    dst: str  # the collector's IP: where the reports go
    kind: str  # keywrite, append, increment, postcard or sketch
    argv: list[str]
    #: how long the run should take (count / rate), None when as fast as possible or a sketch
    expect_s: float | None


def plan_report(prefix: str, kind: str, options: Mapping[str, Any]) -> ReportPlan:
    """``netstack dta report KIND``'s run, from its parsed options (the argparse destinations:
    ``src``, ``collector``, ``switch`` (None: the collector's ToR), ``rate``, ``count`` and the
    primitive's own, :func:`report_argv`): the translator must be enabled for that collector,
    the store must exist in the collector's layout, and with authenticated reports the tool
    gets the key file and a fresh era (:func:`report_auth_argv`). DTAError says what is wrong."""
    from ..runtime import node_exec_argv

    src, collector = str(options["src"]), str(options["collector"])
    state = run_state(prefix)
    switch = str(options.get("switch") or collector_tor(state, collector))
    if src not in state.hosts or src == collector:
        hosts = [h for h in state.hosts if h != collector]
        raise DTAError(f"--from {src!r}: not a host of this topology (hosts: {', '.join(hosts)})")
    tr = translator_status(prefix, switch)
    dst = collector_ip(state, collector)
    info = connect_info(prefix, collector)
    if tr["collector_ip"] != dst:
        raise DTAError(f"the translator on {switch} serves {tr['collector_ip']}, not {collector} ({dst}): "
                       f"netstack dta enable --collector {collector}")
    rate = float(options["rate"])
    argv = [sys.executable, "-m", "netstack.dta.live", "report", kind, "--dst", dst, "--rate", str(options["rate"])]
    argv += report_auth_argv(state, src, tr)
    argv += report_argv(kind, options, info, tr, collector)
    expect = (int(options["count"]) if kind != "sketch" else 0) / rate if rate > 0 else None
    return ReportPlan(src, switch, collector, dst, kind, node_exec_argv(state, src, argv), expect)


def report_argv(kind: str, o: Mapping[str, Any], info: dict[str, Any], tr: dict[str, Any],
                collector: str) -> list[str]:
    """The reporter tool's options for one primitive, checked against the collector's layout
    (``info``: its connect_info): Key-Write ``key``, ``value``, ``redundancy``, ``count``;
    Append ``list``, ``value``, ``count``; Key-Increment ``key``, ``by``, ``keys``, ``redundancy``
    (None: the store's maximum, which ``query counter`` assumes), ``count``; Postcarding ``flow``,
    ``hop`` (1..the store's hops), ``value``, ``count``; Sketch-Merge :func:`_sketch_argv`."""
    if kind == "keywrite":
        return ["--key", str(o["key"]), "--value", str(o["value"]), "--redundancy", str(o["redundancy"]),
                "--count", str(o["count"])]
    if kind == "append":
        if region_layout(info, "append", list_id=o["list"]) is None:
            lists = [r["layout"]["list_id"] for r in info["regions"] if r["layout"].get("kind") == "append"]
            raise DTAError(f"collector {collector} has no Append list {o['list']} (lists: {lists})")
        return ["--list", str(o["list"]), "--value", str(o["value"]), "--count", str(o["count"])]
    if kind == "increment":
        lay = region_layout(info, "keyincrement")
        if lay is None:
            raise DTAError(f"collector {collector} has no Key-Increment store")
        n = o["redundancy"] or int(lay.get("max_redundancy", 4))
        return ["--key", str(o["key"]), "--by", str(o["by"]), "--keys", str(o["keys"]), "--redundancy", str(n),
                "--count", str(o["count"])]
    if kind == "postcard":
        lay = region_layout(info, "postcard")
        if lay is None:
            raise DTAError(f"collector {collector} has no Postcarding store")
        hops = int(lay.get("hops", 5))
        if not 1 <= int(o["hop"]) <= hops:
            raise DTAError(f"--hop {o['hop']}: the Postcarding store has hops 1..{hops}")
        return ["--key", str(o["flow"]), "--hop", str(o["hop"]), "--value", str(o["value"]),
                "--count", str(o["count"])]
    if kind == "sketch":
        return _sketch_argv(o, info, tr, collector)
    raise DTAError(f"no primitive {kind!r} (one of keywrite, append, increment, sketch, postcard)")


def _sketch_argv(o: Mapping[str, Any], info: dict[str, Any], tr: dict[str, Any], collector: str) -> list[str]:
    """Sketch-Merge (§6.3): ``sketch_id``, ``reporter_id`` (one of the sketch's reporters),
    ``epoch`` (None: :func:`next_sketch_epoch`), the content (``items`` and/or ``random`` with
    ``seed`` and ``key_space``)."""
    sketch_id, reporter_id = o["sketch_id"], o["reporter_id"]
    lay = region_layout(info, "sketch", sketch_id=sketch_id)
    if lay is None:
        raise DTAError(f"collector {collector} has no sketch {sketch_id}")
    if reporter_id not in lay["reporters"]:
        raise DTAError(f"sketch {sketch_id} merges reporters {lay['reporters']}, not {reporter_id} (--reporter-id)")
    epoch = o["epoch"]
    if epoch is None:
        epoch = next_sketch_epoch(tr, sketch_id, reporter_id, int(lay["columns"]))
    argv = ["--sketch-id", str(sketch_id), "--reporter-id", str(reporter_id), "--rows", str(lay["rows"]),
            "--columns", str(lay["columns"]), "--epoch", str(epoch), "--seed", str(o["seed"]),
            "--keys", str(o["key_space"]), "--random", str(o["random"])]
    if o["items"]:
        argv += ["--items", o["items"]]
    if not o["items"] and not o["random"]:
        raise DTAError("give the sketch's content: --items KEY[:COUNT],... and/or --random N")
    return argv


def next_sketch_epoch(tr: dict[str, Any], sketch_id: int, reporter_id: int, columns: int) -> int:
    """The epoch a sketch reporter sends next: the first one starting at or after the column the
    translator expects from it (``tr``: its ``dta_status``). Columns are numbered on across
    epochs (column g is column g % C of epoch g // C, netstack/dta/translator.py), so a reporter
    that stopped mid-epoch starts over with the next whole epoch (docs/dta.md, Limitations)."""
    expected = tr["counters"].get("sketches", {}).get(str(sketch_id), {}).get("expected", {})
    nxt = int(expected.get(str(reporter_id), 0))
    return -(-nxt // columns)


def report_auth_argv(state: RunState, src: str, tr: dict[str, Any]) -> list[str]:
    """The reporter tool's sealing options when the translator authenticates reports: the
    topology's key file (a path: the key itself never goes on a command line), the reporter's
    address and an era newer than anything the translator accepted from it (so that a run
    within a second of the last one is not refused as its replay; docs/dta.md "Authenticated
    reports")."""
    found = reporter_auth(state, src, tr)
    if found is None:
        return []
    path, ip, era = found
    return ["--key-file", str(path), "--reporter-ip", ip, "--era", str(era)]


def reporter_auth(state: RunState, src: str, tr: dict[str, Any]) -> tuple[Path, str, int] | None:
    """``(key file, reporter address, era)`` for reports from host ``src`` when the translator
    (``tr``: its status) authenticates them, else None: the era newer than anything it accepted
    from that reporter (:func:`report_auth_argv`)."""
    from ..runtime import topology_of
    from .reportauth import next_era

    auth = tr.get("counters", {}).get("auth")
    if auth is None:
        return None
    path = topology_of(state).keys_path()
    if path is None:
        raise DTAError("the translator authenticates reports but the topology names no key file "
                       "([topology] keys); it was edited since 'netstack up'?")
    ip = str(ipaddress.ip_interface(state.hosts[src]).ip)
    highest = auth.get("per_reporter", {}).get(ip, {}).get("highest")
    return path, ip, next_era(time.time(), highest)


def run_report(prefix: str, src: str, argv: list[str], switch_node: str = "sw2") -> dict[str, Any]:
    """Run the reporter tool (``argv``: ``python -m netstack.dta.live report ...`` in ``src``'s
    namespace) and judge the run (netstack/dta/verdict.py): its JSON with ``valid`` and
    ``checks`` over the reporter's own scheduling delay and every daemon's over the run (the
    translator's switch, the collector), and ``sched`` with each. DTAError if the tool failed."""
    import subprocess

    from ..experiment import LagWindow
    from .verdict import report_validity

    lags = LagWindow(prefix).start()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    lags.stop()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise DTAError(f"the reporter in {src} failed (exit {proc.returncode}): {proc.stderr.strip()[-800:]}")
    res: dict[str, Any] = json.loads(lines[-1])
    lags.add_tool(f"reporter {src}", res)
    res["sched"] = dict(lags.lags)
    cfg = (translator_status(prefix, switch_node, quiet=True).get("config") or {})
    return report_validity(res, lags.lags, window_timeout_ns=cfg.get("window_timeout_ns")).annotate(res)


def collector_status(prefix: str, collector_node: str = "c1") -> dict[str, Any]:
    state = run_state(prefix)
    check_collector(state, collector_node)
    return dict(_control(prefix, collector_node, "status"))


def connect_info(prefix: str, collector_node: str = "c1") -> dict[str, Any]:
    state = run_state(prefix)
    check_collector(state, collector_node)
    return dict(_control(prefix, collector_node, "connect_info"))


def memory_dir(prefix: str, collector_node: str = "c1") -> str:
    """Where the collector's regions live (asked from the daemon, else its config file)."""
    from ..runtime import host_path, run_dir

    state = run_state(prefix)
    check_collector(state, collector_node)
    with contextlib.suppress(DTAError):
        # the daemon's own path; in a container, seen from here under its root
        return host_path(state, collector_node, _control(prefix, collector_node, "status")["memory_dir"])
    try:
        cfg = run_dir(prefix) / f"{collector_node}.json"
        return host_path(state, collector_node, json.loads(cfg.read_text())["collector"]["memory_dir"])
    except (OSError, ValueError, KeyError):
        raise DTAError(f"cannot find the memory of collector {collector_node}: its daemon does not answer") from None


def region_layout(info: dict[str, Any], kind: str, **match: Any) -> dict[str, Any] | None:
    """The layout of the first region of ``kind`` in a connect_info whose layout matches."""
    for r in info.get("regions", []):
        lay = r.get("layout") or {}
        if lay.get("kind") == kind and all(lay.get(k) == v for k, v in match.items()):
            return lay
    return None


# ----------------------------------------------------------------- the common control verbs
# (docs/architecture.md "Errors and control verbs": every protocol's enable, disable, status;
# DTA's own are run_report and the collector's queries)


def enable(prefix: str, switch_node: str | None = "sw2", collector_node: str = "c1",
           **options: Any) -> dict[str, Any]:
    """A translator on ``switch_node`` for ``collector_node``: :func:`enable_translator`, under
    the verb every protocol's control module has."""
    return enable_translator(prefix, switch_node, collector_node, **options)


def disable(prefix: str, switch_node: str = "sw2") -> dict[str, Any]:
    """The translator off: :func:`disable_translator`."""
    return disable_translator(prefix, switch_node)


def status(prefix: str, switch_node: str = "sw2", collector_node: str = "c1") -> dict[str, Any]:
    """``{"translator": its status (enabled or not), "collector": the collector daemon's}``, as
    ``netstack dta status`` shows them."""
    return {"translator": translator_status(prefix, switch_node, quiet=True),
            "collector": collector_status(prefix, collector_node)}


# =========================================================================== collector nodes
def collector_daemon_available() -> bool:
    return importlib.util.find_spec("daemons.collector") is not None


def collector_memory_dir(prefix: str, node: str) -> str:
    """Where a collector node's registered memory lives (shared memory, so queries can read it)."""
    return f"/dev/shm/netstack-{prefix}-{node}"


def after_down(prefix: str) -> None:
    """``netstack down``: remove the regions of the run's collectors. A collector stopped
    cleanly removes its own; one killed (SIGKILL) and never started again cannot
    (``runtime.cleanup_protocols``)."""
    import shutil
    from pathlib import Path

    for path in Path("/dev/shm").glob(f"netstack-{prefix}-*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def node_daemon(topology: Any, built: Any, node: Any, rdir: Path, prefix: str,
                options: Mapping[str, Any] | None = None) -> list[str] | None:
    """The daemon a ``collector`` node runs (argv without ``--control``), its config written to
    ``rdir``; None when the collector daemon is not installed. (It takes none of ``up``'s
    ``options``: ``netstack.runtime``'s node-daemon contract.)"""
    if not collector_daemon_available():
        return None
    link = topology.links_of(node.name)[0]
    cfg_path = rdir / f"{node.name}.json"
    cfg: dict[str, Any] = {"collector": {
        "name": node.name, "ifname": link.end(node.name).ifname, "mac": built.mac(node.name, link.name),
        "ip": str(node.ip.ip), "memory_dir": collector_memory_dir(prefix, node.name),
    }}
    translator = declared_translator_config(topology, built, node.name, rdir)
    if translator is not None:  # the daemon connects it at start (netstack/dta/topology.py)
        cfg["collector"]["translator"] = translator
    cfg_path.write_text(json.dumps(cfg, indent=2))
    return [sys.executable, "-m", "daemons.collector", "--config", str(cfg_path)]


# =========================================================================== declared translators
#: How long a collector daemon keeps trying its ToR's switch daemon (started before it, by
#: ``netstack up``) with the translator the topology declares, before it gives up (one log line).
DECLARED_TIMEOUT_S = 8.0


def declared_translator_config(topology: Any, built: Any, collector: str, rdir: Path) -> dict[str, Any] | None:
    """What collector ``collector``'s daemon needs to connect the translator the topology declares
    for it (netstack/dta/topology.py), None if none: the switch, its port facing the collector,
    its control socket (``<run dir>/<switch>.sock``, where ``netstack up`` puts it) and
    ``dta_enable``'s options, the translator's addresses and the reporters filled in as
    :func:`enable_translator` fills them."""
    from ..runtime import run_state as built_state
    from .topology import declared_for

    decl = declared_for(topology, collector)
    if decl is None:
        return None
    state = built_state(topology, built, built.prefix, [])  # (up has not written it yet: no daemons)
    options = dict(decl.options)
    options.setdefault("ip", translator_ip(state.hosts, collector))
    options.setdefault("reporters", reporter_ips(state, collector))
    options.setdefault("mac", port_mac(state, decl.switch, decl.port))
    return {"switch": decl.switch, "port": decl.port, "control": str(rdir / f"{decl.switch}.sock"),
            "options": options}


def enable_declared(decl: Mapping[str, Any], info: dict[str, Any],
                    timeout_s: float = DECLARED_TIMEOUT_S) -> dict[str, Any]:
    """``dta_enable`` with ``info`` (the collector's connect_info) for the translator ``decl``
    describes (:func:`declared_translator_config`): what the collector daemon sends at start,
    after binding its QPs to the translator. Retried while the switch daemon is not up yet;
    DTAError if it refuses or never answers."""
    from ..io.control import ControlError, request

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return dict(request(str(decl["control"]), "dta_enable", port=decl["port"], connect_info=info,
                                **decl["options"]))
        except ControlError as exc:
            raise DTAError(f"{decl['switch']} refused the translator the topology declares: {exc}") from None
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise DTAError(f"the switch daemon of {decl['switch']} did not answer on {decl['control']} "
                               f"within {timeout_s:g} s ({exc}); 'netstack dta enable' connects it") from None
            time.sleep(0.1)


def after_restart(prefix: str, node: str) -> list[str]:
    """A restarted switch daemon (``runtime.restart_daemon``) comes back without a translator: the
    ones the topology declares on it are enabled again, from their collectors' connect_info (in
    sequence: their current expected PSNs). A restarted collector reconnects its own at start, or
    keeps the one it had when it restored its QPs. Returns ``["node/port:translator", ...]``."""
    from ..runtime import topology_of
    from .topology import declared

    state = run_state(prefix)
    kinds = _daemon_kinds(state)
    if kinds.get(node) != "switch":
        return []
    try:
        decls = [d for d in declared(topology_of(state)) if d.switch == node and kinds.get(d.collector) == "collector"]
    except NetstackError:  # the file no longer reads: nothing is declared that we can trust
        return []
    done = []
    for d in decls:
        try:
            enable_translator(prefix, node, d.collector, **d.options)
        except DTAError:  # its collector does not answer (down too): skipped, as LinkGuardian skips a silent peer
            continue
        done.append(f"{node}/{d.port}:translator")
    return done


