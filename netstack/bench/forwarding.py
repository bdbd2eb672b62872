"""``netstack bench forwarding``: frames/s through one and two userspace switches, next to a
bare Python forwarder and the kernel's own bridge, all measured in the same run.

Set-up (one layer-2 chain of namespaces per path, torn down before the next is built)::

    gen --- DUT --- sink        DUT = bare | bridge | sw1 | sw1 = sw2

- **bare**: a Python process in the middle namespace, ``recv_into`` on one AF_PACKET socket and
  ``send`` on the other, no engine: the ceiling of any Python forwarder on this machine
  (DESIGN.md measured 0.27-0.33 M frames/s for 64-byte frames).
- **bridge**: a Linux bridge in the middle namespace enslaving both veths (the kernel's rate).
- **switch1** / **switch2**: ``netstack.runtime.up`` of a generated topology, i.e. the real
  switch daemons with their static FDB; the sw1-sw2 link carries the software FCS. Links are
  100 Gbit/s with zero delay and a large buffer so that the pacer never limits the rate.

Offered load comes from a generator *process* in the ``gen`` namespace that blasts pre-built
Ethernet/IPv4/UDP frames with ``sendmmsg`` on a ``PacketPort`` socket, batches of 256 with the
mmsghdr array built once (:class:`PrebuiltBatch`), as fast as it can for ``--duration`` seconds.
The sink counts, in the kernel, the frames that reach its interface:
an AF_PACKET socket with a BPF filter for the benchmark's UDP port whose PACKET_STATISTICS
``tp_packets`` (queued + dropped) is read before and after; it is never drained, so the sink
costs no user-space CPU. The forwarding rate is sink frames / generator seconds.

Everything runs on the same (here: 2) cores, so the generator, the kernel's veth work and the
forwarder compete for CPU; the result says so in ``notes``. With two or more CPUs the generator
is pinned to the first and every forwarding process to the others (:func:`cpu_plan`), so the
bare forwarder and the switch daemon are measured on equal terms; ``NETSTACK_BENCH_PIN=0``
leaves placement to the scheduler. The offered load is far above what a Python forwarder takes,
so the rate measured is its saturation throughput; the kernel bridge forwards in the
generator's softirq and is generator-bound (flagged, ``dut_saturated`` false).
Timings belong here, never in tests.

Also the entry point of the benchmark's helper processes (``--role gen`` / ``--role bare``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import ipaddress
import itertools
import json
import os
import secrets
import signal
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..io.packet import _IOVec, _MMsgHdr
from .common import PIN_ENV, format_table, loadavg, pinnable_cpus, sigterm_unwinds, write_results

#: Paths in the order they are measured; ``--only`` selects among them by substring.
PATHS = ("bare", "bridge", "switch1", "switch2")
PATH_LABELS = {
    "bare": "bare Python forwarder",
    "bridge": "Linux bridge",
    "switch1": "1 switch daemon",
    "switch2": "2 switch daemons",
}
DEFAULT_SIZES = (64, 1500)
DEFAULT_DURATION_S = 3.0
#: Rounds per run: this VM's forwarding rates vary by +-20 % from one measurement to the next
#: (measured), so every path is measured this many times, alternating, and medians reported.
DEFAULT_ROUNDS = 3
#: The issue's goal: the switch path reaches this fraction of the bare forwarder's rate.
GOAL_RATIO = 0.70
#: Documented, not measured here (no P4 toolchain on this machine): BMv2 simple_switch's
#: forwarding rate as its maintainers and DESIGN.md quote it, for scale.
BMV2_REFERENCE = {
    "frames_per_s_low": 80_000,
    "frames_per_s_high": 100_000,
    "what": "BMv2 simple_switch (P4 behavioural model), documented rate; NOT measured in this run",
    "source": "p4lang/behavioral-model performance notes; DESIGN.md 'The live runtime'",
}

#: Smallest / largest frame we can send: Ethernet + IPv4 + UDP headers; MTU 1500 + Ethernet.
MIN_SIZE = 42
MAX_SIZE = 1514
UDP_PORT = 47_999
SUBNET = "10.77.0"
GEN_IP = f"{SUBNET}.1"
SINK_IP = f"{SUBNET}.2"
#: Destination IP of the test frames: in the subnet but assigned to nobody, so the sink's
#: kernel drops them silently (forwarding is off in the namespace: no ICMP goes back through
#: the device under test). The destination MAC is the sink's, so switches forward by FDB.
TARGET_IP = f"{SUBNET}.99"
#: Emulated links of the switch topologies: fast enough that the pacer is never the limit
#: (an 84-byte frame takes 6.7 ns), no propagation delay, a buffer far above one batch.
LINK_RATE = "100Gbit"
LINK_BUFFER = "64MB"
#: Frames still in flight when the generator stops get this long to arrive.
DRAIN_S = 0.3
#: The switch daemon folds PACKET_STATISTICS into its counters once per second.
STATS_WAIT_S = 1.2
GEN_BATCH = 256
#: Loss above which the device under test (not the generator) limited the rate.
SATURATION_LOSS = 0.01
#: Set to 0 to let the scheduler place every process (default: pin, see :func:`cpu_plan`).
READY_TIMEOUT_S = 10.0

SOL_PACKET = 263
PACKET_STATISTICS = 6
PACKET_IGNORE_OUTGOING = 23
SO_ATTACH_FILTER = 26
ETH_P_ALL = 0x0003
MSG_DONTWAIT = 0x40


# --------------------------------------------------------------------------- helpers (in-process)


def udp_port_filter(port: int) -> list[tuple[int, int, int, int]]:
    """Classic BPF: accept IPv4/UDP (first fragment or whole) with destination port ``port``."""
    return [
        (0x28, 0, 0, 12),          # ldh [12]            EtherType
        (0x15, 0, 8, 0x0800),      # jeq #IPv4           else drop
        (0x30, 0, 0, 23),          # ldb [23]            IP protocol
        (0x15, 0, 6, 17),          # jeq #UDP           else drop
        (0x28, 0, 0, 20),          # ldh [20]            flags + fragment offset
        (0x45, 4, 0, 0x1FFF),      # jset #0x1fff       later fragment: drop
        (0xB1, 0, 0, 14),          # ldxb 4*([14]&0xf)   IP header length
        (0x48, 0, 0, 16),          # ldh [x+16]          UDP destination port
        (0x15, 0, 1, port),        # jeq #port          else drop
        (0x06, 0, 0, 0x40000),     # ret #262144         accept
        (0x06, 0, 0, 0),           # ret #0              drop
    ]


def attach_filter(sock: socket.socket, program: list[tuple[int, int, int, int]]) -> None:
    insns = b"".join(struct.pack("HBBI", *insn) for insn in program)
    buf = ctypes.create_string_buffer(insns, len(insns))
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)


class SinkCounter:
    """Counts, in the kernel, test frames arriving on ``ifname`` of namespace ``netns``.

    PACKET_STATISTICS resets on every read; ``tp_packets`` includes ``tp_drops``, so it is
    every frame that passed the filter whether or not the (never drained) queue had room.
    """

    def __init__(self, netns_name: str, ifname: str, port: int = UDP_PORT) -> None:
        from ..topo.netns import in_netns

        with in_netns(netns_name):
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            attach_filter(self.sock, udp_port_filter(port))
            self.sock.bind((ifname, ETH_P_ALL))
        except OSError:
            self.sock.close()
            raise
        self.reset()

    def read(self) -> int:
        packets, _drops = struct.unpack("II", self.sock.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
        return packets

    def reset(self) -> None:
        self.read()

    def close(self) -> None:
        self.sock.close()


def _mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def make_frame(size: int, src_mac: str, dst_mac: str, ident: int = 0) -> bytes:
    """An Ethernet/IPv4/UDP frame of exactly ``size`` bytes (as handed to send(), no FCS)."""
    from headers.inet import build_udp_frame

    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"frame size {size} out of range [{MIN_SIZE}, {MAX_SIZE}]")
    payload = bytes((i * 7 + ident) & 0xFF for i in range(size - MIN_SIZE))
    return build_udp_frame(_mac_bytes(src_mac), _mac_bytes(dst_mac), ipaddress.IPv4Address(GEN_IP).packed,
                           ipaddress.IPv4Address(TARGET_IP).packed, 40_000 + ident, UDP_PORT, payload,
                           ident=ident)


def _helper_argv(role: str, **params: Any) -> list[str]:
    return [sys.executable, "-m", "netstack.bench.forwarding", "--role", role, "--params", json.dumps(params)]


def _kill(proc: subprocess.Popen[str] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2)


@contextlib.contextmanager
def _spawned(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True)
    try:
        yield proc
    finally:
        _kill(proc)


def _wait_ready(proc: subprocess.Popen[str], what: str) -> None:
    import select

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    if line.strip() != "ready":
        _kill(proc)
        err = proc.stderr.read() if proc.stderr else ""
        raise RuntimeError(f"{what} did not start (got {line.strip()!r}): {err.strip()[-800:]}")


def _json_result(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        raise RuntimeError(f"{what} did not finish within {timeout:.0f} s") from None
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode not in (0, -signal.SIGTERM) or not lines:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {err.strip()[-800:]}")
    return json.loads(lines[-1])


def cpu_plan() -> tuple[list[int], list[int]] | None:
    """``(generator CPUs, device-under-test CPUs)``, or None to leave placement to the scheduler.

    With two or more usable CPUs the generator gets the first one and every forwarding process
    (bare forwarder, switch daemons) the others, so a forwarder never shares its core with the
    generator and both paths are measured under the same conditions. The kernel work of
    delivering the generator's frames into the forwarder's socket (and of dropping them when the
    socket is full) runs in softirq on the generator's core; the forwarder's sends are processed
    on its own core.
    """
    usable = pinnable_cpus()
    if usable is None:
        return None
    return usable[:1], usable[1:]


def pin(pid: int, cpus: list[int]) -> None:
    """Pin every thread of ``pid`` to ``cpus`` (a process's affinity is per thread)."""
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        with contextlib.suppress(ProcessLookupError, OSError):
            os.sched_setaffinity(tid, cpus)


# --------------------------------------------------------------------------- topologies


def chain_toml(name: str, middle: list[str]) -> str:
    """gen -- middle[0] -- ... -- middle[-1] -- sink, every middle node a switch."""
    chain = ["gen", *middle, "sink"]
    nodes = [
        f'[[nodes]]\nname = "gen"\nkind = "host"\nip = "{GEN_IP}/24"\n',
        f'[[nodes]]\nname = "sink"\nkind = "host"\nip = "{SINK_IP}/24"\n',
        *(f'[[nodes]]\nname = "{m}"\nkind = "switch"\n' for m in middle),
    ]
    links = [f'[[links]]\na = "{a}"\nb = "{b}"\n' for a, b in itertools.pairwise(chain)]
    head = textwrap.dedent(f"""\
        [topology]
        name = "{name}"

        [defaults]
        rate = "{LINK_RATE}"
        delay = "0"
        buffer = "{LINK_BUFFER}"
        """)
    return "\n".join([head, *nodes, *links])


@dataclass
class Chain:
    """What a measurement needs to know about the chain that is up."""

    prefix: str
    gen_ns: str
    gen_if: str
    gen_mac: str
    sink_ns: str
    sink_if: str
    sink_mac: str
    switches: list[str]


def _chain_of(built: Any, switches: list[str]) -> Chain:
    gen_port = built.ports_of("gen")[0]
    sink_port = built.ports_of("sink")[0]
    return Chain(built.prefix, gen_port.netns, gen_port.ifname, gen_port.mac, sink_port.netns, sink_port.ifname,
                 sink_port.mac, switches)


def _make_bridge(netns_name: str, ifnames: list[str]) -> None:
    from pyroute2 import IPRoute

    from ..topo.netns import in_netns

    with in_netns(netns_name):
        ipr = IPRoute()
    try:
        ipr.link("add", ifname="br0", kind="bridge")
        br = ipr.link_lookup(ifname="br0")[0]
        for ifn in ifnames:
            ipr.link("set", index=ipr.link_lookup(ifname=ifn)[0], master=br)
        ipr.link("set", index=br, state="up")
    finally:
        ipr.close()


def _wait_bridge_forwarding(netns_name: str, ifnames: list[str], timeout: float = 5.0) -> None:
    """With STP off a bridge port forwards at once, but check: a port still 'learning' would
    silently drop the first frames and be charged to the bridge."""
    from pyroute2 import IPRoute

    from ..topo.netns import in_netns

    with in_netns(netns_name):
        ipr = IPRoute()
    try:
        deadline = time.monotonic() + timeout
        while True:
            states = {}
            for ifn in ifnames:
                link = ipr.get_links(ipr.link_lookup(ifname=ifn)[0])[0]
                info = link.get("IFLA_PROTINFO")
                state = info.get("IFLA_BRPORT_STATE") if info is not None else None
                states[ifn] = state
            if all(s in (None, 3) for s in states.values()):  # 3 = BR_STATE_FORWARDING
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"bridge ports not forwarding after {timeout:g} s: {states}")
            time.sleep(0.05)
    finally:
        ipr.close()


