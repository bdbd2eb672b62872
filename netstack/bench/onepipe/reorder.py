"""Fig. 11 of 1Pipe ("1Pipe: Scalable Total Order Communication in Data Center Networks", §7.1,
"reorder overhead"): what holding messages until the barrier passes them costs a receiving host,
in throughput and in buffer memory, as the reordering delay grows (0-125 µs).

A 1Pipe receiver buffers every message until the barrier from its ToR passes its timestamp
(§4, §6.1): the longer the barrier lags the data, the more it holds. The paper measures its
library on a host: 6.1 M msg/s and no buffer at no delay, 4.3 M msg/s and 3.1 MB at 125 µs
(the authors' data, docs/data/onepipe-paper/reorder_receiver).

**What we measure**: our receiving engine (:class:`netstack.onepipe.endpoint.Endpoint`, best
effort, sans-IO) fed, in process, :data:`MESSAGES` single-packet messages from :data:`SENDERS`
processes arriving :data:`PAPER_RATE` a second (virtual time, the paper's rate at no delay), each
carrying a barrier ``delay`` behind its own timestamp, as the ToR's aggregated barrier would lag
the data. The engine then holds about ``rate * delay`` messages. Per delay:

- ``cpu_ns``: CPU time (``time.process_time_ns``) per message received, ACKed and delivered: the
  least of :data:`REPEATS` passes (CPU time on a shared machine only grows with others' load);
- ``throughput``: ``1 / (cpu_ns * factor)`` M msg/s, ``factor`` the host CPU model's scale to the
  paper's hardware (netstack/onepipe/cpucost.py, calibrated on best effort's whole work per
  message; here it scales the receive side alone, so the absolute value is a receive-only
  capacity, the shape against no delay the comparable part);
- ``held``: messages buffered, on average over the run's second half; ``memory_mb``: what they
  take, from ``tracemalloc`` (Python objects: headers, payload copies, heap entries), in MB;
  ``buffer_mb``: that over the engine's own at no delay (its connections' state), the buffer's.

The baseline is the same engine at no delay, in the same run.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from typing import Any

#: the reordering delays of the paper's Fig. 11, µs
DELAYS_US = (0, 1, 5, 25, 125)
#: messages a second, in virtual time: the paper's throughput at no delay (reorder_receiver)
PAPER_RATE = 6.1e6
SENDERS = 32
MESSAGES = 20_000
REPEATS = 5
PAYLOAD = bytes(64)


def _datagrams(delay_ns: int, n: int) -> list[tuple[bytes, tuple[str, int], int]]:
    """``n`` DATA datagrams (one message each, SOM|EOM) from :data:`SENDERS` processes, in
    arrival order: (datagram, source, arrival time). Message ``i`` arrives at ``i / rate`` with
    that timestamp and a barrier ``delay_ns`` behind it."""
    from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode, ts_from_ns

    gap = 1e9 / PAPER_RATE
    t0 = 10**12
    out = []
    psn = [0] * SENDERS
    for i in range(n):
        s = i % SENDERS
        t = t0 + int(i * gap)
        hdr = OnePipeHeader(ts_from_ns(t), ts_from_ns(max(t0, t - delay_ns)), 0, psn[s], OnePipeOpcode.DATA,
                            OnePipeFlag.SOM | OnePipeFlag.EOM)
        psn[s] += 1
        out.append((hdr.to_bytes() + PAYLOAD, (f"10.0.1.{s + 1}", 40101), t))
    return out


def _engine(start_ns: int) -> Any:
    from ...onepipe.endpoint import Endpoint
    from ...onepipe.params import OnePipeParams

    return Endpoint(OnePipeParams(), ("10.0.0.1", 40101), start_ns)


def _feed(frames: list[tuple[bytes, tuple[str, int], int]]) -> int:
    """CPU ns the frames cost a fresh engine (nothing else in the timed loop)."""
    ep = _engine(frames[0][2])
    clear = ep.actions.clear
    receive = ep.receive
    gc.disable()
    try:
        t = time.process_time_ns()
        for data, src, now in frames:
            receive(data, src, now)
            clear()
        return time.process_time_ns() - t
    finally:
        gc.enable()


def _held(frames: list[tuple[bytes, tuple[str, int], int]]) -> tuple[float, float]:
    """(messages held on average over the second half, bytes the engine holds at the half way,
    from ``tracemalloc``: what a delay makes it hold once it holds it)."""
    ep = _engine(frames[0][2])
    half = len(frames) // 2
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        mem = 0.0
        held, samples = 0, 0
        for i, (data, src, now) in enumerate(frames):
            ep.receive(data, src, now)
            ep.actions.clear()
            if i == half:
                mem = float(tracemalloc.get_traced_memory()[0] - base)
            if i >= half and not i % 64:
                held += len(ep.held())
                samples += 1
        return held / max(1, samples), mem
    finally:
        tracemalloc.stop()


def measure(delays_us: tuple[int, ...] = DELAYS_US, messages: int = MESSAGES, repeats: int = REPEATS,
            factor: float | None = None) -> list[dict[str, Any]]:
    """One row per delay (module docstring); ``factor``: the CPU model's (default: the simulator's)."""
    from ...onepipe.cpucost import DEFAULT_COSTS

    factor = DEFAULT_COSTS.factor if factor is None else factor
    rows = []
    for d in delays_us:
        frames = _datagrams(d * 1_000, messages)
        cpu = min(_feed(frames) for _ in range(repeats)) / messages
        held, mem = _held(frames)
        rows.append({"delay_us": d, "cpu_ns": round(cpu, 1), "throughput": round(1e3 / (cpu * factor), 3),
                     "held": round(held, 1), "memory_mb": round(mem / 1e6, 4), "factor": factor})
    base = rows[0]["throughput"] if rows else None
    mem0 = rows[0]["memory_mb"] if rows and rows[0]["delay_us"] == 0 else 0.0
    for r in rows:
        r["vs_no_delay"] = round(r["throughput"] / base, 3) if base else None
        # the buffer: over what the engine holds with no delay (its connections' own state)
        r["buffer_mb"] = round(max(0.0, r["memory_mb"] - mem0), 4)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    from ..output import format_table

    return format_table(["delay µs", "CPU ns/msg", "M msg/s (scaled)", "vs no delay", "held msgs", "buffer MB"],
                        [[r["delay_us"], f"{r['cpu_ns']:.0f}", f"{r['throughput']:.2f}", f"{r['vs_no_delay']:.2f}",
                          f"{r['held']:.0f}", f"{r['buffer_mb']:.3f}"] for r in rows])


__all__ = ["DELAYS_US", "MESSAGES", "PAPER_RATE", "SENDERS", "measure", "table"]
