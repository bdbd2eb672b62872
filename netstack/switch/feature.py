"""The interfaces a protocol plugs into the software switch with: per-port features and the
dequeue-time marking policy.

A **feature** (``switch.attach_feature(port, feature)``) sees the port's traffic at three
points and may keep a timer. LinkGuardian's sender and receiver and DTA's translator are
features; a protocol adds its own by implementing :class:`SwitchFeature`, usually by
subclassing :class:`FeatureBase` and overriding only the hooks it needs: the port calls only
the hooks a feature overrides, so an unused hook costs nothing on the data path.

A feature whose timer declares a failure (a repair given up, a request timed out) may define
``set_timer_slack(slack_ns)``: the live shell passes how late its process has recently been
scheduled (``Switch.set_timer_slack``), and the feature extends such timers by it, so that
scheduling delay alone never fires them (docs/testbed.md "Timers on a loaded host").

A **marking policy** (``switch.set_marking_policy(port, policy)``) rewrites frames as they
leave a class queue, knowing the queue they leave behind: the hook for congestion marking
(TCD's detector, plain ECN thresholds).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class SwitchFeature(Protocol):
    """A per-port feature. Every hook gets ``now_ns``; none may block."""

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        """A data frame received on the port (after the FCS check and MAC control, before
        learning and forwarding). Return the frame to forward, possibly rewritten, or None
        if the feature consumed it. Raising ``headers.HeaderError`` makes it a counted
        malformed drop."""
        ...

    def on_egress(self, frame: bytes, cls: int, now_ns: int) -> bytes:
        """A data frame leaving class queue ``cls`` of the port (the start of its transmission);
        returns the frame to send (tagged, with an ACK piggybacked...)."""
        ...

    def idle_frame(self, now_ns: int) -> bytes | None:
        """The port's link is free and every class queue is empty or paused: a frame to send
        now, or None (asked again only after the next switch event, so it must not depend on
        time alone: use the timer)."""
        ...

    def next_deadline(self) -> int | None:
        """When :meth:`on_timer` is due (None: no timer)."""
        ...

    def on_timer(self, now_ns: int) -> None:
        """Called from the switch's ``transmit(now)`` when ``next_deadline() <= now``."""
        ...


class FeatureBase:
    """No-op hooks: subclass and override what the feature does."""

    def on_ingress(self, frame: bytes, now_ns: int) -> bytes | None:
        return frame

    def on_egress(self, frame: bytes, cls: int, now_ns: int) -> bytes:
        return frame

    def idle_frame(self, now_ns: int) -> bytes | None:
        return None

    def next_deadline(self) -> int | None:
        return None

    def on_timer(self, now_ns: int) -> None:
        return None


def implements(feature: object, hook: str) -> bool:
    """Does ``feature`` do something in ``hook``? (It defines it and does not inherit the no-op.)"""
    method = getattr(type(feature), hook, None)
    return method is not None and method is not getattr(FeatureBase, hook)


def has_timer(feature: object) -> bool:
    return implements(feature, "next_deadline") and implements(feature, "on_timer")


@runtime_checkable
class MarkingPolicy(Protocol):
    """Rewrites frames at dequeue: ``on_dequeue(frame, cls, qlen_bytes, now_ns)`` sees every data
    frame leaving a class queue (``qlen_bytes``: that queue after the frame left) and returns
    it, possibly with its ECN field set; ``on_pause(cls, paused, now_ns, pause_ns)`` is told of
    every PFC pause and resume the port receives (``pause_ns``: how long a pause holds the class,
    None at a resume)."""

    def on_dequeue(self, frame: bytes, cls: int, qlen_bytes: int, now_ns: int) -> bytes: ...

    def on_pause(self, cls: int, paused: bool, now_ns: int, pause_ns: int | None = None) -> None: ...


__all__ = ["FeatureBase", "MarkingPolicy", "SwitchFeature", "has_timer", "implements"]
