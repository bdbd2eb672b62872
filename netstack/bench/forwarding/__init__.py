"""``netstack bench forwarding``: frames/s through one and two userspace switches, next to a
bare Python forwarder and the kernel's own bridge, all measured in the same run.

Set-up (one layer-2 chain of namespaces per path, torn down before the next is built)::

    gen --- DUT --- sink        DUT = bare | bridge | sw1 | sw1 = sw2

- **bare**: a Python process in the middle namespace, ``recv_into`` on one AF_PACKET socket and
  ``send`` on the other, no engine: the ceiling of any Python forwarder on this machine
  (docs/architecture.md "The live runtime": 0.27-0.33 M frames/s measured for 64-byte frames).
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

Modules: ``params``, ``frames`` and ``helpers`` (the generator and the bare forwarder, run as
``python -m netstack.bench.forwarding --role gen|bare``), ``sink``, ``chain`` (the namespaces),
``measure`` (one measurement, the rounds) and ``report``; :func:`main` here runs them.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys

from ...validity import Validity
from ..common import parse_frame_sizes
from ..output import loadavg, say, write_results
from ..proc import PIN_ENV, sigterm_unwinds
from .frames import make_frame
from .measure import cpu_plan, run_benchmark
from .params import (
    BMV2_REFERENCE,
    DEFAULT_DURATION_S,
    DEFAULT_ROUNDS,
    DEFAULT_SIZES,
    GOAL_RATIO,
    LINK_BUFFER,
    LINK_RATE,
    MAX_SIZE,
    MIN_SIZE,
    PATHS,
    STATS_WAIT_S,
    UDP_PORT,
)
from .report import median, print_report, summarise

__all__ = ["main", "make_frame", "run_benchmark", "summarise", "median", "cpu_plan", "PATHS", "UDP_PORT",
           "STATS_WAIT_S", "DEFAULT_SIZES", "MIN_SIZE", "MAX_SIZE"]


def _notes(plan: tuple[list[int], list[int]] | None, load_before: list[float]) -> list[str]:
    """What a reader needs to know to read the numbers (printed, and kept in the JSON)."""
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
    if plan:
        notes.append(f"CPU pinning: generator on CPU {plan[0]}, forwarding processes (bare forwarder, every switch "
                     f"daemon) on CPU(s) {plan[1]}; with 2 cores both daemons of switch2 share one core. "
                     f"The kernel bridge forwards in softirq on the generator's core, so it is generator-bound. "
                     f"{PIN_ENV}=0 disables pinning.")
    else:
        notes.append("No CPU pinning: the scheduler placed every process.")
    if load_before and load_before[0] > 0.5:
        notes.append(f"1-min load average was {load_before[0]} at start: other work (or a just-finished run) was "
                     "competing for the CPU; rates may be low and vary between runs.")
    return notes


def main(args: argparse.Namespace) -> int:
    if os.geteuid() != 0:
        print("netstack bench forwarding needs root (network namespaces, veths, AF_PACKET)", file=sys.stderr)
        return 2
    duration = float(getattr(args, "duration", None) or DEFAULT_DURATION_S)
    rounds = int(getattr(args, "rounds", None) or DEFAULT_ROUNDS)
    try:
        sizes = parse_frame_sizes(getattr(args, "sizes", None), DEFAULT_SIZES, MIN_SIZE, MAX_SIZE, "64,1500")
    except ValueError as exc:
        print(f"netstack bench forwarding: {exc}", file=sys.stderr)
        return 2
    only = getattr(args, "only", None)
    paths = [p for p in PATHS if not only or any(s in p for s in only)]
    if not paths:
        print(f"no path matches --only (paths: {', '.join(PATHS)})", file=sys.stderr)
        return 2
    prefix = f"bfw{secrets.token_hex(3)}"
    plan = cpu_plan()
    load_before = loadavg()
    notes = _notes(plan, load_before)
    say(f"netstack bench forwarding: sizes {sizes} B, {duration:g} s per run, {rounds} round(s), "
        f"paths {', '.join(paths)}")
    for n in notes:
        say(f"note: {n}")

    with sigterm_unwinds():
        # STATS_WAIT_S is read here, from this package, so that setting
        # netstack.bench.forwarding.STATS_WAIT_S (as the smoke test does) reaches the measurements
        records = run_benchmark(sizes, duration, paths, prefix, rounds, stats_wait_s=STATS_WAIT_S)

    # a measurement the machine's other work disturbed (netstack.validity) is listed, and kept out
    # of every ratio and median
    bare = {(r["round"], r["size_bytes"]): r["rx_fps"] for r in records if r["path"] == "bare" and r["valid"]}
    for r in records:
        b = bare.get((r["round"], r["size_bytes"]))
        r["ratio_vs_bare"] = (r["rx_fps"] / b) if b and r["valid"] else None
    summary = summarise([r for r in records if r["valid"]], sizes, paths)
    invalid = [{"row": f"round {r['round'] + 1} {r['path']} {r['size_bytes']} B",
                "reasons": Validity.of(r).reasons} for r in records if not r["valid"]]

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
        "valid": not invalid,
        "checks": [{"name": i["row"], "expected": "a valid measurement", "measured": "; ".join(i["reasons"]),
                    "ok": False} for i in invalid],
        "invalid_rows": invalid,
    })
    print_report(records, summary, paths, rounds, notes, path)
    for i in invalid:
        print(f"INVALID (not counted): {i['row']}: {'; '.join(i['reasons'])}")
    return 0
