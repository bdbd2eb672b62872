"""Reliable 1Pipe under hypothesis: random scatterings, loss on every data link, crashes and
restarts of any process, data-path cuts that heal, stalls (a process stopped, maybe past the
failure timeout, then going on), at any point (tests/onepipe/rfabric.py: the
real endpoint, switch aggregation and controller engines in virtual time).

Whatever happens, design topic §12 (docs/papers.md) holds: items 2 and 4 (one total order,
nothing twice, one ts per scattering) and 6 (a commit covers only ACKed messages, checked after
every step), item 8 (every scattering reaches all of its correct and recovered receivers or
none), item 9 (nothing above a failed process's T_f is delivered before its release), and §8's
sender rule (nothing of a failed incarnation above its T_f is delivered anywhere). Once the
network heals and the failures are handled, reliable delivery holds: every scattering between
processes that never failed is delivered at all its receivers.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from .rfabric import RFabric

US = 1_000
WARM = 150 * US

SENDS = st.lists(st.tuples(st.integers(0, 300 * US), st.integers(1, 5),
                           st.lists(st.integers(1, 5), min_size=1, max_size=3, unique=True)),
                 min_size=1, max_size=30)
EVENTS = st.lists(st.tuples(st.integers(0, 300 * US), st.sampled_from(["kill", "restart", "cut", "freeze"]),
                            st.integers(1, 5), st.integers(10 * US, 150 * US), st.booleans()), max_size=3)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(2, 5), tors=st.integers(1, 2), sends=SENDS, events=EVENTS,
       loss=st.sampled_from([0.0, 0.0, 0.02, 0.1]), seed=st.integers(0, 2**32))
def test_reliable_fabric_keeps_order_atomicity_and_delivery(n, tors, sends, events, loss, seed):
    rng = random.Random(seed)
    lossy = [True]

    def lose(frm, to, data: bytes) -> bool:
        return lossy[0] and rng.random() < loss

    fab = RFabric(n, tors=min(tors, n), lose=lose)
    fab.run_for(WARM)
    t0 = fab.now
    for at, a, dsts in sends:
        if a <= n:
            fab.at(t0 + at, fab.send, a, [d for d in dsts if d <= n] or [a % n + 1])
    touched: set[int] = set()
    crashed: set[int] = set()  # a restarted process is a new one: its old self failed for good
    for at, kind, i, stall, overflow in events:
        if i > n:
            continue
        touched.add(i)
        if kind in ("kill", "restart"):
            crashed.add(i)
        if kind == "kill":
            fab.at(t0 + at, fab.kill, i)
        elif kind == "restart":
            fab.at(t0 + at, fab.kill, i)
            fab.at(t0 + at + 100 * US, fab.start, i)
        elif kind == "cut":
            fab.at(t0 + at, fab.cut_data.add, i)
            fab.at(t0 + at + 100 * US, fab.cut_data.discard, i)
        else:  # stopped (SIGSTOP, a long pause): maybe past the failure timeout, declared failed alive
            fab.at(t0 + at, fab.freeze, i, overflow)
            fab.at(t0 + at + stall, fab.thaw, i)
    fab.run(t0 + 400 * US)
    lossy[0] = False  # the network heals: every failure gets handled, every survivor catches up
    fab.run_for(2_500 * US)

    fab.check()
    failed = {int(r.proc[0].rsplit(".", 1)[1]) for r in fab.records}
    alive = {i for i in range(1, n + 1) if i not in fab.dead}
    # recovered: registered again, as an incarnation after its last failed one. (A process declared
    # failed that never heard, after a stall, is failed: fenced, it delivers nothing above the
    # barrier it had, check() asserts what it delivers)
    last_failed = {int(r.proc[0].rsplit(".", 1)[1]): r.incarnation for r in fab.records}
    recovered = {i for i in alive & failed if (fab.eps[i].incarnation or 0) > last_failed[i]}
    fab.atomic(((alive - failed) | recovered) - crashed)
    # reliable delivery between processes nothing happened to
    clean = alive - failed - touched
    got: dict[tuple[int, int], set[int]] = {}
    for d in fab.deliveries:
        got.setdefault((d.src, d.seq), set()).add(d.receiver)
    failed_msgs = {(s, q) for s, _ts, _d, q in fab.failures}
    for (src, seq), (_ts, dsts) in fab.sent.items():
        if src in clean and set(dsts) <= clean and (src, seq) not in failed_msgs:
            assert got.get((src, seq), set()) == set(dsts), \
                f"scattering {(src, seq)} to {dsts} delivered at {sorted(got.get((src, seq), set()))}"
