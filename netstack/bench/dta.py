"""``netstack bench dta``: DTA ingestion end to end, next to a naive CPU collector, plus the
Key-Write experiments of Fig. 7 (query success vs load factor) and Fig. 9 (wrong answers vs
checksum width).

Live part (real namespaces, real frames; one topology, generated)::

    h1 (reporter) --- sw2 (translator) --- c1 (collector daemon: RoCEv2 responder -> /dev/shm)

Links are 1 Gbit/s with no propagation delay and 4 MB buffers: a report or a RoCEv2 frame
occupies the link for well under 1.5 us, so the line-rate pacer never limits the rate and
what is measured is the software (reporter, switch + translator, responder).

- **DTA**: the reporter tool (``python -m netstack.dta.live report ... --duration D``) in h1
  sends as fast as it can, cycling over 4096 distinct reports; sw2's translator turns each into
  RDMA operations; c1's responder executes them on its regions. Ingested reports/s = memory
  operations the responder executed (Key-Write WRITEs / N, Append entries written,
  Key-Increment Fetch&Adds / N) per second, from counters sampled every 0.25 s over the
  steady part of the run (the first 0.5 s is warm-up).
- **naive CPU collector**: the same reports, the same reporter, with the translator disabled
  (sw2 just forwards them) to a Python process in c1 that receives them on a UDP socket,
  decodes each (the fast codec in ``headers.dta``) and inserts it into a dict / list /
  counter. Measured in the same run, on a topology identical except that c1 runs no
  collector daemon (whose raw socket would otherwise also see every report).

CPU placement on a 2-core machine (``NETSTACK_BENCH_PIN=0`` disables it): the switch daemon
sw2 has CPU 1 to itself; the reporter (at nice 19, so it only soaks up spare cycles) and the
collector process (the responder, or the naive collector) share CPU 0. Every process, the
kernel's veth work and this driver compete for 2 cores: the rates are this VM's, not a NIC's.

Sans-IO part (the real data structure in memory, no network): Fig. 7 writes K distinct keys
once each, in sequence, with redundancy N into a Key-Write store of S slots
(``CollectorMemory`` + ``KeyWriteLayout``, the layout the translator writes and the queries
read) and queries every key back; Fig. 9 does the same at load factor 1 with N = 2 for
checksum widths 8..32 bits and counts wrong answers for written keys and for keys never
written. Also the entry point of the naive collector helper (``--role naive``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from .common import PIN_ENV, format_table, loadavg, pinnable_cpus, sigterm_unwinds, write_results

DEFAULT_DURATION_S = 2.0
LINK_RATE = "1Gbit"
LINK_BUFFER = "4MB"
WARMUP_S = 0.5
SAMPLE_S = 0.25
DRAIN_S = 0.6
DISTINCT_REPORTS = 4096
KEYWRITE_N = (1, 2, 4)
APPEND_B = (1, 2, 4, 8, 16)
INCREMENT_N = 2
NAIVE_KINDS = ("keywrite", "append", "increment")
#: Fig. 7 / Fig. 9 parameters (sans-IO, exact experiments on the data structure).
FIG7_SLOTS = 1 << 12
FIG7_LOAD_FACTORS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
FIG7_REDUNDANCY = (1, 2, 3, 4)
#: Fig. 7 rows also measured with the public, pure-CRC32 slot hash.
PUBLIC_HASH_N = (2, 4)
FIG9_SLOTS = 1 << 14
FIG9_WIDTHS = (8, 10, 12, 14, 16, 20, 24, 32)
FIG9_REDUNDANCY = 2
SEEDS = 3
#: A paced run "keeps up" when it loses less than this; at most SEARCH_STEPS paced runs per case.
LOSS_FREE = 0.01
#: ... and ingests at least this fraction of the offered rate during the run.
KEEP_UP = 0.95
#: A paced run whose reporter delivered less than this fraction of the asked rate is reporter-bound.
REPORTER_SHORT = 0.9
SEARCH_STEPS = 6
SO_RXQ_OVFL = 40
READY_TIMEOUT_S = 10.0
SUBNET = "10.0.0"


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- topology / placement


def topology_toml(collector_kind: str) -> str:
    return textwrap.dedent(f"""\
        [topology]
        name = "bench-dta-{collector_kind}"

        [defaults]
        rate = "{LINK_RATE}"
        delay = "0"
        buffer = "{LINK_BUFFER}"

        [[nodes]]
        name = "h1"
        kind = "host"
        ip = "{SUBNET}.1/24"

        [[nodes]]
        name = "c1"
        kind = "{collector_kind}"
        ip = "{SUBNET}.100/24"

        [[nodes]]
        name = "sw2"
        kind = "switch"

        [[links]]
        a = "h1"
        b = "sw2"

        [[links]]
        a = "sw2"
        b = "c1"
        """)


def cpu_plan() -> dict[str, list[int]] | None:
    """{"switch": [...], "collector": [...], "reporter": [...]}, or None (no pinning)."""
    cpus = pinnable_cpus()
    if cpus is None:
        return None
    return {"switch": cpus[1:2], "collector": cpus[:1], "reporter": cpus[:1]}


def _pin(pid: int, cpus: list[int]) -> None:
    from .forwarding import pin

    pin(pid, cpus)


# --------------------------------------------------------------------------- reporter


def _reporter_argv(prefix: str, kind: str, param: int, duration: float, rate: float,
                   plan: dict[str, list[int]] | None, seed: int) -> list[str]:
    from ..topo.netns import ns_exec_argv

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


def _json_last(proc: subprocess.Popen[str], what: str, timeout: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{what} did not finish within {timeout:.0f} s") from None
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode not in (0, -signal.SIGTERM) or not lines:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {err.strip()[-800:]}")
    return json.loads(lines[-1])


def _kill(proc: subprocess.Popen[str] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=2)


def _window_rate(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Slope of a counter between the first and last samples inside ``[start, end]``."""
    inside = [s for s in samples if start <= s[0] <= end]
    if len(inside) < 2:
        inside = samples
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (every thread; softirq work done in its context included)."""
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
    from .. import runtime

    ports = runtime.control(prefix, "sw2", "status")["ports"]
    return {p: c.get("kernel_drops", 0) + c.get("queue_drops", 0) + c.get("send_errors", 0)
            for p, c in ports.items()}


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {p: after[p] - before.get(p, 0) for p in after if after[p] - before.get(p, 0)}


def _quiesce(prefix: str, timeout: float = 10.0) -> None:
    """Wait until the collector has drained its backlog (its frame counter stops moving), so
    that one run's leftovers are never counted in the next."""
    from .. import runtime

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
                plan: dict[str, list[int]] | None, seed: int) -> dict[str, Any]:
    """One run: the reporter offers ``rate`` reports/s (0 = as fast as it can) for ``duration`` s."""
    from .. import runtime

    region = _region(kind, param)
    tkey = _translated_key(kind)

    def sample() -> tuple[float, dict[str, Any], dict[str, Any]]:
        tr = runtime.control(prefix, "sw2", "dta_status")["counters"]
        col = runtime.control(prefix, "c1", "status")
        return time.monotonic(), tr, col

    # a fresh translator per run (in sequence with the collector's QPs, see daemons/collector.py):
    # no grace period or half-built batch left over from the previous run
    from ..dta import control as dta_control

    dta_control.enable_translator(prefix, "sw2", "c1")
    _, tr0, col0 = sample()
    drops0 = _sw2_drops(prefix)
    cpu0 = {n: cpu_seconds(p) for n, p in pids.items()}
    proc = subprocess.Popen(_reporter_argv(prefix, kind, param, duration, rate, plan, seed), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    samples: list[tuple[float, dict[str, Any], dict[str, Any]]] = []
    try:
        deadline = time.monotonic() + duration + 30
        while proc.poll() is None and time.monotonic() < deadline:
            samples.append(sample())
            time.sleep(SAMPLE_S)
        rep = _json_last(proc, "the reporter", 30)
    finally:
        _kill(proc)
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
        "icrc_errors": r1["icrc_errors"] - r0["icrc_errors"],
        "naks": sum(q1[k] - q0[k] for k in ("naks_psn", "naks_access", "naks_invalid")),
        "out_of_sequence_dropped": q1["out_of_sequence_dropped"] - q0["out_of_sequence_dropped"],
        "sw2_drops": _delta(drops1, drops0),
        "collector_socket_drops": col1["kernel_drops"] - col0["kernel_drops"],
        "switch_cpu_us_per_report": _per_report_us(cpu1["sw2"] - cpu0["sw2"], total_ingested),
        "collector_cpu_us_per_report": _per_report_us(cpu1["c1"] - cpu0["c1"], total_ingested),
        "samples": len(samples),
    }


