"""One measurement of ``netstack bench forwarding`` and the rounds of them: the generator blasts
frames at the device under test for ``--duration`` seconds and the sink counts what arrives;
every path is measured in each round, the paths alternating."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from ...cpushare import CpuWindow
from ...validity import Validity
from ..output import say
from ..proc import json_result, pin, pinnable_cpus, spawned, wait_ready
from .chain import Chain, chain_of, chain_toml, make_bridge, wait_bridge_forwarding
from .helpers import helper_argv
from .params import DRAIN_S, PATH_LABELS, SATURATION_LOSS, STATS_WAIT_S
from .report import si, where_lost
from .sink import SinkCounter


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


def run_load(chain: Chain, size: int, duration: float, dut_pids: list[int] | None = None) -> dict[str, Any]:
    """Blast ``size``-byte frames from gen for ``duration`` s; count what reaches the sink. The
    CPU time other work took meanwhile (``dut_pids``: the forwarding processes) decides whether
    the measurement counts (netstack.cpushare, :func:`validity_of`)."""
    from ...topo.netns import ns_exec_argv

    sink = SinkCounter(chain.sink_ns, chain.sink_if)
    try:
        plan = cpu_plan()
        argv = helper_argv("gen", ifname=chain.gen_if, size=size, duration=duration, src_mac=chain.gen_mac,
                            dst_mac=chain.sink_mac, cpus=plan[0] if plan else None)
        node = chain.gen_ns[len(chain.prefix) + 1:]
        with spawned(ns_exec_argv(chain.prefix, node, argv)) as gen:
            wait_ready(gen, "the generator")
            cpu = CpuWindow(lambda: [os.getpid(), gen.pid, *(dut_pids or [])]).start()
            sink.reset()  # nothing before the generator's first frame counts
            result = json_result(gen, "the generator", duration + 30)
            share = cpu.stop()
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
        "cpu": share,
        **validity_of(share, elapsed, duration).to_dict(),
    }


#: the share of all CPU time other work may take during a measurement (a busy loop elsewhere takes
#: 0.5 of this 2-core machine): beyond it the rates measure the neighbour as much as the forwarder
MAX_FOREIGN_SHARE = 0.15


def validity_of(share: dict[str, Any], elapsed: float, duration: float) -> Validity:
    """A forwarding measurement counts when it ran for its planned duration and other work took
    almost none of the CPUs meanwhile (netstack.validity)."""
    v = Validity()
    v.at_least("generator seconds", round(elapsed, 3), 0.9 * duration, f" (90 % of the planned {duration:g} s)")
    if share:
        v.at_most("CPU time taken by other work (share of all CPUs)", share["foreign_share"], MAX_FOREIGN_SHARE)
    return v


def switch_drops(status: dict[str, Any]) -> dict[str, Any]:
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


def measure_bare(chain: Chain, size: int, duration: float) -> dict[str, Any]:
    from ...topo.netns import ns_exec_argv

    plan = cpu_plan()
    argv = helper_argv("bare", rx="p-gen", tx="p-sink", cpus=plan[1] if plan else None)
    with spawned(ns_exec_argv(chain.prefix, "mid", argv)) as fwd:
        wait_ready(fwd, "the bare forwarder")
        record = run_load(chain, size, duration, [fwd.pid])
        fwd.send_signal(signal.SIGTERM)
        record["forwarder"] = json_result(fwd, "the bare forwarder", 10)
    return record


def measure_switch(chain: Chain, size: int, duration: float, stats_wait_s: float = STATS_WAIT_S) -> dict[str, Any]:
    from ... import runtime

    for node in chain.switches:
        runtime.control(chain.prefix, node, "clear_counters")
    pids = [d.pid for d in runtime.daemons_of(runtime.load_state(chain.prefix))]
    record = run_load(chain, size, duration, pids)
    time.sleep(stats_wait_s)  # let each daemon fold the kernel's socket drops into its counters
    record["switches"] = switch_drops(runtime.status(chain.prefix))
    return record


def run_benchmark(sizes: list[int], duration: float, paths: list[str], prefix: str,
                  rounds: int = 1, stats_wait_s: float = STATS_WAIT_S) -> list[dict[str, Any]]:
    """Measure every (path, size) ``rounds`` times, the paths alternating within each round (so
    that slow drift of this VM's speed hits every path alike); records carry their ``round``.
    Every namespace and process is gone when this returns or raises. ``stats_wait_s``: how
    long a switch daemon gets to fold the kernel's socket drops into its counters."""
    records: list[dict[str, Any]] = []
    for r in range(rounds):
        if rounds > 1:
            say(f"round {r + 1} of {rounds}")
        for rec in _run_round(sizes, duration, paths, prefix, stats_wait_s):
            rec["round"] = r
            records.append(rec)
    return records


def _run_round(sizes: list[int], duration: float, paths: list[str], prefix: str,
               stats_wait_s: float) -> list[dict[str, Any]]:
    from ... import runtime
    from ...topo import netns
    from ...topo.model import loads_topology

    records: list[dict[str, Any]] = []

    def measured(path: str, chain: Chain, fn: Any) -> None:
        for size in sizes:
            say(f"[{path} {size} B] {duration:g} s of offered load ...")
            rec = {"path": path, "label": PATH_LABELS[path], "size_bytes": size, **fn(chain, size, duration)}
            records.append(rec)
            say(f"[{path} {size} B] offered {si(rec['offered_fps'])}/s, rx {si(rec['rx_fps'])}/s, "
                f"loss {rec['loss']:.1%}; lost at: {where_lost(rec)}")

    if "bare" in paths or "bridge" in paths:
        topo = loads_topology(chain_toml("bench-forwarding-mid", ["mid"]), "<bench forwarding: gen-mid-sink>")
        say(f"building gen - mid - sink (prefix {prefix}) for the bare forwarder and the bridge")
        try:
            built = netns.build(topo, prefix)
            chain = chain_of(built, [])
            if "bare" in paths:
                measured("bare", chain, measure_bare)
            if "bridge" in paths:
                make_bridge(built.netns("mid"), ["p-gen", "p-sink"])
                wait_bridge_forwarding(built.netns("mid"), ["p-gen", "p-sink"])
                measured("bridge", chain, lambda c, s, d: run_load(c, s, d))
        finally:
            netns.teardown(prefix)

    for path, switches in (("switch1", ["sw1"]), ("switch2", ["sw1", "sw2"])):
        if path not in paths:
            continue
        topo = loads_topology(chain_toml(f"bench-forwarding-{path}", switches), f"<bench forwarding: {path}>")
        try:
            state = runtime.up(topo, prefix, progress=say)
            plan = cpu_plan()
            if plan:
                for daemon in state.daemons:
                    pin(daemon.pid, plan[1])
            chain = chain_of(netns.plan(topo, prefix), switches)
            measured(path, chain, lambda c, s, d: measure_switch(c, s, d, stats_wait_s))
        finally:
            runtime.down(prefix)
    return records
