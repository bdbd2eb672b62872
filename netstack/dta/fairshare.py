"""A fair share of a queue pair's output window per reporter (issue 34, finding 5).

The translator's output window (``TranslatorConfig.window``, netstack/dta/requester.py) bounds the
requests in flight per QP. It was shared first come, first served: one reporter sending as fast as
it could kept the window full, and the other reporters' Key-Writes met no room (under one flooding
reporter, 69 of 200 genuine reports were kept). With keys a legitimate reporter can still do that.

The rule (ours; DTA has no window, docs/dta.md "Output window"): a reporter is *active* while it
has reported within ``horizon_ns`` (the window time-out: the window's own time scale). Of ``A``
active reporters, each is guaranteed ``g = window // (4A)`` requests of a QP's window: a report is
taken if its reporter holds less than that, or else if the window, after it, still leaves every
other active reporter room up to its own ``g``. So a quarter of the window is shared out equally
and the rest goes first come, first served: a flooding reporter cannot take the room another one
is guaranteed, and a busy reporter is not held to a fraction of the window because another one
reported lately (a first version with hard shares of ``window // A`` dropped a legitimate burst
of Key-Increments live, with the window far from full; with ``window // 2A`` that test still
missed 9 of 1,150 once on CI). A report not taken is dropped before it becomes a request and counted
(``share_dropped``, and per reporter). A lone reporter has the whole window. A reporter's requests
leave its count when the collector acknowledges them (the QP's ``una`` passes them) or when a
window time-out abandons them (the QP's ``psn`` goes back before them). The check costs a pass
over the reporters holding requests of the QP, and only once the window is half full.

The reporter is the report's IPv4 source. BCP 38 at the edge (netstack/switch/sourceguard.py)
keeps a host from posing as many reporters; with keys the source is also the key's.

Sans-IO: times come in, nothing here reads a clock. Memory is bounded (``max_reporters``).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Any

from .requester import PSN_HALF, PSN_MASK, TxQp

#: reporters tracked as active at most (the least recent go first), and named in the drop counts
MAX_REPORTERS = 4096
MAX_NAMED_DROPS = 256


def _le(a: int, b: int) -> bool:
    """PSN ``a`` is at or before ``b`` (24-bit serial arithmetic)."""
    return ((b - a) & PSN_MASK) < PSN_HALF


class FairShare:
    """Per-reporter guarantees in the output windows of one translator's QPs (module docstring)."""

    def __init__(self, window: int, horizon_ns: int, max_reporters: int = MAX_REPORTERS) -> None:
        if window < 1 or horizon_ns < 1:
            raise ValueError("a fair share needs a window and a horizon")
        self.window = window
        self.horizon_ns = horizon_ns
        self.max_reporters = max_reporters
        #: reporter -> when it last reported, least recent first
        self._seen: OrderedDict[bytes, int] = OrderedDict()
        #: QP name -> (first PSN after the requests, reporter, requests), in the order sent
        self._ledger: dict[str, deque[tuple[int, bytes, int]]] = {}
        #: QP name -> reporter -> requests in flight; QP name -> their sum
        self._used: dict[str, dict[bytes, int]] = {}
        self._total: dict[str, int] = {}
        #: reporter -> reports dropped (at most MAX_NAMED_DROPS named, the rest "other")
        self.drops: dict[bytes, int] = {}

    def saw(self, reporter: bytes, now_ns: int) -> None:
        """A report from ``reporter`` at ``now_ns`` (before :meth:`admit`)."""
        seen = self._seen
        seen[reporter] = now_ns
        seen.move_to_end(reporter)
        if len(seen) > self.max_reporters:
            seen.popitem(last=False)

    def active(self, now_ns: int) -> int:
        """Reporters that reported within the horizon."""
        seen = self._seen
        cutoff = now_ns - self.horizon_ns
        while seen:
            first = next(iter(seen))
            if seen[first] >= cutoff:
                break
            del seen[first]
        return len(seen)

    def in_flight(self, qp: TxQp, reporter: bytes) -> int:
        return self._used.get(qp.name, {}).get(reporter, 0)

    def admit(self, qp: TxQp, reporter: bytes, n: int, now_ns: int) -> bool:
        """Whether ``n`` more requests of ``reporter`` may go out on ``qp`` (the caller has
        checked that the window has room for them); when not, the drop is counted."""
        self._release(qp)
        active = self.active(now_ns)
        total = self._total.get(qp.name, 0)
        if active <= 1 or total + n <= self.window // 2:
            return True
        g = self.window // (4 * active)
        used = self._used.get(qp.name, {})
        if used.get(reporter, 0) + n <= g:
            return True  # within its guarantee
        seen = self._seen
        others = active - (reporter in seen)
        held = sum(min(u, g) for r, u in used.items() if r != reporter and r in seen)
        if total + n <= self.window - (others * g - held):
            return True  # every other active reporter keeps room up to its guarantee
        drops = self.drops
        key = reporter if reporter in drops or len(drops) < MAX_NAMED_DROPS else b"other"
        drops[key] = drops.get(key, 0) + 1
        return False

    def charge(self, qp: TxQp, reporter: bytes, n: int) -> None:
        """``n`` requests of ``reporter`` went out on ``qp`` (they end before ``qp.psn``)."""
        if n <= 0:
            return
        self._ledger.setdefault(qp.name, deque()).append((qp.psn, reporter, n))
        used = self._used.setdefault(qp.name, {})
        used[reporter] = used.get(reporter, 0) + n
        self._total[qp.name] = self._total.get(qp.name, 0) + n

    def _release(self, qp: TxQp) -> None:
        ledger = self._ledger.get(qp.name)
        if not ledger:
            return
        while ledger and not _le(ledger[-1][0], qp.psn):  # abandoned by a time-out: psn went back
            self._free(qp.name, ledger.pop())
        while ledger and _le(ledger[0][0], qp.una):  # acknowledged: una passed them
            self._free(qp.name, ledger.popleft())

    def _free(self, name: str, entry: tuple[int, bytes, int]) -> None:
        used = self._used[name]
        rep, n = entry[1], entry[2]
        left = used[rep] - n
        if left:
            used[rep] = left
        else:
            del used[rep]
        self._total[name] -= n

    def status(self) -> dict[str, Any]:
        """JSON-able: active reporters (as last computed), requests in flight per QP and reporter,
        drops per reporter."""
        def name(r: bytes) -> str:
            return ".".join(str(b) for b in r) if len(r) == 4 else r.decode(errors="replace")

        in_flight = {qp: {name(r): n for r, n in sorted(used.items())} for qp, used in sorted(self._used.items())
                     if used}
        return {"reporters_active": len(self._seen), "in_flight": in_flight,
                "share_dropped_by_reporter": {name(r): n for r, n in sorted(self.drops.items())}}


__all__ = ["MAX_NAMED_DROPS", "MAX_REPORTERS", "FairShare"]
