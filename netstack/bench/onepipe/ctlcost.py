"""What a datagram costs the reliable controller's core: the kernel's UDP path, measured in this run
(``netstack bench onepipe``, sections ``store`` and ``fig10``; docs/onepipe-reliable.md "The
controller's core").

1Pipe's §7 ("Failure recovery", its Fig. 10) puts the growth of its recovery time with the hosts
down to the controller: it "needs to contact all processes in the system, so, the failure recovery
delay increases proportionally with system scale, which is 3~15 us per host". A controller whose
work takes no time (the simulator's until issue 32) cannot show that. Ours is an ordinary server
process (the live daemon, ``daemons/onepipe_controller.py``, talks to the processes over the
kernel's UDP; lib1pipe's RDMA is the processes' data path, not the controller's), so in virtual
time each datagram it sends or receives occupies its one core for what the kernel charges for a
datagram, measured here (the scenario's ``ctl_msg_ns``, :mod:`netstack.onepipe.rscenario`).

The measurement: two UDP sockets on this process's own loopback (nothing outside it is touched),
``DATAGRAMS`` 64-byte datagrams a batch, sent and taken ``CHUNK`` at a time, ``BATCHES`` batches. A
``sendto`` on the loopback runs the whole transmit path and, in the same call, the receive path up
to the socket's queue; a ``recv`` takes one off the queue. So ``sendto`` + ``recv`` is one datagram
through both halves of the stack, what a notice sent and a callback received cost the controller
together, and :func:`measure` gives each datagram half of it. The same loop calling a no-op builtin
is the baseline, subtracted (the loop, not the socket). Medians over the batches, thread CPU time
(a preemption does not count). What is left in it: Python's call into the socket method (a few
hundred ns, so an over-estimate of a C controller's cost) and this VM's virtualised system calls
(the paper's controller ran on a 2013 Xeon, bare metal: scale factor 1, not known better).
"""

from __future__ import annotations

import socket
import statistics
import time
from typing import Any

#: datagrams a batch, and batches (their medians are the result)
DATAGRAMS = 2_000
BATCHES = 25
PAYLOAD = b"\x00" * 64
#: datagrams sent before they are taken: a few KB of receive queue, far below any default size
CHUNK = 50


def _batch(tx: socket.socket, rx: socket.socket, dst: Any, n: int) -> tuple[float, float, float]:
    """ns per call of sendto, recv and the no-op, over ``n`` datagrams sent and taken :data:`CHUNK`
    at a time (what waits in the receive queue stays within its default size, ``net.core.rmem_default``:
    a full queue would drop, and ``recv`` would wait for a datagram that never comes)."""
    clock = time.thread_time_ns
    send = recv = base = 0
    left = n
    while left:
        k = min(CHUNK, left)
        left -= k
        t0 = clock()
        for _ in range(k):
            tx.sendto(PAYLOAD, dst)
        t1 = clock()
        for _ in range(k):
            rx.recv(2048)
        t2 = clock()
        for _ in range(k):
            len(PAYLOAD)
        t3 = clock()
        send, recv, base = send + t1 - t0, recv + t2 - t1, base + t3 - t2
    return send / n, recv / n, base / n


def measure(datagrams: int | None = None, batches: int | None = None) -> dict[str, Any]:
    """``{"sendto_ns", "recv_ns", "baseline_ns", "per_datagram_ns", "datagrams", "batches"}``:
    medians of per-call thread CPU time; ``per_datagram_ns`` = (sendto + recv - 2 x baseline) / 2,
    at least 1 (module docstring). ``datagrams`` and ``batches``: default :data:`DATAGRAMS` and
    :data:`BATCHES`."""
    datagrams = DATAGRAMS if datagrams is None else datagrams
    batches = BATCHES if batches is None else batches
    if datagrams < 1 or batches < 1:
        raise ValueError("need at least one datagram and one batch")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(5.0)  # a lost datagram fails loudly instead of hanging the bench
        dst = rx.getsockname()
        runs = [_batch(tx, rx, dst, datagrams) for _ in range(batches)]
    send, recv, base = (statistics.median(r[i] for r in runs) for i in range(3))
    per = max(1, round((send + recv - 2 * base) / 2))
    return {"sendto_ns": round(send), "recv_ns": round(recv), "baseline_ns": round(base),
            "per_datagram_ns": per, "datagrams": datagrams, "batches": batches}


def summary(m: dict[str, Any]) -> str:
    return (f"controller core: a datagram through the kernel's UDP {m['per_datagram_ns'] / 1e3:.2f} us "
            f"(loopback sendto {m['sendto_ns'] / 1e3:.2f} + recv {m['recv_ns'] / 1e3:.2f} us, halved; loop "
            f"{m['baseline_ns']} ns subtracted; medians of {m['batches']} x {m['datagrams']})")


__all__ = ["BATCHES", "CHUNK", "DATAGRAMS", "measure", "summary"]
