"""corruptd: watch every switch-to-switch link's corruption rate and turn LinkGuardian on.

LinkGuardian §3 (and its App. C): a low-cost control-plane monitor polls the FCS-error
counters of all links; LinkGuardian lies dormant until a link is found corrupting, then is
activated with N copies from Eq. 2 for the measured loss rate. The decision logic here is
sans-IO (counter samples in, decisions out); ``run_corruptd`` is the loop around the live
testbed used by ``netstack corruptd``.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .params import copies_for

if TYPE_CHECKING:
    from ..runtime import RunPort, RunState


@dataclass(frozen=True)
class Decision:
    link: str
    direction: str  # "sw1:sw2": the sending switch first
    actual_loss: float
    copies: int
    frames: int


@dataclass
class _Direction:
    samples: deque[tuple[int, int, int]] = field(default_factory=deque)  # (now_ns, tx, fcs_errors)
    protected: bool = False


class CorruptionMonitor:
    """Per link direction: corruption rate = Δ FCS errors at the receiver / Δ frames the sender
    put on the link, over a sliding window; above ``threshold`` (with at least ``min_frames``
    frames and ``min_errors`` errors, so one unlucky frame is not a corrupting link) it asks
    for protection with N = Eq. 2(target, rate)."""

    def __init__(self, threshold: float = 1e-4, target: float = 1e-8, window_ns: int = 10_000_000_000,
                 min_frames: int = 2000, min_errors: int = 3, max_copies: int = 8) -> None:
        if not 0 < threshold < 1:
            raise ValueError(f"threshold {threshold!r} must be in (0, 1)")
        if not 0 < target < 1:
            raise ValueError(f"target {target!r} must be in (0, 1)")
        self.threshold = threshold
        self.target = target
        self.window_ns = window_ns
        self.min_frames = min_frames
        self.min_errors = min_errors
        self.max_copies = max_copies
        self._dirs: dict[tuple[str, str], _Direction] = {}

    def observe(self, link: str, direction: str, tx_frames: int, fcs_errors: int, now_ns: int) -> Decision | None:
        d = self._dirs.setdefault((link, direction), _Direction())
        d.samples.append((now_ns, tx_frames, fcs_errors))
        while len(d.samples) > 2 and now_ns - d.samples[1][0] >= self.window_ns:
            d.samples.popleft()
        if d.protected:
            return None
        _, tx0, err0 = d.samples[0]
        frames, errors = tx_frames - tx0, fcs_errors - err0
        if frames < self.min_frames or errors < self.min_errors or frames <= 0:
            return None
        rate = errors / frames
        if rate < self.threshold:
            return None
        copies = min(self.max_copies, copies_for(self.target, min(rate, 0.5)))
        d.protected = True
        return Decision(link, direction, rate, copies, frames)

    def rate(self, link: str, direction: str) -> float | None:
        d = self._dirs.get((link, direction))
        if d is None or len(d.samples) < 2:
            return None
        (_, tx0, e0), (_, tx1, e1) = d.samples[0], d.samples[-1]
        return (e1 - e0) / (tx1 - tx0) if tx1 > tx0 else None

    def forget(self, link: str, direction: str) -> None:
        self._dirs.pop((link, direction), None)


def switch_link_directions(state: RunState) -> list[tuple[str, RunPort, RunPort]]:
    """(link, sending port, receiving port) for both directions of every switch-to-switch link."""
    switches = state.nodes_running("switch")
    by_link: dict[str, list[RunPort]] = {}
    for p in state.ports:
        by_link.setdefault(p.link, []).append(p)
    out = []
    for link, ends in sorted(by_link.items()):
        if len(ends) == 2 and all(e.node in switches for e in ends):
            a, b = ends
            out += [(link, a, b), (link, b, a)]
    return out


def run_corruptd(prefix: str, monitor: CorruptionMonitor, *, interval_s: float = 1.0, mode: str = "blocking",
                 duration_s: float | None = None, say: Callable[[str], None] = print,
                 enable: Callable[..., Any] | None = None) -> list[Decision]:
    """Poll the running testbed every ``interval_s``; enable LinkGuardian on links that corrupt."""
    from .. import runtime

    if enable is None:
        from .control import enable_link

        enable = enable_link
    state = runtime.load_state(prefix)
    directions = switch_link_directions(state)
    if not directions:
        say("corruptd: no switch-to-switch link in this topology")
        return []
    say(f"corruptd: watching {len(directions)} link directions every {interval_s:g} s "
        f"(threshold {monitor.threshold:g}, target {monitor.target:g})")
    decisions: list[Decision] = []
    start = time.monotonic()
    while duration_s is None or time.monotonic() - start < duration_s:
        st = runtime.status(prefix)["daemons"]
        now = time.monotonic_ns()
        for link, snd, rcv in directions:
            try:
                tx = st[snd.node]["ports"][snd.ifname]["tx_frames"]
                bad = st[rcv.node]["ports"][rcv.ifname]["fcs_errors"]
            except KeyError:
                continue  # a daemon not answering: try again next round
            direction = f"{snd.node}:{rcv.node}"
            decision = monitor.observe(link, direction, tx, bad, now)
            if decision is not None:
                say(f"corruptd: {link} {direction} corrupts {decision.actual_loss:.2e} over {decision.frames} "
                    f"frames -> enabling LinkGuardian with N={decision.copies}")
                enable(prefix, link, mode=mode, copies=decision.copies, actual=decision.actual_loss,
                       target=monitor.target, direction=direction)
                decisions.append(decision)
        time.sleep(interval_s)
    return decisions


def expected_effective_loss(actual: float, copies: int) -> float:
    """Eq. 1: the loss left after N retransmitted copies, actual^(N+1)."""
    return math.pow(actual, copies + 1)