# --------------------------------------------------------------------------- one measurement


def _run_load(chain: Chain, size: int, duration: float) -> dict[str, Any]:
    """Blast ``size``-byte frames from gen for ``duration`` s; count what reaches the sink."""
    from ..topo.netns import ns_exec_argv

    sink = SinkCounter(chain.sink_ns, chain.sink_if)
    try:
        plan = cpu_plan()
        argv = _helper_argv("gen", ifname=chain.gen_if, size=size, duration=duration, src_mac=chain.gen_mac,
                            dst_mac=chain.sink_mac, cpus=plan[0] if plan else None)
        node = chain.gen_ns[len(chain.prefix) + 1:]
        with _spawned(ns_exec_argv(chain.prefix, node, argv)) as gen:
            _wait_ready(gen, "the generator")
            sink.reset()  # nothing before the generator's first frame counts
            result = _json_result(gen, "the generator", duration + 30)
        time.sleep(DRAIN_S)
        received = sink.read()
    finally:
        sink.close()
    elapsed = result["elapsed_s"]
    sent = result["sent"]
    return {
        "sent": sent,
        "received": received,
        "gen_elapsed_s": elapsed,
        "gen_short_batches": result["short_batches"],
        "offered_fps": sent / elapsed if elapsed > 0 else 0.0,
        "rx_fps": received / elapsed if elapsed > 0 else 0.0,
        "loss": 1.0 - received / sent if sent else 0.0,
        # below this loss the device kept up with everything offered: its rate is a lower bound
        "dut_saturated": bool(sent) and received < (1.0 - SATURATION_LOSS) * sent,
    }