# --------------------------------------------------------------------------- live: naive collector


def measure_naive(prefix: str, pids: dict[str, int], kind: str, param: int, duration: float, rate: float,
                  plan: dict[str, list[int]] | None, seed: int) -> dict[str, Any]:
    import select

    from ..topo.netns import ns_exec_argv

    argv = [sys.executable, "-m", "netstack.bench.dta", "--role", "naive",
            "--params", json.dumps({"cpus": plan["collector"] if plan else None})]
    naive = subprocess.Popen(ns_exec_argv(prefix, "c1", argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True)
    proc = None
    try:
        assert naive.stdout is not None
        ready, _, _ = select.select([naive.stdout], [], [], READY_TIMEOUT_S)
        line = naive.stdout.readline() if ready else ""
        if line.strip() != "ready":
            raise RuntimeError(f"the naive collector did not start: {line!r}")
        drops0 = _sw2_drops(prefix)
        cpu0 = {"sw2": cpu_seconds(pids["sw2"]), "c1": cpu_seconds(naive.pid)}
        proc = subprocess.Popen(_reporter_argv(prefix, kind, param, duration, rate, plan, seed),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        rep = _json_last(proc, "the reporter", duration + 30)
        time.sleep(DRAIN_S)
        cpu1 = {"sw2": cpu_seconds(pids["sw2"]), "c1": cpu_seconds(naive.pid)}
        naive.send_signal(signal.SIGTERM)
        res = _json_last(naive, "the naive collector", 10)
        drops1 = _sw2_drops(prefix)
    finally:
        _kill(proc)
        _kill(naive)
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
    }


def keeps_up(run: dict[str, Any]) -> bool:
    """Less than :data:`LOSS_FREE` lost, and ingesting at the offered rate while it was offered
    (not merely draining a backlog the socket buffers absorbed after the reporter stopped)."""
    ing = run["ingested_per_s"] or 0.0
    return run["loss"] < LOSS_FREE and ing >= KEEP_UP * run["offered_per_s"]


def find_rate(measure: Any, duration: float, say: Any = None) -> dict[str, Any]:
    """Overload once, then search for the highest offered rate the path ingests with < 1 % loss.

    ``measure(rate)`` runs one measurement (rate 0 = as fast as the reporter can). The first
    paced run is at 95 % of what the overload run ingested; while runs keep up, the rate goes
    up by 25 % (overload can ingest *less* than the path sustains when paced: the reporter's
    drops at a full socket contend with the reader), else down by 15 %, at most
    :data:`SEARCH_STEPS` paced runs. A path whose overload run already loses < 1 % is
    reporter-bound: its capacity is at least what was offered (``reporter_bound``); so is one
    whose reporter cannot deliver a paced rate asked of it."""
    say = say or (lambda msg: None)

    def tell(label: str, run: dict[str, Any]) -> None:
        say(f"    {label}: offered {run['offered_per_s'] / 1e3:.1f} k/s, "
            f"ingested {(run['ingested_per_s'] or 0) / 1e3:.1f} k/s, loss {run['loss']:.2%}"
            + (f", resyncs {run['resyncs']}" if run.get("resyncs") else ""))

    sat = measure(0)
    tell("overload", sat)
    out: dict[str, Any] = {"overload": sat, "runs": [], "sustained": None, "reporter_bound": False}
    if sat["loss"] < LOSS_FREE:
        out["sustained"] = sat
        out["reporter_bound"] = True
        return out
    base = sat["ingested_per_s"] or sat["offered_per_s"] * (1 - sat["loss"])
    rate = 0.95 * base
    best = None
    direction = 0
    for _ in range(SEARCH_STEPS):
        run = measure(rate)
        out["runs"].append(run)
        ok = keeps_up(run)
        tell(f"paced {rate / 1e3:.1f} k/s", run)
        if run["offered_per_s"] < REPORTER_SHORT * rate:  # the reporter, not the path, is the limit now
            out["reporter_bound"] = True
            if ok:
                best = run
            break
        if ok:
            best = run
        if direction == 0:
            direction = 1 if ok else -1
        if (direction == 1 and not ok) or (direction == -1 and ok):
            break
        rate *= 1.25 if direction == 1 else 0.85
    out["sustained"] = best
    return out


def _role_naive(p: dict[str, Any]) -> int:
    """A CPU collector: UDP socket, decode every report, insert into Python containers."""
    import socket
    import struct

    from headers.dta import Append, KeyIncrement, KeyWrite, decode_report
    from headers.errors import HeaderError

    if p.get("cpus"):
        os.sched_setaffinity(0, p["cpus"])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, SO_RXQ_OVFL, 1)  # the kernel reports its drop count with each datagram
    s.bind(("0.0.0.0", 40040))
    s.settimeout(0.1)
    stop = False

    def _term(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, _term)
    store: dict[int, tuple[int, ...]] = {}
    lists: dict[int, list[int]] = {}
    counters: dict[int, int] = {}
    count = errors = socket_drops = 0
    samples: list[tuple[float, int]] = []
    clock = time.monotonic
    next_sample = clock()
    recvmsg = s.recvmsg
    space = socket.CMSG_SPACE(4)
    print("ready", flush=True)
    while not stop:
        try:
            data, anc, _, _ = recvmsg(2048, space)
        except TimeoutError:
            data = None
        except InterruptedError:
            continue
        if data is not None:
            for _level, _type, cdata in anc:
                if len(cdata) >= 4:
                    socket_drops = struct.unpack("I", cdata[:4])[0]
            try:
                _, prim = decode_report(data)
            except HeaderError:
                errors += 1
                continue
            t = type(prim)
            if t is KeyWrite:
                store[prim.key] = prim.data
            elif t is Append:
                lst = lists.get(prim.list_id)
                if lst is None:
                    lists[prim.list_id] = lst = []
                lst.append(prim.data)
            elif t is KeyIncrement:
                counters[prim.key] = counters.get(prim.key, 0) + prim.counter
            count += 1
        now = clock()
        if now >= next_sample:
            samples.append((now, count))
            next_sample = now + 0.1
    samples.append((clock(), count))
    print(json.dumps({"count": count, "errors": errors, "socket_drops": socket_drops, "keys": len(store),
                      "list_entries": sum(map(len, lists.values())), "counters": len(counters),
                      "samples": samples}), flush=True)
    return 0


