"""One live measurement of ``netstack bench dta``: the reporter in h1 offers reports at a rate
for a while, and what got ingested is read from counters.

- **DTA**: sw2's translator turns each report into RDMA operations; c1's responder executes
  them on its regions. Ingested reports/s = memory operations the responder executed
  (Key-Write WRITEs / N, Append entries written, Key-Increment Fetch&Adds / N) per second,
  from counters sampled every 0.25 s over the steady part of the run (the first 0.5 s is
  warm-up).
- **naive CPU collector**: the same reports to a Python process in c1 (``naive.py``) that
  receives them on a UDP socket, decodes each and inserts it into a dict / list / counter.

Every measurement says whether it counts (:func:`validity_of`, netstack.validity): the reporter,
the collector and the switch are busy on purpose, so their scheduling delay says nothing; what
does is the CPU time *other* work took while the reporter ran (netstack.cpushare, at most
:data:`MAX_FOREIGN_SHARE` of all CPUs, as ``netstack bench forwarding``) and whether the reporter
sent for its planned duration.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from ...cpushare import CpuWindow
from ...validity import Validity
from ..forwarding.measure import MAX_FOREIGN_SHARE
from ..proc import json_result, spawned, wait_ready
from .params import DISTINCT_REPORTS, DRAIN_S, SAMPLE_S, SUBNET, WARMUP_S

#: the share of its planned seconds the reporter must have sent for
DURATION_SHARE = 0.9


def validity_of(share: dict[str, Any], seconds: float, duration: float) -> Validity:
    """A measurement counts when the reporter sent for its planned ``duration`` and other work
    took at most :data:`MAX_FOREIGN_SHARE` of all CPUs meanwhile (the forwarding benchmark's rule:
    beyond it the rate measures the neighbour as much as the path)."""
    v = Validity()
    v.at_least("reporter seconds", round(seconds, 3), DURATION_SHARE * duration,
               f" ({DURATION_SHARE:.0%} of the planned {duration:g} s)")
    if share:
        v.at_most("CPU time taken by other work (share of all CPUs)", share["foreign_share"], MAX_FOREIGN_SHARE)
    return v


def _ours(*pids: int) -> list[int]:
    """This driver and the measurement's processes (the daemons, the reporter, a collector)."""
    return [os.getpid(), *pids]

# --------------------------------------------------------------------------- reporter


def _reporter_argv(prefix: str, kind: str, param: int, duration: float, rate: float,
                   plan: dict[str, list[int]] | None, seed: int) -> list[str]:
    from ...topo.netns import ns_exec_argv

    argv = ["nice", "-n", "19", sys.executable, "-m", "netstack.dta.live", "report", kind, "--dst",
            f"{SUBNET}.100", "--duration", str(duration), "--rate", f"{rate:.0f}", "--count", str(DISTINCT_REPORTS),
            "--quiet"]
    if kind == "keywrite":
        argv += ["--key", str(seed * 1_000_000 + 1), "--value", "1", "--redundancy", str(param)]
    elif kind == "append":
        argv += ["--list", str(param), "--value", "1"]
    else:
        argv += ["--key", "1", "--keys", str(DISTINCT_REPORTS), "--redundancy", str(param), "--by", "1"]
    if plan:
        argv += ["--cpu", str(plan["reporter"][0])]
    return ns_exec_argv(prefix, "h1", argv)