def _switch_drops(status: dict[str, Any]) -> dict[str, Any]:
    """Per switch and port, the counters that say where frames were lost."""
    keep = ("rx_frames", "tx_frames", "kernel_drops", "queue_drops", "send_errors", "fcs_errors", "mtu_drops",
            "malformed", "buffer_peak")
    out: dict[str, Any] = {}
    for node, st in status.get("daemons", {}).items():
        if "ports" not in st:
            out[node] = {"error": st.get("error", "no status")}
            continue
        out[node] = {
            "internal_errors": st.get("internal_errors", 0),
            "ports": {p: {k: c.get(k, 0) for k in keep} for p, c in st["ports"].items()},
        }
    return out


def _where_lost(record: dict[str, Any]) -> str:
    parts = []
    if "forwarder" in record:
        f = record["forwarder"]
        if f.get("kernel_drops"):
            parts.append(f"fwd sock {_si(f['kernel_drops'])}")
        if f.get("send_errors"):
            parts.append(f"fwd send {_si(f['send_errors'])}")
    for node, st in record.get("switches", {}).items():
        for port, c in st.get("ports", {}).items():
            for key, label in (("kernel_drops", "sock"), ("queue_drops", "queue"), ("send_errors", "send"),
                               ("fcs_errors", "fcs")):
                if c.get(key):
                    parts.append(f"{node}/{port} {label} {_si(c[key])}")
    if not record.get("dut_saturated", True):
        parts.insert(0, "none: generator-bound, rx is a lower bound")
    return ", ".join(parts) if parts else "-"