# --------------------------------------------------------------------------- sans-IO: Fig. 7 and Fig. 9


def _fill_keywrite(slots: int, redundancy: int, keys: list[int], checksum_bits: int = 32,
                   slot_hash: str = "crc32+mix") -> Any:
    from ..dta.memory import CollectorMemory
    from ..dta.query import CollectorQuery

    mem = CollectorMemory("fig", directory=None, rng=random.Random(0))
    region = mem.add_keywrite(slots, checksum_bits=checksum_bits, max_redundancy=redundancy, slot_hash=slot_hash)
    from ..dta.keywrite import KeyWriteLayout

    layout = KeyWriteLayout.from_dict(region.layout)
    base = region.base_va
    write = region.write
    for i, key in enumerate(keys):
        payload = layout.encode_slot(key, (i,))
        for n in range(redundancy):
            write(base + layout.slot_offset(key, n), payload)  # the WRITE the translator would send
    return CollectorQuery(mem)


def fig7(slots: int = FIG7_SLOTS, load_factors: tuple[float, ...] = FIG7_LOAD_FACTORS,
         redundancies: tuple[int, ...] = FIG7_REDUNDANCY, seeds: int = SEEDS) -> list[dict[str, Any]]:
    """Key-Write query success vs load factor (keys / slots) for each N: measured and analytic;
    plus N = 2 and 4 with the public translator's pure CRC32 slot hash (keywrite.py explains
    why its copies are correlated), to show what the mixed hash buys."""
    from ..dta.keywrite import expected_success

    rows = []
    variants = [(n, "crc32+mix") for n in redundancies] + [(n, "crc32") for n in PUBLIC_HASH_N]
    for n, mode in variants:
        for lf in load_factors:
            k = max(1, round(lf * slots))
            ok = total = 0
            for seed in range(seeds):
                keys = random.Random(1000 * n + seed).sample(range(1, 1 << 32), k)
                q = _fill_keywrite(slots, n, keys, slot_hash=mode)
                ok += sum(q.keywrite_get(key) == (i,) for i, key in enumerate(keys))
                total += k
                q.close()
            rows.append({"redundancy": n, "slot_hash": mode, "load_factor": lf, "keys": k, "slots": slots,
                         "success": ok / total, "expected": expected_success(k, n, slots)})
    return rows


