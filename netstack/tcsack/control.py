"""T/C-SACK's control plug-in: the orchestration that moves bytes between two hosts of a running
testbed (``netstack tcsack transfer``, the ``tcsack-transfer`` scenario live, the benchmark).

T/C-SACK ("An Updated ACK mechanism based on RDMA", §2) is an end-host transport: no switch
daemon serves anything for it, so this plug-in has no ``switch_handlers``. What runs in the
hosts' namespaces is ``python -m netstack.tcsack send|recv`` (:mod:`.live`); :func:`live_transfer`
starts both ends there and returns what each printed.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from .. import toolproc
from ..errors import NetstackError
from ..validity import verdict_line

if TYPE_CHECKING:
    from ..runtime import RunState

#: The control verbs (docs/architecture.md "Errors and control verbs"): transfer only. There is no
#: enable, disable or status: T/C-SACK lives in the two hosts for one transfer, with no switch side
#: and no daemon, so nothing stays on between transfers to turn off or to ask about.
VERBS = ("transfer",)


class TransferError(NetstackError, RuntimeError):
    """A transfer between two hosts failed: the message has both ends' last words."""


def live_transfer(state: RunState, proto: str, nbytes: int, *extra: str, rate: int, src: str = "h1",
                  dst: str = "h2", timeout: float = 90.0, seed: int = 1,
                  cc: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """One transfer with ``python -m netstack.tcsack`` in the hosts' namespaces: (sender JSON, receiver JSON).
    ``extra`` options go to both ends (T, N, payload), ``seed`` (of the data) and ``cc`` (kernel TCP's
    congestion control; None: the host's default) to the sender."""
    def argv(node: str, *args: str) -> list[str]:
        from ..runtime import node_exec_argv

        return node_exec_argv(state, node, [sys.executable, "-m", "netstack.tcsack", *args])

    dst_ip = state.host_ip(dst)
    with toolproc.spawned(argv(dst, "recv", "--proto", proto, "--wait", "20", *extra)) as recv:
        toolproc.wait_ready(recv, "tcsack receiver", on="stderr", error=TransferError)
        with toolproc.spawned(argv(src, "send", "--proto", proto, "--dst", dst_ip, "--bytes", str(nbytes),
                                   "--rate", str(rate), "--max-seconds", str(timeout * 0.6), "--seed", str(seed),
                                   *(("--cc", cc) if cc else ()), *extra)) as sender:
            send = toolproc.finish(sender, timeout)
        if send.returncode != 0:
            toolproc.kill(recv)  # it would wait for a sender that is gone
        got = toolproc.finish(recv, timeout)
    sent, received = send.json(), got.json()
    if send.returncode != 0 or got.returncode != 0 or sent is None or received is None:
        # an unfinished sender exits 1 with its JSON (counters) on stdout: that says why
        said = send.err.strip()[-300:] or send.out.strip()[-1500:]
        raise TransferError(f"{proto} transfer failed: sender rc {send.returncode} {said}; "
                            f"receiver rc {got.returncode} {got.err.strip()[-300:]}")
    return sent, received


def transfer(state: RunState, proto: str, nbytes: int, *, src: str = "h1", dst: str = "h2", rate_bps: int,
             t_ms: float, n: int, payload: int, seed: int = 1, timeout: float = 90.0,
             cc: str | None = None) -> dict[str, Any]:
    """One transfer on a running testbed (its run state): both ends' JSON and a summary;
    ``ok``: the receiver's SHA-256 of what it got equals the sender's of what it sent; ``valid``
    and ``checks``: whether it is a result (netstack/tcsack/verdict.py), ``sched``: every
    process's scheduling delay over it. ``cc``: kernel TCP's congestion control (None: the host's)."""
    for node in (src, dst):
        if node not in state.hosts:
            raise TransferError(f"{node!r} is not a host of this topology (hosts: {', '.join(state.hosts)})")
    from ..experiment import LagWindow
    from .verdict import transfer_validity

    extra = ["--t-ms", str(t_ms), "--n", str(n), "--payload", str(payload)]
    # the switches' scheduling delay over the transfer; the ends report their own (sched)
    lags = LagWindow(state.prefix).start()
    send, recv = live_transfer(state, proto, nbytes, *extra, rate=rate_bps, src=src, dst=dst, timeout=timeout,
                               seed=seed, cc=cc if proto == "tcp" else None)
    lags.stop()
    lags.add_tool(f"sender {src}", send)
    lags.add_tool(f"receiver {dst}", recv)
    ok = recv.get("sha256") == send.get("sha256") and send.get("done", True)
    out = {"proto": proto, "src": src, "dst": dst, "bytes": nbytes, "ok": bool(ok), "seconds": send.get("seconds"),
           "goodput_bps": send.get("goodput_bps"), "sender": send, "receiver": recv, "sched": dict(lags.lags)}
    v = transfer_validity(proto, nbytes, send, recv, rate_bps=None if proto == "tcp" else rate_bps,
                          t_ns=int(t_ms * 1e6), lags=lags.lags)
    return v.annotate(out)


__all__ = ["VERBS", "TransferError", "live_transfer", "transfer", "verdict_line"]