def _si(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:.2f}M"
    if n >= 1e3:
        return f"{n / 1e3:.0f}k"
    return f"{n:.0f}"


def _measure_bare(chain: Chain, size: int, duration: float) -> dict[str, Any]:
    from ..topo.netns import ns_exec_argv

    plan = cpu_plan()
    argv = _helper_argv("bare", rx="p-gen", tx="p-sink", cpus=plan[1] if plan else None)
    with _spawned(ns_exec_argv(chain.prefix, "mid", argv)) as fwd:
        _wait_ready(fwd, "the bare forwarder")
        record = _run_load(chain, size, duration)
        fwd.send_signal(signal.SIGTERM)
        record["forwarder"] = _json_result(fwd, "the bare forwarder", 10)
    return record


def _measure_switch(chain: Chain, size: int, duration: float) -> dict[str, Any]:
    from .. import runtime

    for node in chain.switches:
        runtime.control(chain.prefix, node, "clear_counters")
    record = _run_load(chain, size, duration)
    time.sleep(STATS_WAIT_S)  # let each daemon fold the kernel's socket drops into its counters
    record["switches"] = _switch_drops(runtime.status(chain.prefix))
    return record


# --------------------------------------------------------------------------- the benchmark


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _parse_sizes(raw: Any) -> list[int]:
    if raw is None:
        return list(DEFAULT_SIZES)
    if isinstance(raw, str):
        items = [s for s in raw.replace(" ", "").split(",") if s]
    else:
        items = list(raw)
    try:
        sizes = [int(s) for s in items]
    except ValueError:
        raise ValueError(f"--sizes {raw!r}: give frame sizes in bytes, comma separated (e.g. 64,1500)") from None
    bad = [s for s in sizes if not MIN_SIZE <= s <= MAX_SIZE]
    if bad or not sizes:
        raise ValueError(f"--sizes {raw!r}: each size must be in [{MIN_SIZE}, {MAX_SIZE}] bytes")
    return sizes