def fig9(slots: int = FIG9_SLOTS, widths: tuple[int, ...] = FIG9_WIDTHS, redundancy: int = FIG9_REDUNDANCY,
         seeds: int = SEEDS) -> list[dict[str, Any]]:
    """Wrong-answer rate vs checksum width at load factor 1 (written keys and never-written keys)."""
    rows = []
    for bits in widths:
        wrong = missing = right = absent_wrong = total = 0
        occupancy = 0.0
        for seed in range(seeds):
            rng = random.Random(77 + seed)
            pool = rng.sample(range(1, 1 << 32), 2 * slots)
            keys, absent = pool[:slots], pool[slots:]
            q = _fill_keywrite(slots, redundancy, keys, bits)
            for i, key in enumerate(keys):
                got = q.keywrite_get(key)
                if got is None:
                    missing += 1
                elif got == (i,):
                    right += 1
                else:
                    wrong += 1
            absent_wrong += sum(q.keywrite_get(key) is not None for key in absent)
            region = q.memory.find("keywrite")
            occupancy += sum(region.read_words(i * 8, 1)[0] != 0 for i in range(slots)) / slots
            total += slots
            q.close()
        occ = occupancy / seeds
        model = 1 - (1 - occ / ((1 << bits) - 1)) ** redundancy
        rows.append({"checksum_bits": bits, "redundancy": redundancy, "load_factor": 1.0, "slots": slots,
                     "queries": total, "right": right / total, "wrong": wrong / total, "missing": missing / total,
                     "absent_wrong": absent_wrong / total, "absent_wrong_model": model, "occupancy": occ})
    return rows


