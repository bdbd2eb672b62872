"""PFC state of a port: the pauses it honours (egress) and the pauses it asks for (ingress).

Receive side, IEEE 802.1Qbb: a PFC frame received on port P pauses *P's egress* class
``c`` for ``quanta[c] * 512`` bit times at P's line rate; quanta 0 resumes at once. The
pause takes effect at the next frame boundary: a frame already on the wire finishes.
Pauses expire on their own unless refreshed ("quanta expire as on real links").

Send side ("generate them from an ingress threshold when a port is configured lossless"):
per ingress port and class we count the bytes of frames that arrived there and are still
queued anywhere in the switch (a flooded frame counts once per queued copy). Reaching
XOFF asks the upstream to pause the class (quanta 0xFFFF); falling to XON asks it to
resume (quanta 0). Frames go out only on a state change — the ``curr_state`` flag of
LinkGuardian Algorithm 2 — and a pause is refreshed at half its lifetime while the class is
still above XON, because 802.1Qbb (IEEE 802.1Q clause 36) has no infinite pause: a
sender that wants a class held re-sends before the quanta run out. A feature
(LinkGuardian's receiver, LinkGuardian §3.3 and §3.5 "Backpressuring the normal packet
queue") can assert the same pause through
``Switch.pause_class``; the class is asserted while either reason holds.
"""

from __future__ import annotations

from headers.pfc import MAX_QUANTA, quanta_to_ns

from ..ethernet import NUM_CLASSES

#: Rate used to time pause quanta on an unpaced port (a quantum is 512 bit times of
#: *some* rate): 1 Gb/s makes a 0xFFFF pause last 33.5 ms, comfortably above the live
#: runtime's 1 ms timer granularity (docs/architecture.md "The live runtime").
UNPACED_QUANTA_RATE_BPS = 1_000_000_000


def pause_ns(quanta: int, rate_bps: int | None) -> int:
    """How long ``quanta`` pause a port of ``rate_bps`` (0 for a resume)."""
    if not quanta:
        return 0
    return quanta_to_ns(quanta, rate_bps or UNPACED_QUANTA_RATE_BPS)


class PauseState:
    """Pauses received on a port, per egress class, with paused-time accounting."""

    __slots__ = ("_acc", "_from", "ignore_until", "latest", "paused_until", "since")

    def __init__(self) -> None:
        self.paused_until = [0] * NUM_CLASSES
        self._from = [0] * NUM_CLASSES
        self._acc = [0] * NUM_CLASSES
        #: max(paused_until): when it is <= t no class is paused (the fast path)
        self.latest = 0
        #: the PFC watchdog's view: since when each class has been paused without a break
        #: (-1: not paused), and until when its pauses are ignored after a watchdog event
        self.since = [-1] * NUM_CLASSES
        self.ignore_until = [0] * NUM_CLASSES

    def apply(self, cls: int, t: int, duration_ns: int) -> None:
        """A pause (duration > 0) or resume (0) for ``cls`` received at ``t``: it replaces the previous one."""
        until = self.paused_until[cls]
        if duration_ns == 0:
            self.since[cls] = -1
        elif until <= t or self.since[cls] < 0:
            self.since[cls] = t  # a new pause, not a refresh of a running one
        self._acc[cls] += max(0, min(until, t) - self._from[cls])
        self._from[cls] = t
        until = t + duration_ns
        self.paused_until[cls] = until
        if until > self.latest:
            self.latest = until
        elif duration_ns == 0:
            self.latest = max(self.paused_until)

    def paused(self, cls: int, t: int) -> bool:
        return self.paused_until[cls] > t

    def eligible(self, nonempty: int, t: int) -> int:
        """Highest class with a frame (bit set in ``nonempty``) not paused at ``t``; -1 if none."""
        if self.latest <= t:
            return nonempty.bit_length() - 1
        pu = self.paused_until
        c = nonempty.bit_length() - 1
        while c >= 0:
            if nonempty >> c & 1 and pu[c] <= t:
                return c
            c -= 1
        return -1

    def next_expiry(self, nonempty: int) -> int:
        """When the first class holding frames is released (call only when none is eligible)."""
        pu = self.paused_until
        return min(pu[c] for c in range(NUM_CLASSES) if nonempty >> c & 1)

    def paused_ns(self, cls: int, now: int) -> int:
        """Total time ``cls`` has spent paused up to ``now``."""
        return self._acc[cls] + max(0, min(self.paused_until[cls], now) - self._from[cls])

    # --------------------------------------------------------------- PFC watchdog
    def watchdog_deadline(self, watchdog_ns: int) -> int | None:
        """When the watchdog must look at this port next (a class paused since s: s + watchdog)."""
        best = None
        for s in self.since:
            if s >= 0 and (best is None or s + watchdog_ns < best):
                best = s + watchdog_ns
        return best

    def watchdog(self, t: int, watchdog_ns: int) -> list[int]:
        """Release every class paused without a break for ``watchdog_ns`` or more at ``t``, and
        ignore its pauses until the storm has been quiet that long (:meth:`ignored`); returns the
        classes released. A pause that simply expired ends its watch."""
        released = []
        for c in range(NUM_CLASSES):
            s = self.since[c]
            if s < 0:
                continue
            if self.paused_until[c] <= t:
                self.since[c] = -1  # it expired on its own: no storm
            elif t - s >= watchdog_ns:
                self.apply(c, t, 0)
                self.ignore_until[c] = t + watchdog_ns
                released.append(c)
        return released

    def watching(self) -> bool:
        return any(s >= 0 for s in self.since)

    def ignored(self, cls: int, t: int, watchdog_ns: int) -> bool:
        """A pause for ``cls`` at ``t`` falls in its recovery period: ignore it, and keep
        ignoring while the pauses keep coming (the recovery ends ``watchdog_ns`` after the last)."""
        if t < self.ignore_until[cls]:
            self.ignore_until[cls] = t + watchdog_ns
            return True
        return False

    def clear_stats(self, now: int) -> None:
        for c in range(NUM_CLASSES):
            self._acc[c] = 0
            self._from[c] = min(max(self._from[c], now), self.paused_until[c])