def run_benchmark(sizes: list[int], duration: float, paths: list[str], prefix: str,
                  rounds: int = 1) -> list[dict[str, Any]]:
    """Measure every (path, size) ``rounds`` times, the paths alternating within each round (so
    that slow drift of this VM's speed hits every path alike); records carry their ``round``.
    Every namespace and process is gone when this returns or raises."""
    records: list[dict[str, Any]] = []
    for r in range(rounds):
        if rounds > 1:
            _say(f"round {r + 1} of {rounds}")
        for rec in _run_round(sizes, duration, paths, prefix):
            rec["round"] = r
            records.append(rec)
    return records


def median(values: list[float]) -> float:
    v = sorted(values)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def summarise(records: list[dict[str, Any]], sizes: list[int], paths: list[str]) -> list[dict[str, Any]]:
    """Per size: the median rate of every path over the rounds, and for each switch path the median
    and range of its per-round ratio to the bare forwarder measured in the same round."""
    summary = []
    for size in sizes:
        row: dict[str, Any] = {"size_bytes": size}
        mine = [r for r in records if r["size_bytes"] == size]
        for path in paths:
            rates = [r["rx_fps"] for r in mine if r["path"] == path]
            if rates:
                row[f"{path}_rx_fps"] = median(rates)
                row[f"{path}_rx_fps_range"] = [min(rates), max(rates)]
        for sw in ("switch1", "switch2"):
            ratios = [r["ratio_vs_bare"] for r in mine if r["path"] == sw and r.get("ratio_vs_bare") is not None]
            if ratios:
                row[f"{sw}_vs_bare"] = median(ratios)
                row[f"{sw}_vs_bare_range"] = [min(ratios), max(ratios)]
        if "switch1_vs_bare" in row:
            row["goal_met"] = row["switch1_vs_bare"] >= GOAL_RATIO
        summary.append(row)
    return summary


