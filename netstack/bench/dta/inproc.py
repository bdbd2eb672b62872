"""The in-process part of ``netstack bench dta`` (``--only inproc``): the CPU each DTA engine
spends per frame, without the network, the switch or the sockets around it.

The live numbers (sw2 / c1 CPU per report) include everything a daemon does besides the engine:
the switch's ring receive, forwarding, queueing, pacing and ``sendmmsg`` on sw2, the ring drain
and ``sendmmsg`` on c1. This part times the engines alone on this machine's CPU, which is what
the DTA translator's and responder's own per-frame goals are about:

- **translator**: :meth:`DTATranslator.on_report` over report frames from a real
  :class:`~netstack.dta.reporter.Reporter` (cycling over 4096 distinct reports, as the live
  runs), per report and per RoCEv2 frame it returns;
- **responder**: the collector NIC executing those frames (``receive_batch`` in batches of
  256, as the collector daemon drains its ring), per frame;
- **responses**: the translator handling the ATOMIC ACKNOWLEDGEs (Key-Increment), per response.

Per-thread CPU time (``time.thread_time_ns``), best of ``rounds``, so that other work on the
machine (another benchmark, the load of the live part) inflates nothing but the spread.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from .params import DISTINCT_REPORTS

MAC_T = bytes.fromhex("02000000710a")
MAC_C = bytes.fromhex("02000000c011")
MAC_R = bytes.fromhex("020000000101")
IP_T = bytes([10, 0, 0, 254])
IP_C = bytes([10, 0, 0, 100])
IP_R = bytes([10, 0, 0, 1])
BATCH = 256
#: The cases, as in the live part: (kind, parameter).
CASES = (("keywrite", 1), ("keywrite", 2), ("append", 16), ("increment", 2))


def _rig(kind: str, param: int) -> tuple[Any, Any, list[bytes]]:
    from ...dta.collector import RoceResponder
    from ...dta.memory import CollectorMemory
    from ...dta.reporter import Reporter
    from ...dta.translator import DTATranslator, TranslatorConfig

    mem = CollectorMemory("inproc", directory=None, rng=random.Random(1))
    if kind == "keywrite":
        mem.add_keywrite(1 << 16)
    elif kind == "append":
        mem.add_append_list(param, 1 << 16, batch=param)
    else:
        mem.add_keyincrement(1 << 16)
    nic = RoceResponder(mem, MAC_C, IP_C, rng=random.Random(2))
    tr = DTATranslator(TranslatorConfig(nic.connect_info(), MAC_T, IP_T), now_ns=0)
    nic.bind(MAC_T, IP_T, {name: qp.local_qpn for name, qp in tr.qps.items()})
    rep = Reporter(MAC_R, MAC_T, IP_R, IP_C)
    return tr, nic, [rep.frame(p) for p in _payloads(rep, kind, param)]


def _payloads(rep: Any, kind: str, param: int) -> list[bytes]:
    """The :data:`DISTINCT_REPORTS` report payloads of one case, as both measurements cycle them."""
    if kind == "keywrite":
        return [rep.key_write(1 + i, i, param) for i in range(DISTINCT_REPORTS)]
    if kind == "append":
        return [rep.append(param, i) for i in range(DISTINCT_REPORTS)]
    return [rep.key_increment(1 + i, 1, param) for i in range(DISTINCT_REPORTS)]


def _cpu(fn: Callable[[], Any]) -> tuple[int, Any]:
    t0 = time.thread_time_ns()
    result = fn()
    return time.thread_time_ns() - t0, result


def measure(kind: str, param: int, reports: int = 20_000, rounds: int = 5) -> dict[str, Any]:
    """One case: best-of-``rounds`` CPU per report / frame of each engine (module docstring)."""
    best: dict[str, float] = {}
    frames_per_report = responses_per_frame = 0.0
    for _ in range(rounds):
        tr, nic, frames = _rig(kind, param)
        batch = getattr(nic, "receive_batch", None)
        todo = [frames[i % len(frames)] for i in range(reports)]

        def translate(tr: Any = tr, todo: list[bytes] = todo) -> list[bytes]:
            out: list[bytes] = []
            for i, f in enumerate(todo):
                out += tr.on_report(f, i)
            return out

        def respond(nic: Any = nic, batch: Any = batch, out: list[bytes] | None = None) -> list[bytes]:
            assert out is not None
            resp: list[bytes] = []
            for s in range(0, len(out), BATCH):
                chunk = out[s:s + BATCH]
                if batch is not None:
                    resp += batch(chunk, 0)
                else:  # the engine before receive_batch existed
                    for f in chunk:
                        resp += nic.receive(f, 0)
            return resp

        t_tr, out = _cpu(translate)
        t_nic, resp = _cpu(lambda out=out: respond(out=out))
        t_resp, _ = _cpu(lambda tr=tr, resp=resp: [tr.on_roce_response(r, reports) for r in resp])
        nframes = max(1, len(out))
        frames_per_report, responses_per_frame = len(out) / reports, len(resp) / nframes
        for key, value in (("translator_us_per_report", t_tr / reports / 1e3),
                           ("translator_us_per_frame", t_tr / nframes / 1e3),
                           ("responder_us_per_frame", t_nic / nframes / 1e3),
                           ("responses_us_per_response", t_resp / len(resp) / 1e3 if resp else 0.0)):
            best[key] = min(best.get(key, value), value)
        executed = sum(q["writes"] + q["fetch_adds"] for q in nic.counters()["qps"].values())
        if executed != len(out) or tr.counters()["internal_errors"] or nic.counters()["internal_errors"]:
            raise RuntimeError(f"inproc {kind} {param}: {executed} of {len(out)} frames executed")
    return {"kind": kind, "param": param, "reports": reports, "rounds": rounds,
            "frames_per_report": frames_per_report, "responses_per_frame": responses_per_frame, **best}


def naive_measure(kind: str, param: int, reports: int = 20_000, rounds: int = 5) -> float:
    """The naive collector's host CPU per report, in process: decode each report's UDP payload
    (``headers.dta``) and insert it into a dict / list / counter, as ``naive.py`` does; best of
    ``rounds``, microseconds."""
    from headers.dta import Append, KeyIncrement, KeyWrite, decode_report

    from ...dta.reporter import Reporter

    rep = Reporter(MAC_R, MAC_T, IP_R, IP_C)
    payloads = _payloads(rep, kind, param)
    todo = [payloads[i % len(payloads)] for i in range(reports)]
    best = None
    for _ in range(rounds):
        store: dict[int, Any] = {}
        lists: dict[int, list[Any]] = {}
        counters: dict[int, int] = {}

        def ingest(todo: list[bytes] = todo, store: dict[int, Any] = store, lists: dict[int, list[Any]] = lists,
                   counters: dict[int, int] = counters) -> None:
            for data in todo:
                _, prim = decode_report(data)
                t = type(prim)
                if t is KeyWrite:
                    store[prim.key] = prim.data
                elif t is Append:
                    lists.setdefault(prim.list_id, []).append(prim.data)
                elif t is KeyIncrement:
                    counters[prim.key] = counters.get(prim.key, 0) + prim.counter

        t, _ = _cpu(ingest)
        us = t / reports / 1e3
        best = us if best is None else min(best, us)
    assert best is not None
    return best


def inproc(rounds: int = 5) -> list[dict[str, Any]]:
    """Every case of :data:`CASES`, with the naive collector's CPU per report for the same reports
    (``naive_us_per_report``) and the responder's per report (``responder_us_per_report``)."""
    out = []
    for kind, param in CASES:
        row = measure(kind, param, rounds=rounds)
        row["responder_us_per_report"] = row["responder_us_per_frame"] * row["frames_per_report"]
        row["naive_us_per_report"] = naive_measure(kind, param, rounds=rounds)
        out.append(row)
    return out