# --------------------------------------------------------------------------- plots


def plots(results_dir: Path, live: list[dict[str, Any]], f7: list[dict[str, Any]],
          f9: list[dict[str, Any]]) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _say("matplotlib is not installed: no plots (pip install matplotlib)")
        return []
    results_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if f7:
        fig, ax = plt.subplots(figsize=(6, 4))
        colors = {}
        for n in sorted({r["redundancy"] for r in f7 if r["slot_hash"] == "crc32+mix"}):
            rs = [r for r in f7 if r["redundancy"] == n and r["slot_hash"] == "crc32+mix"]
            line, = ax.plot([r["load_factor"] for r in rs], [r["success"] for r in rs], "o-", label=f"N = {n}")
            colors[n] = line.get_color()
            ax.plot([r["load_factor"] for r in rs], [r["expected"] for r in rs], "--", color=line.get_color(),
                    alpha=0.5)
        for n in sorted({r["redundancy"] for r in f7 if r["slot_hash"] == "crc32"}):
            rs = [r for r in f7 if r["redundancy"] == n and r["slot_hash"] == "crc32"]
            ax.plot([r["load_factor"] for r in rs], [r["success"] for r in rs], "x:", color=colors.get(n),
                    label=f"N = {n}, public CRC32 slots")
        ax.set_xlabel("load factor (keys / slots)")
        ax.set_ylabel("query success rate")
        ax.set_title("Key-Write query success (Fig. 7); dashed: analytic")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
        path = results_dir / "bench-dta-fig7.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(str(path))
    if f9:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in (("wrong", "written keys: wrong answer"), ("absent_wrong", "absent keys: wrong answer")):
            pts = [(r["checksum_bits"], r[key]) for r in f9 if r[key] > 0]  # none seen: nothing to plot
            if pts:
                ax.semilogy([x for x, _ in pts], [y for _, y in pts], "o-", label=label)
        ax.semilogy([r["checksum_bits"] for r in f9], [r["absent_wrong_model"] for r in f9], "--",
                    label="absent keys: model 1-(1-occ/(2^b-1))^N")
        ax.set_xlabel("checksum width (bits)")
        ax.set_ylabel(f"wrong-answer rate ({f9[0]['queries']} queries per width)")
        ax.set_title(f"Key-Write wrong answers vs checksum (Fig. 9), N = {f9[0]['redundancy']}, load 1.0")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize="small")
        path = results_dir / "bench-dta-fig9.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(str(path))
    dta = [c for c in live if c["path"] == "dta" and _sustained(c)]
    if dta:
        naive = {c["kind"]: _sustained(c) for c in live if c["path"] == "naive"}
        bound = any(c["reporter_bound"] for c in live if c["path"] == "naive")
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(range(len(dta)), [_sustained(c) for c in dta], label="DTA: translator + RoCEv2 responder")
        labelled = False
        for i, c in enumerate(dta):
            if naive.get(c["kind"]):
                ax.hlines(naive[c["kind"]], i - 0.4, i + 0.4, colors="red",
                          label=None if labelled else "naive CPU collector (same reports)"
                          + (", a lower bound: reporter-bound" if bound else ""))
                labelled = True
        ax.set_xticks(range(len(dta)))
        ax.set_xticklabels([c["label"] for c in dta], rotation=30, ha="right")
        ax.set_ylabel("reports/s ingested, < 1 % loss")
        ax.set_title("DTA ingestion end to end (this 2-core VM)")
        top = max([_sustained(c) for c in dta] + [v for v in naive.values() if v])
        ax.set_ylim(0, top * 1.35)
        ax.legend(loc="upper left", fontsize="small")
        path = results_dir / "bench-dta-ingest.png"
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(str(path))
    return written


