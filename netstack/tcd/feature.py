"""Where TCD meets the switch: a marker installed on a port, as its marking policy and, for the
TCD marker, as a switch feature with a timer.

The TCD marker re-evaluates a port with nothing to send on a timer (issue 30; "Congestion
Detection in Lossless Networks" §3.2.1: a port leaves the undetermined state once it is
continuously ON again, whether or not a packet happens to leave then). It needs the class queue
for that, which only the switch knows: :func:`install` gives the marker a probe of its port's
queues and attaches it as a feature, whose ``next_deadline`` / ``on_timer`` the switch calls like
any other feature's (``netstack/switch/feature.py``). Both runtimes and the control socket install
markers through here (``topology.attach``, ``control``'s ``tcd_enable`` / ``tcd_disable``).
"""

from __future__ import annotations

from typing import Any

from .marker import EcnMarker, QueueProbe, TcdMarker


def _port(switch: Any, port: str) -> Any:
    found = [p for p in switch.ports if p.name == port]
    if not found:
        raise KeyError(port)
    return found[0]


def queue_probe(switch: Any, port: str) -> QueueProbe:
    """``cls -> bytes`` in ``port``'s class queue now (the switch's own count, read at a resume
    and at the marker's timer only, never per packet)."""
    class_bytes: list[int] = _port(switch, port).queues.class_bytes  # (the list the switch updates in place)

    def probe(cls: int) -> int:
        return class_bytes[cls]

    return probe


def install(switch: Any, port: str, marker: TcdMarker | EcnMarker) -> None:
    """``marker`` on ``port``'s egress, replacing (and detaching) any marker there before."""
    remove(switch, port)
    switch.set_marking_policy(port, marker)
    if isinstance(marker, TcdMarker):
        marker.queue_probe = queue_probe(switch, port)
        # the switch fires feature timers before it simulates its links up to the same time: the
        # marker first lets its port send what was due, so that the timer sees the queue as it is
        # and no dequeue reaches a detector with a time before the timer's
        marker.catch_up = _port(switch, port).run
        switch.attach_feature(port, marker)


def installed(switch: Any, port: str) -> TcdMarker | EcnMarker | None:
    """The TCD or ECN marker on ``port`` (None: none)."""
    for p in switch.ports:
        if p.name == port:
            m = p.marker
            return m if isinstance(m, TcdMarker | EcnMarker) else None
    raise KeyError(port)


def remove(switch: Any, port: str) -> TcdMarker | EcnMarker | None:
    """Take ``port``'s marker off (its timer too); the marker removed, None if there was none."""
    marker = installed(switch, port)
    if marker is None:
        return None
    switch.set_marking_policy(port, None)
    if isinstance(marker, TcdMarker):
        switch.detach_feature(port, marker)
        marker.queue_probe = None
        marker.catch_up = None
    return marker


__all__ = ["install", "installed", "queue_probe", "remove"]