def _window_rate(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Slope of a counter between the first and last samples inside ``[start, end]``."""
    inside = [s for s in samples if start <= s[0] <= end]
    if len(inside) < 2:
        inside = samples
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` so far, every thread: the scheduler's own account in nanoseconds
    (``/proc/<pid>/task/*/schedstat``, the time each thread ran) where the kernel has it, else
    user + system time in clock ticks (``/proc/<pid>/stat``). Ticks are sampled: a daemon that
    wakes briefly on a timer is charged a whole tick whenever one falls inside its run, so its
    share comes out too high or too low; schedstat is exact."""
    total = 0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            total += int((task / "schedstat").read_text().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------- live: DTA


def _region(kind: str, param: int) -> str:
    return {"keywrite": "keywrite", "append": f"append-{param}", "increment": "keyincrement"}[kind]


def _ingested(kind: str, param: int, qp: dict[str, Any]) -> float:
    """Reports whose memory operations the responder executed."""
    if kind == "keywrite":
        return qp["writes"] / param
    if kind == "append":
        return qp["write_bytes"] / 4
    return qp["fetch_adds"] / param


def _translated_key(kind: str) -> str:
    return {"keywrite": "keywrite", "append": "append", "increment": "keyincrement"}[kind]


def _sw2_drops(prefix: str) -> dict[str, int]:
    from ... import runtime

    ports = runtime.control(prefix, "sw2", "status")["ports"]
    return {p: c.get("kernel_drops", 0) + c.get("queue_drops", 0) + c.get("send_errors", 0)
            for p, c in ports.items()}


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {p: after[p] - before.get(p, 0) for p in after if after[p] - before.get(p, 0)}


def _quiesce(prefix: str, timeout: float = 10.0) -> None:
    """Wait until the collector has drained its backlog (its frame counter stops moving), so
    that one run's leftovers are never counted in the next."""
    from ... import runtime

    time.sleep(DRAIN_S)
    last = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frames = runtime.control(prefix, "c1", "status")["responder"]["frames"]
        if frames == last:
            return
        last = frames
        time.sleep(0.3)


def _per_report_us(cpu: float, reports: float) -> float | None:
    return cpu / reports * 1e6 if reports > 0 else None


def measure_dta(prefix: str, pids: dict[str, int], kind: str, param: int, duration: float, rate: float,
                plan: dict[str, list[int]] | None, seed: int, window: int | None = None) -> dict[str, Any]:
    """One run: the reporter offers ``rate`` reports/s (0 = as fast as it can) for ``duration`` s.
    ``window``: the translator's output window (None: ``dta_enable``'s default; 0: none)."""
    from ... import runtime

    region = _region(kind, param)
    tkey = _translated_key(kind)

    def sample() -> tuple[float, dict[str, Any], dict[str, Any]]:
        tr = runtime.control(prefix, "sw2", "dta_status")["counters"]
        col = runtime.control(prefix, "c1", "status")
        return time.monotonic(), tr, col

    # a fresh translator per run (in sequence with the collector's QPs, see daemons/collector.py):
    # no grace period or half-built batch left over from the previous run
    from ...dta import control as dta_control

    dta_control.enable_translator(prefix, "sw2", "c1", **({} if window is None else {"window": window}))
    _, tr0, col0 = sample()
    drops0 = _sw2_drops(prefix)
    cpu0 = {n: cpu_seconds(p) for n, p in pids.items()}
    samples: list[tuple[float, dict[str, Any], dict[str, Any]]] = []
    with spawned(_reporter_argv(prefix, kind, param, duration, rate, plan, seed)) as proc:
        cpu = CpuWindow(lambda: _ours(proc.pid, *pids.values())).start()
        deadline = time.monotonic() + duration + 30
        while proc.poll() is None and time.monotonic() < deadline:
            samples.append(sample())
            time.sleep(SAMPLE_S)
        rep = json_result(proc, "the reporter", 30)
        share = cpu.stop()
    _quiesce(prefix)
    _, tr1, col1 = sample()
    cpu1 = {n: cpu_seconds(p) for n, p in pids.items()}
    drops1 = _sw2_drops(prefix)
    start, end = rep["started_monotonic"] + WARMUP_S, rep["ended_monotonic"]
    ingest = [(t, _ingested(kind, param, col["responder"]["qps"][region])) for t, _, col in samples]
    translated = [(t, tr[tkey]) for t, tr, _ in samples]
    d_reports = tr1[tkey] - tr0[tkey]
    d_frames = tr1["roce_frames"] - tr0["roce_frames"]
    total_ingested = (_ingested(kind, param, col1["responder"]["qps"][region])
                      - _ingested(kind, param, col0["responder"]["qps"][region]))
    r1, r0 = col1["responder"], col0["responder"]
    q1, q0 = r1["qps"][region], r0["qps"][region]
    return {
        "path": "dta", "kind": kind, "param": param, "rate": rate,
        "offered_per_s": rep["offered_rate"], "sent": rep["sent"], "seconds": rep["seconds"],
        "ingested_per_s": _window_rate(ingest, start, end),
        "translated_per_s": _window_rate(translated, start, end),
        "translated_total": d_reports, "ingested_total": total_ingested,
        "loss": 1 - total_ingested / rep["sent"] if rep["sent"] else 0.0,
        "rdma_ops_per_report": d_frames / d_reports if d_reports else None,
        "responses_per_report": (tr1["responses"] - tr0["responses"]) / d_reports if d_reports else None,
        "resyncs": tr1["resyncs"] - tr0["resyncs"], "grace_dropped": tr1["grace_dropped"] - tr0["grace_dropped"],
        "window": window, **{k: tr1.get(k, 0) - tr0.get(k, 0) for k in ("window_dropped", "window_timeouts",
                                                                        "window_rewound")},
        "icrc_errors": r1["icrc_errors"] - r0["icrc_errors"],
        "naks": sum(q1[k] - q0[k] for k in ("naks_psn", "naks_access", "naks_invalid")),
        "out_of_sequence_dropped": q1["out_of_sequence_dropped"] - q0["out_of_sequence_dropped"],
        "sw2_drops": _delta(drops1, drops0),
        "collector_socket_drops": col1["kernel_drops"] - col0["kernel_drops"],
        "collector_wakeups": col1.get("rx_wakeups", 0) - col0.get("rx_wakeups", 0),
        "switch_cpu_us_per_report": _per_report_us(cpu1["sw2"] - cpu0["sw2"], total_ingested),
        "collector_cpu_us_per_report": _per_report_us(cpu1["c1"] - cpu0["c1"], total_ingested),
        "samples": len(samples), "cpu": share, **validity_of(share, rep["seconds"], duration).to_dict(),
    }


# --------------------------------------------------------------------------- live: naive collector


def measure_naive(prefix: str, pids: dict[str, int], kind: str, param: int, duration: float, rate: float,
                  plan: dict[str, list[int]] | None, seed: int) -> dict[str, Any]:
    from ...topo.netns import ns_exec_argv

    argv = [sys.executable, "-m", "netstack.bench.dta", "--role", "naive",
            "--params", json.dumps({"cpus": plan["collector"] if plan else None})]
    with spawned(ns_exec_argv(prefix, "c1", argv)) as naive:
        wait_ready(naive, "the naive collector")
        drops0 = _sw2_drops(prefix)
        cpu0 = {"sw2": cpu_seconds(pids["sw2"]), "c1": cpu_seconds(naive.pid)}
        with spawned(_reporter_argv(prefix, kind, param, duration, rate, plan, seed)) as proc:
            cpu = CpuWindow(lambda: _ours(proc.pid, naive.pid, *pids.values())).start()
            rep = json_result(proc, "the reporter", duration + 30)
            share = cpu.stop()
        time.sleep(DRAIN_S)
        cpu1 = {"sw2": cpu_seconds(pids["sw2"]), "c1": cpu_seconds(naive.pid)}
        naive.send_signal(signal.SIGTERM)
        res = json_result(naive, "the naive collector", 10)
        drops1 = _sw2_drops(prefix)
    start, end = rep["started_monotonic"] + WARMUP_S, rep["ended_monotonic"]
    samples = [(t, n) for t, n in res["samples"]]
    return {
        "path": "naive", "kind": kind, "param": param, "rate": rate,
        "offered_per_s": rep["offered_rate"], "sent": rep["sent"], "seconds": rep["seconds"],
        "ingested_per_s": _window_rate(samples, start, end), "ingested_total": res["count"],
        "loss": 1 - res["count"] / rep["sent"] if rep["sent"] else 0.0,
        "decode_errors": res["errors"], "collector_socket_drops": res["socket_drops"],
        "sw2_drops": _delta(drops1, drops0),
        "switch_cpu_us_per_report": _per_report_us(cpu1["sw2"] - cpu0["sw2"], res["count"]),
        "collector_cpu_us_per_report": _per_report_us(cpu1["c1"] - cpu0["c1"], res["count"]),
        "cpu": share, **validity_of(share, rep["seconds"], duration).to_dict(),
    }


