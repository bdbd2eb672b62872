"""The live sections' testbed: the default topology brought up under a fresh prefix (and always
torn down), and the counters read from it: LinkGuardian's on sw1 -> sw2, sw1's queue drops,
the link's own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..output import Progress
from .params import LIVE_TCP_CC, RECEIVER, SENDER

if TYPE_CHECKING:
    from ...runtime import RunState

RX_KEYS = ("holes_detected", "lost_detected", "loss_notifications_sent", "timeouts", "reorder_drops", "pauses_sent",
           "resumes_sent", "duplicates", "delivered")
TX_KEYS = ("protected_frames", "retransmissions", "retx_frames", "holes_not_buffered", "dummies_sent",
           "tx_evictions")


def set_tcp_cc(state: RunState, hosts: tuple[str, ...], algorithm: str) -> dict[str, Any]:
    """Default TCP congestion control of the host namespaces (per-netns sysctl)."""
    from ...topo.netns import in_netns

    path = "/proc/sys/net/ipv4/tcp_congestion_control"
    out: dict[str, Any] = {}
    for h in hosts:
        try:
            with in_netns(state.namespaces[h]):
                before = Path(path).read_text().strip()
                Path(path).write_text(algorithm)
                out[h] = {"before": before, "now": Path(path).read_text().strip()}
        except OSError as exc:
            out[h] = {"error": str(exc)}
    return out


@contextlib.contextmanager
def testbed(prefix: str, say: Progress) -> Iterator[tuple[RunState, dict[str, Any]]]:
    """The default topology (no impairment), TCP ``LIVE_TCP_CC`` on the hosts; always torn down.
    Yields its run state and what :func:`set_tcp_cc` did."""
    from ... import runtime
    from ...topo.model import load_topology

    state = runtime.up(load_topology(None), prefix, apply_impairments=False)
    try:
        yield state, set_tcp_cc(state, ("h1", "h2"), LIVE_TCP_CC)
    finally:
        runtime.down(prefix)


def lg_counters(prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(receiver counters on sw2/p-sw1, sender counters on sw1/p-sw2); empty before first enable."""
    from ... import runtime

    r = runtime.control(prefix, RECEIVER[0], "lg_status").get(RECEIVER[1], {}).get("receiver", {})
    s = runtime.control(prefix, SENDER[0], "lg_status").get(SENDER[1], {}).get("sender", {})
    return r.get("counters", {}), s.get("counters", {})


def counter_delta(after: dict[str, Any], before: dict[str, Any], keys: tuple[str, ...]) -> dict[str, int]:
    return {k: int(after.get(k, 0)) - int(before.get(k, 0)) for k in keys}


def queue_drops(prefix: str) -> int | None:
    """Congestion drops at sw1's egress toward sw2 (the bottleneck's 200 KB drop-tail buffer)."""
    from ... import runtime

    try:
        return int(runtime.control(prefix, SENDER[0], "status")["ports"][SENDER[1]]["queue_drops"])
    except (KeyError, TypeError, ValueError, OSError):
        return None


def link_counts(prefix: str) -> dict[str, int]:
    """Frames sent on sw1 -> sw2 and lost to FCS errors there (``experiment.link_counters``)."""
    from ...experiment import link_counters

    return link_counters(prefix, SENDER, RECEIVER)
