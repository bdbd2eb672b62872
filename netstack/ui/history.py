"""What one snapshot cannot say alone, kept across polls for ``netstack ui``: the rate of every
cumulative counter (frames/s, a protocol's ``rates``) and the last minute of every view's
``state`` (a timeline: TCD's ternary state as it changed).

A counter that went down (a daemon restarted, ``clear_counters``) has no rate for that poll
rather than a negative one. Series of ports or views that have gone for longer than the window
are dropped, so a long-running server keeps only what the testbed has now.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from .snapshot import RATE_COUNTERS

#: how much of a state's past the page shows (seconds)
WINDOW_S = 60.0


class History:
    """Counters' last values and states' recent changes, updated by each snapshot."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        #: (key) -> (time, value) of the last poll
        self.last: dict[tuple[str, ...], tuple[float, float]] = {}
        #: (key) -> [(time, value, tone, label)] oldest first; the first may start before the window
        self.states: dict[tuple[str, ...], deque[tuple[float, str, str, str]]] = {}
        self.seen: dict[tuple[str, ...], float] = {}

    def rate(self, key: tuple[str, ...], value: float, now: float) -> float | None:
        """Per second since the last poll (None: first sight, no time passed, or a reset)."""
        prev = self.last.get(key)
        self.last[key] = (now, value)
        self.seen[key] = now
        if prev is None or now <= prev[0] or value < prev[1]:
            return None
        return (value - prev[1]) / (now - prev[0])

    def timeline(self, key: tuple[str, ...], state: dict[str, Any], now: float) -> list[list[Any]]:
        """The state's changes within the window, ``[[time, value, tone, label], ...]``, this poll's included."""
        series = self.states.setdefault(key, deque())
        self.seen[key] = now
        if not series or series[-1][1] != state["value"]:
            series.append((now, state["value"], state["tone"], state["label"]))
        while len(series) > 1 and series[1][0] <= now - self.window_s:
            series.popleft()  # the next one starts before the window: this one is all past
        return [list(entry) for entry in series]

    def _views(self, where: str, views: list[dict[str, Any]], now: float) -> None:
        for v in views:
            key = (where, v.get("protocol", ""), v.get("title", ""))
            counts = v.get("rates") or {}
            v["rates"] = [{"label": label, "count": n, "per_s": self.rate((*key, label), n, now)}
                          for label, n in counts.items()]
            if "state" in v:
                v["state"]["timeline"] = self.timeline(key, v["state"], now)

    def update(self, snap: dict[str, Any]) -> dict[str, Any]:
        """``snap`` with ``rates`` on every port and view and a ``timeline`` on every state (in place)."""
        now = snap["time"]
        for key, port in snap.get("ports", {}).items():
            c = port.get("counters", {})
            port["rates"] = {k: self.rate((key, k), c[k], now) for k in RATE_COUNTERS if k in c}
            self._views(key, port.get("views", []), now)
        for name, node in snap.get("nodes", {}).items():
            self._views(name, node.get("views", []), now)
        snap["window_s"] = self.window_s
        self._forget(now)
        return snap

    def _forget(self, now: float) -> None:
        old = [k for k, t in self.seen.items() if t < now - self.window_s]
        for k in old:
            self.seen.pop(k, None)
            self.last.pop(k, None)
            self.states.pop(k, None)


__all__ = ["WINDOW_S", "History"]