def _run_round(sizes: list[int], duration: float, paths: list[str], prefix: str) -> list[dict[str, Any]]:
    from .. import runtime
    from ..topo import netns
    from ..topo.model import loads_topology

    records: list[dict[str, Any]] = []

    def measured(path: str, chain: Chain, fn: Any) -> None:
        for size in sizes:
            _say(f"[{path} {size} B] {duration:g} s of offered load ...")
            rec = {"path": path, "label": PATH_LABELS[path], "size_bytes": size, **fn(chain, size, duration)}
            records.append(rec)
            _say(f"[{path} {size} B] offered {_si(rec['offered_fps'])}/s, rx {_si(rec['rx_fps'])}/s, "
                 f"loss {rec['loss']:.1%}; lost at: {_where_lost(rec)}")

    if "bare" in paths or "bridge" in paths:
        topo = loads_topology(chain_toml("bench-forwarding-mid", ["mid"]), "<bench forwarding: gen-mid-sink>")
        _say(f"building gen - mid - sink (prefix {prefix}) for the bare forwarder and the bridge")
        try:
            built = netns.build(topo, prefix)
            chain = _chain_of(built, [])
            if "bare" in paths:
                measured("bare", chain, _measure_bare)
            if "bridge" in paths:
                _make_bridge(built.netns("mid"), ["p-gen", "p-sink"])
                _wait_bridge_forwarding(built.netns("mid"), ["p-gen", "p-sink"])
                measured("bridge", chain, lambda c, s, d: _run_load(c, s, d))
        finally:
            netns.teardown(prefix)

    for path, switches in (("switch1", ["sw1"]), ("switch2", ["sw1", "sw2"])):
        if path not in paths:
            continue
        topo = loads_topology(chain_toml(f"bench-forwarding-{path}", switches), f"<bench forwarding: {path}>")
        try:
            state = runtime.up(topo, prefix, progress=_say)
            plan = cpu_plan()
            if plan:
                for daemon in state["daemons"]:
                    pin(daemon["pid"], plan[1])
            chain = _chain_of(netns.plan(topo, prefix), switches)
            measured(path, chain, _measure_switch)
        finally:
            runtime.down(prefix)
    return records