# --------------------------------------------------------------------------- driver


def _case_label(kind: str, param: int) -> str:
    return {"keywrite": f"Key-Write N={param}", "append": f"Append B={param}",
            "increment": f"Key-Increment N={param}"}[kind]


def live_cases(only: list[str] | None) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    dta = [("keywrite", n) for n in KEYWRITE_N] + [("append", b) for b in APPEND_B] + [("increment", INCREMENT_N)]
    naive = [("keywrite", 2), ("append", 4), ("increment", INCREMENT_N)]

    def keep(path: str, kind: str) -> bool:
        return not only or any(s in path or s in kind for s in only)

    return [c for c in dta if keep("dta", c[0])], [c for c in naive if keep("naive", c[0])]


def run_live(prefix: str, duration: float, dta_cases: list[tuple[str, int]],
             naive_cases: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Every live measurement; nothing of ``prefix`` is left when this returns or raises."""
    from .. import runtime
    from ..dta import control as dta_control
    from ..topo.model import loads_topology

    plan = cpu_plan()
    cases: list[dict[str, Any]] = []

    def bring_up(kind: str) -> dict[str, int]:
        topo = loads_topology(topology_toml(kind), f"<bench dta: h1 - sw2 - c1 ({kind})>")
        state = runtime.up(topo, prefix, progress=_say)
        pids = {d["node"]: d["pid"] for d in state["daemons"]}
        if plan:
            for d in state["daemons"]:
                _pin(d["pid"], plan["switch"] if d["kind"] == "switch" else plan["collector"])
        return pids

    def run(path: str, kind: str, param: int, measure: Any) -> None:
        _say(f"[{path} {_case_label(kind, param)}] {duration:g} s per run ...")
        found = find_rate(measure, duration, _say)
        cases.append({"path": path, "kind": kind, "param": param, "label": _case_label(kind, param), **found})

    if dta_cases:
        try:
            pids = bring_up("collector")
            dta_control.enable_translator(prefix, "sw2", "c1")
            for i, (kind, param) in enumerate(dta_cases):
                run("dta", kind, param, lambda rate, k=kind, p=param, i=i: measure_dta(
                    prefix, pids, k, p, duration, rate, plan, i))
        finally:
            runtime.down(prefix)
    if naive_cases:
        try:
            pids = bring_up("host")
            for i, (kind, param) in enumerate(naive_cases):
                run("naive", kind, param, lambda rate, k=kind, p=param, i=i: measure_naive(
                    prefix, pids, k, p, duration, rate, plan, i))
        finally:
            runtime.down(prefix)
    return cases


def _k(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e3:.1f} k"


def _us(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _sustained(case: dict[str, Any]) -> float | None:
    """The highest rate shown to be ingested: a paced run's offered rate (it kept up with it),
    or for a reporter-bound path what it ingested while the reporter went flat out."""
    s = case.get("sustained")
    if not s:
        return None
    if case.get("reporter_bound"):
        return min(s["ingested_per_s"] or 0.0, s["offered_per_s"])
    return s["offered_per_s"]


def tables(live: list[dict[str, Any]], f7: list[dict[str, Any]], f9: list[dict[str, Any]]) -> str:
    out = []
    naive = {c["kind"]: c for c in live if c["path"] == "naive"}
    rows = []
    for c in live:
        if c["path"] != "dta":
            continue
        s, o = c["sustained"], c["overload"]
        nv = naive.get(c["kind"])
        nrate = _sustained(nv) if nv else None
        ratio = (_sustained(c) / nrate) if nrate and _sustained(c) else None
        ref = s or o
        rows.append([c["label"], _k(_sustained(c)), f"{ref['rdma_ops_per_report']:.3g}"
                     if ref["rdma_ops_per_report"] is not None else "-",
                     _us(ref["switch_cpu_us_per_report"]), _us(ref["collector_cpu_us_per_report"]),
                     _k(o["offered_per_s"]), _k(o["ingested_per_s"]), f"{o['loss']:.0%}",
                     f"{o['resyncs']}/{o['collector_socket_drops']}",
                     ("≥ " if nv and nv["reporter_bound"] else "") + _k(nrate) if nv else "-",
                     ("≤ " if nv and nv["reporter_bound"] else "") + f"{ratio:.2f}" if ratio else "-"])
    if rows:
        out.append("Ingestion end to end (h1 reporter -> sw2 translator -> c1 RoCEv2 responder -> memory):\n")
        out.append(format_table(["case", "sustained ingest/s (<1% loss)", "RDMA ops/report",
                                 "sw2 CPU us/report", "c1 CPU us/report", "overload: offered/s", "overload: ingested/s",
                                 "overload: loss", "overload: resyncs/c1 socket drops", "naive collector/s",
                                 "DTA / naive"], rows))
    nrows = []
    for c in live:
        if c["path"] != "naive":
            continue
        s, o = c["sustained"], c["overload"]
        nrows.append([c["label"], ("≥ " if c["reporter_bound"] else "") + _k(_sustained(c)),
                      _us((s or o)["collector_cpu_us_per_report"]), _us((s or o)["switch_cpu_us_per_report"]),
                      _k(o["offered_per_s"]), f"{o['loss']:.1%}",
                      "reporter-bound (kept up with all it was offered)" if c["reporter_bound"] else "saturated"])
    if nrows:
        out.append("\nNaive CPU collector (translator off; UDP socket + decode + insert into a dict/list in c1):\n")
        out.append(format_table(["same reports as", "ingest/s", "c1 CPU us/report", "sw2 CPU us/report",
                                 "overload: offered/s", "overload: loss", "limit"], nrows))
    if f7:
        lfs = sorted({r["load_factor"] for r in f7})
        rows = []
        for mode in ("crc32+mix", "crc32"):
            for n in sorted({r["redundancy"] for r in f7 if r["slot_hash"] == mode}):
                by = {r["load_factor"]: r for r in f7 if r["redundancy"] == n and r["slot_hash"] == mode}
                label = f"N = {n}" if mode == "crc32+mix" else f"N = {n}, public CRC32 slots"
                rows.append([label, *(f"{by[lf]['success']:.3f} ({by[lf]['expected']:.3f})" for lf in lfs)])
        out.append(f"\nFig. 7 - Key-Write query success vs load factor ({f7[0]['slots']} slots, {SEEDS} seeds; "
                   "analytic in parentheses):\n")
        out.append(format_table(["", *(f"LF {lf:g}" for lf in lfs)], rows))
    if f9:
        rows = [[r["checksum_bits"], f"{r['right']:.4f}", f"{r['missing']:.4f}", f"{r['wrong']:.2e}",
                 f"{r['absent_wrong']:.2e}", f"{r['absent_wrong_model']:.2e}"] for r in f9]
        out.append(f"\nFig. 9 - wrong answers vs checksum width (N = {f9[0]['redundancy']}, load factor 1, "
                   f"{f9[0]['slots']} slots, {f9[0]['queries']} queries per width):\n")
        out.append(format_table(["checksum bits", "right", "not found", "wrong (written keys)",
                                 "wrong (absent keys)", "absent: model"], rows))
    return "\n".join(out)


def main(args: argparse.Namespace) -> int:
    duration = float(getattr(args, "duration", None) or DEFAULT_DURATION_S)
    only = getattr(args, "only", None)
    results_dir = Path(getattr(args, "results_dir", "results"))
    dta_cases, naive_cases = live_cases(only)
    do7 = not only or any(s in "fig7" for s in only)
    do9 = not only or any(s in "fig9" for s in only)
    if (dta_cases or naive_cases) and os.geteuid() != 0:
        print("netstack bench dta: the live part needs root (namespaces); run as root or use --only fig7 --only fig9",
              file=sys.stderr)
        return 2
    plan = cpu_plan()
    live_on = bool(dta_cases or naive_cases)
    notes = [
        f"Topology h1 - sw2 - c1, links {LINK_RATE}, delay 0, buffer {LINK_BUFFER}: a report or RoCEv2 frame "
        "occupies a link < 1.5 us, so the pacer is never the limit; the translator (Python, in the switch "
        "daemon) and the responder (Python, in the collector daemon) are what is measured.",
        f"Per case: one overload run (the reporter, at nice 19, sends as fast as it can for {duration:g} s, cycling "
        f"over {DISTINCT_REPORTS} distinct reports), then paced runs starting at 95 % of the overload ingest rate, "
        f"going up 25 % while the path keeps up (< {LOSS_FREE:.0%} lost and >= {KEEP_UP:.0%} of the offered rate "
        "ingested during the run) or down 15 % until it does: 'sustained' is the fastest run that kept up. "
        f"Rates are counter slopes sampled every {SAMPLE_S} s after {WARMUP_S} s of warm-up.",
        "ingested = reports whose memory operations the collector's responder executed (Key-Write WRITEs / N, "
        "Append entries written, Key-Increment Fetch&Adds / N); loss = 1 - ingested / sent over the whole run. "
        "CPU us/report = user+system CPU of the process over the run / reports ingested (kernel work done in the "
        "process's context, e.g. veth delivery of what it sends, included).",
        "The naive CPU collector gets the same reports (translator disabled, sw2 forwards) on a UDP socket in c1, "
        "decodes each with headers.dta and inserts it into a dict/list/counter; same CPU as the responder. It keeps "
        "up with everything the reporter can offer while sharing that CPU ('reporter-bound'): its number is a "
        "lower bound, its CPU us/report the fair comparison.",
        "Fig. 7 / Fig. 9 are computed on the real data structure (CollectorMemory + KeyWriteLayout, the "
        "bytes the translator's WRITEs carry), without the network.",
    ]
    if not live_on:
        notes = notes[-1:]
    if plan and live_on:
        notes.append(f"CPU placement: sw2 alone on CPU {plan['switch']}; the collector process (responder or naive) "
                     f"and the reporter (nice 19) on CPU {plan['collector']}; {PIN_ENV}=0 disables pinning.")
    load_before = loadavg()
    if load_before and load_before[0] > 0.5 and live_on:
        notes.append(f"1-min load average was {load_before[0]:.2f} at start: other work competed for the CPU.")
    _say(f"netstack bench dta: live cases {len(dta_cases)} DTA + {len(naive_cases)} naive, {duration:g} s each; "
         f"fig7 {'yes' if do7 else 'no'}, fig9 {'yes' if do9 else 'no'}")
    for n in notes:
        _say(f"note: {n}")

    prefix = f"bdta{secrets.token_hex(3)}"
    with sigterm_unwinds():
        live_records = run_live(prefix, duration, dta_cases, naive_cases) if (dta_cases or naive_cases) else []
    f7: list[dict[str, Any]] = []
    f9: list[dict[str, Any]] = []
    if do7:
        _say(f"[fig7] Key-Write success vs load factor, N = {FIG7_REDUNDANCY}, {FIG7_SLOTS} slots ...")
        f7 = fig7()
    if do9:
        _say(f"[fig9] wrong answers vs checksum width {FIG9_WIDTHS}, {FIG9_SLOTS} slots ...")
        f9 = fig9()
    pngs = plots(results_dir, live_records, f7, f9)
    table = tables(live_records, f7, f9)
    path = write_results(results_dir, "bench-dta", {
        "method": "reporter in h1 -> sw2 translator -> c1 RoCEv2 responder -> shared memory, vs a naive UDP "
                  "collector in c1, same run; Fig. 7/9 sans-IO on the Key-Write store",
        "duration_s": duration, "prefix": prefix,
        "link": {"rate": LINK_RATE, "delay": "0", "buffer": LINK_BUFFER},
        "cpu_plan": plan, "notes": notes, "plots": pngs, "loadavg_before": load_before, "loadavg_after": loadavg(),
        "live": live_records, "fig7": f7, "fig9": f9,
    })
    md = results_dir / "bench-dta-latest.md"
    md.write_text(table + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n")
    print(table)
    print()
    for n in notes:
        print(f"note: {n}")
    for p in pngs:
        print(f"plot: {p}")
    print(f"\nwrote {path} and {md}")
    return 0


def _helper_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m netstack.bench.dta",
                                     description="helper process of 'netstack bench dta'")
    parser.add_argument("--role", choices=["naive"], required=True)
    parser.add_argument("--params", required=True, help="JSON parameters")
    args = parser.parse_args(argv)
    return _role_naive(json.loads(args.params))


if __name__ == "__main__":
    sys.exit(_helper_main())