class PfcGenerator:
    """Ingress accounting and the per-class XOFF/XON state of one (ingress) port."""

    __slots__ = (
        "asserted",
        "ingress_bytes",
        "mask",
        "refresh_at",
        "want_feature",
        "want_thresh",
        "xoff",
        "xon",
    )

    def __init__(self) -> None:
        self.ingress_bytes = [0] * NUM_CLASSES
        self.want_thresh = [False] * NUM_CLASSES
        self.want_feature = [False] * NUM_CLASSES
        self.asserted = [False] * NUM_CLASSES
        #: when to re-send the pause of an asserted class (0 = not scheduled)
        self.refresh_at = [0] * NUM_CLASSES
        self.xoff = 0
        self.xon = 0
        self.mask = 0  # bit c set: class c of this port is lossless (generates PFC)

    def configure(self, lossless: bool, xoff: int | None, xon: int | None, classes: tuple[int, ...]) -> list[int]:
        """Apply new thresholds; return the classes whose threshold reason must be re-evaluated."""
        self.mask = sum(1 << c for c in classes) if lossless else 0
        self.xoff = xoff or 0
        self.xon = xon or 0
        changed = []
        for c in range(NUM_CLASSES):
            want = bool(self.mask >> c & 1) and (
                self.ingress_bytes[c] > self.xon if self.want_thresh[c] else self.ingress_bytes[c] >= self.xoff
            )
            if want != self.want_thresh[c]:
                self.want_thresh[c] = want
                changed.append(c)
        return changed

    def add(self, cls: int, n: int) -> bool:
        """``n`` bytes from this port were queued; True when XOFF was just reached."""
        b = self.ingress_bytes[cls] + n
        self.ingress_bytes[cls] = b
        if b >= self.xoff and self.mask >> cls & 1 and not self.want_thresh[cls]:
            self.want_thresh[cls] = True
            return True
        return False

    def remove(self, cls: int, n: int) -> bool:
        """``n`` bytes from this port left the switch; True when XON was just reached."""
        b = self.ingress_bytes[cls] - n
        self.ingress_bytes[cls] = b
        if self.want_thresh[cls] and b <= self.xon:
            self.want_thresh[cls] = False
            return True
        return False

    def effective(self, cls: int) -> bool:
        return self.want_thresh[cls] or self.want_feature[cls]

    def next_refresh(self) -> int | None:
        if not any(self.asserted):
            return None
        times = [r for r, a in zip(self.refresh_at, self.asserted, strict=True) if a and r]
        return min(times) if times else None


__all__ = ["MAX_QUANTA", "UNPACED_QUANTA_RATE_BPS", "PauseState", "PfcGenerator", "pause_ns"]