def main(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("netstack bench forwarding needs root (network namespaces, veths, AF_PACKET)", file=sys.stderr)
        return 2
    duration = float(getattr(args, "duration", None) or DEFAULT_DURATION_S)
    rounds = int(getattr(args, "rounds", None) or DEFAULT_ROUNDS)
    try:
        sizes = _parse_sizes(getattr(args, "sizes", None))
    except ValueError as exc:
        print(f"netstack bench forwarding: {exc}", file=sys.stderr)
        return 2
    only = getattr(args, "only", None)
    paths = [p for p in PATHS if not only or any(s in p for s in only)]
    if not paths:
        print(f"no path matches --only (paths: {', '.join(PATHS)})", file=sys.stderr)
        return 2
    prefix = f"bfw{secrets.token_hex(3)}"
    cpus = os.cpu_count() or 1
    notes = [
        f"Generator, sink and forwarders all run on this machine's {cpus} CPU core(s)"
        + (" (a 2-core VM cannot give each its own core)" if cpus <= 2 else "")
        + ": the kernel's veth/softirq work (delivery, socket drops) is charged to whichever core sends, "
        "so rates are lower bounds of what the forwarder could do on an otherwise idle machine, and the "
        "generator's offered rate varies with how much kernel work each frame causes.",
        "Frame size = bytes handed to send(): Ethernet + IPv4 + UDP + payload, without the 4-byte FCS "
        "(64 B here is a 68 B frame on a real wire).",
        f"rx = frames reaching the sink's interface (kernel BPF counter, UDP port {UDP_PORT}) / generator "
        "seconds; loss = 1 - received/sent.",
        f"Switch links: {LINK_RATE}, delay 0, buffer {LINK_BUFFER}: the pacer is not the bottleneck. "
        "The sw1-sw2 link carries the software FCS (4 B CRC32 trailer).",
        "Generator: one process, sendmmsg of 256 pre-built frames per call (mmsghdr and frames built "
        "once), so that it out-runs the forwarders it overloads.",
        "BMv2 reference is a documented number, not measured here.",
    ]
    plan = cpu_plan()
    if plan:
        notes.append(f"CPU pinning: generator on CPU {plan[0]}, forwarding processes (bare forwarder, every switch "
                     f"daemon) on CPU(s) {plan[1]}; with 2 cores both daemons of switch2 share one core. "
                     f"The kernel bridge forwards in softirq on the generator's core, so it is generator-bound. "
                     f"{PIN_ENV}=0 disables pinning.")
    else:
        notes.append("No CPU pinning: the scheduler placed every process.")
    load_before = loadavg()
    if load_before and load_before[0] > 0.5:
        notes.append(f"1-min load average was {load_before[0]} at start: other work (or a just-finished run) was "
                     "competing for the CPU; rates may be low and vary between runs.")
    _say(f"netstack bench forwarding: sizes {sizes} B, {duration:g} s per run, {rounds} round(s), "
         f"paths {', '.join(paths)}")
    for n in notes:
        _say(f"note: {n}")

    with sigterm_unwinds():
        records = run_benchmark(sizes, duration, paths, prefix, rounds)

    bare = {(r["round"], r["size_bytes"]): r["rx_fps"] for r in records if r["path"] == "bare"}
    for r in records:
        b = bare.get((r["round"], r["size_bytes"]))
        r["ratio_vs_bare"] = (r["rx_fps"] / b) if b else None
    summary = summarise(records, sizes, paths)

    path = write_results(getattr(args, "results_dir", "results"), "bench-forwarding", {
        "method": "gen process blasts pre-built UDP frames (sendmmsg) for duration_s; the sink counts arrivals "
                  "in the kernel; each path is measured in the same run on the same machine",
        "duration_s": duration,
        "rounds": rounds,
        "sizes_bytes": sizes,
        "paths": paths,
        "prefix": prefix,
        "udp_port": UDP_PORT,
        "link": {"rate": LINK_RATE, "delay": "0", "buffer": LINK_BUFFER},
        "cpu_plan": {"generator": plan[0], "forwarders": plan[1]} if plan else None,
        "goal": {"switch_vs_bare_ratio": GOAL_RATIO, "applies_to": "switch1"},
        "bmv2_reference": BMV2_REFERENCE,
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
        "notes": notes,
        "summary": summary,
        "results": records,
    })
    rows = []
    for r in records:
        ratio = r["ratio_vs_bare"]
        rows.append([r["round"] + 1, f"{r['size_bytes']} B", r["path"], r["offered_fps"], r["rx_fps"],
                     f"{r['loss']:.1%}", "-" if ratio is None else f"{ratio:.0%}",
                     f"{r['rx_fps'] * r['size_bytes'] * 8 / 1e6:.0f}", _where_lost(r)])
    print(format_table(["round", "size", "path", "offered/s", "rx/s", "loss", "vs bare", "rx Mbit/s", "lost at"],
                       rows))
    print()
    med = []
    for row in summary:
        for path in paths:
            if f"{path}_rx_fps" not in row:
                continue
            lo, hi = row[f"{path}_rx_fps_range"]
            ratio = row.get(f"{path}_vs_bare")
            rng = row.get(f"{path}_vs_bare_range")
            med.append([f"{row['size_bytes']} B", path, row[f"{path}_rx_fps"], f"{_si(lo)}-{_si(hi)}",
                        "-" if ratio is None else f"{ratio:.0%}",
                        "-" if rng is None else f"{rng[0]:.0%}-{rng[1]:.0%}"])
    print(f"medians over {rounds} round(s):")
    print(format_table(["size", "path", "median rx/s", "rx/s range", "median vs bare", "vs bare range"], med))
    print()
    for row in summary:
        if "switch1_vs_bare" in row:
            verdict = "meets" if row["goal_met"] else "misses"
            lo, hi = row["switch1_vs_bare_range"]
            print(f"{row['size_bytes']} B: 1 switch reaches {row['switch1_vs_bare']:.0%} of the bare forwarder "
                  f"(median of {rounds}, range {lo:.0%}-{hi:.0%}; {verdict} the {GOAL_RATIO:.0%} goal)")
    lo, hi = BMV2_REFERENCE["frames_per_s_low"], BMV2_REFERENCE["frames_per_s_high"]
    print(f"reference (documented, not measured): BMv2 simple_switch ~{lo // 1000}-{hi // 1000} k frames/s")
    for n in notes:
        print(f"note: {n}")
    print(f"\nwrote {path}")
    return 0


# --------------------------------------------------------------------------- helper processes


class PrebuiltBatch:
    """``sendmmsg`` of the same frames over and over, with the mmsghdr array built once.

    ``PacketPort.send_batch`` joins the frames into one buffer and sets the iovecs on every call
    (right for a switch, whose frames change every call); a generator that sends the same frames
    again and again skips even that, so one core offers ~0.8 M frames/s, enough to overload the
    forwarders under test. Stops early on EAGAIN/ENOBUFS (returns what
    the kernel took; the caller counts the rest as not sent).
    """

    def __init__(self, fd: int, frames: list[bytes]) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        self._sendmmsg = libc.sendmmsg
        self._sendmmsg.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_uint, ctypes.c_int]
        self._sendmmsg.restype = ctypes.c_int
        self.fd = fd
        self.count = len(frames)
        self._bufs = [ctypes.create_string_buffer(f, len(f)) for f in frames]
        self._iovs = (_IOVec * self.count)()
        self._msgs = (_MMsgHdr * self.count)()
        for i, (buf, frame) in enumerate(zip(self._bufs, frames, strict=True)):
            self._iovs[i].iov_base = ctypes.addressof(buf)
            self._iovs[i].iov_len = len(frame)
            self._msgs[i].msg_hdr.msg_iov = ctypes.pointer(self._iovs[i])
            self._msgs[i].msg_hdr.msg_iovlen = 1
        self._addr = ctypes.addressof(self._msgs)

    def send(self) -> int:
        rc = self._sendmmsg(self.fd, self._addr, self.count, MSG_DONTWAIT)
        return rc if rc > 0 else 0


def _role_gen(p: dict[str, Any]) -> int:
    """Send pre-built frames as fast as one core can for p['duration'] seconds."""
    from ..io.packet import PacketPort

    if p.get("cpus"):
        os.sched_setaffinity(0, p["cpus"])
    port = PacketPort(p["ifname"], rcvbuf=4096)
    frames = [make_frame(p["size"], p["src_mac"], p["dst_mac"], ident=i % 256) for i in range(GEN_BATCH)]
    batch = PrebuiltBatch(port.fd, frames)
    print("ready", flush=True)
    sent = 0
    short = 0  # calls where the kernel took fewer than the whole batch (socket buffer full)
    clock = time.perf_counter
    send = batch.send
    full = batch.count
    start = clock()
    deadline = start + p["duration"]
    while clock() < deadline:
        n = send()
        sent += n
        if n < full:
            short += 1
    elapsed = clock() - start
    print(json.dumps({"sent": sent, "elapsed_s": elapsed, "short_batches": short}), flush=True)
    port.close()
    return 0


class _Stop(Exception):
    """SIGTERM in a helper: leave the loop and report (not an OSError, so no send error)."""


def _role_bare(p: dict[str, Any]) -> int:
    """The baseline: recv_into one AF_PACKET socket, send on the other, nothing else."""
    if p.get("cpus"):
        os.sched_setaffinity(0, p["cpus"])
    rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    rx.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    rx.bind((p["rx"], ETH_P_ALL))
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
    tx.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    tx.bind((p["tx"], 0))
    def _term(signum: int, frame: Any) -> None:
        raise _Stop

    signal.signal(signal.SIGTERM, _term)
    buf = bytearray(9216)
    view = memoryview(buf)
    recv_into = rx.recv_into
    send = tx.send
    forwarded = 0
    send_errors = 0
    print("ready", flush=True)
    try:
        while True:
            n = recv_into(view)
            try:
                send(view[:n])
                forwarded += 1
            except OSError:
                send_errors += 1
    except _Stop:
        pass
    packets, drops = struct.unpack("II", rx.getsockopt(SOL_PACKET, PACKET_STATISTICS, 8))
    print(json.dumps({"forwarded": forwarded, "send_errors": send_errors, "kernel_packets": packets,
                      "kernel_drops": drops}), flush=True)
    return 0


def _helper_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.bench.forwarding",
                                     description="helper processes of 'netstack bench forwarding'")
    parser.add_argument("--role", choices=["gen", "bare"], required=True)
    parser.add_argument("--params", required=True, help="JSON parameters")
    args = parser.parse_args(argv)
    params = json.loads(args.params)
    return _role_gen(params) if args.role == "gen" else _role_bare(params)


if __name__ == "__main__":
    sys.exit(_helper_main())
