"""The plain-port fast path (``Port._drain``) sends exactly what the general path sends.

The general per-frame path runs whenever a departure hook is installed, so the same random
workload — batches of mixed classes and sizes on several ingress ports, PFC pauses from the
peer, a lossless ingress port generating its own pauses, software FCS, random ``transmit``
cadence — is run once with no hook (fast path) and once with a no-op hook (general path);
every released frame, its order, the time it came out and every counter must agree.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headers.fcs import append_fcs
from headers.pfc import build_pfc_frame
from netstack.switch.port import Port

from . import GBPS, class_tos, mac, make_switch, udp_frame

batch = st.lists(st.tuples(st.integers(0, 7), st.integers(60, 1514), st.integers(0, 3)), min_size=1, max_size=12)
arrival = st.tuples(st.just("a"), st.integers(0, 30_000), st.sampled_from(["p0", "p1"]), batch)
pause = st.tuples(st.just("p"), st.integers(0, 30_000), st.integers(0, 7), st.sampled_from([0, 5, 50, 300]))
tick = st.tuples(st.just("t"), st.integers(0, 30_000), st.just(0), st.just(0))
scenarios = st.lists(st.one_of(arrival, arrival, pause, tick), min_size=1, max_size=40)


def build():
    return make_switch(
        4,
        static_fdb={mac(2).hex(":"): "p2", mac(3).hex(":"): "p3"},
        p0={"lossless": True, "xoff_bytes": 6000, "xon_bytes": 2000},
        p2={"rate_bps": GBPS, "delay_ns": 3_000, "buffer_bytes": 40_000},
        p3={"rate_bps": GBPS // 2, "fcs": True},
    )


def run(events, hooked: bool):
    sw = build()
    if hooked:
        sw.departure_hook = lambda *args: None
    out = []
    t = 0
    fid = 0
    for kind, gap, a, b in events:
        t += gap
        if kind == "a":
            frames = []
            for cls, size, dst in b:
                fid += 1
                frame = bytearray(udp_frame(src=10, dst=2 + dst % 2, size=size, tos=class_tos(cls)))
                frame[42:46] = fid.to_bytes(4, "big")
                frames.append(bytes(frame))
            sw.receive_batch(a, frames, t)
        elif kind == "p":
            quanta = [0] * 8
            quanta[a] = b
            sw.receive("p3", append_fcs(build_pfc_frame(bytes(6), 1 << a, quanta)), t)
            sw.receive("p2", build_pfc_frame(bytes(6), 1 << a, quanta), t)
        out += [(t, port, frame) for port, frame in sw.transmit(t)]
        if kind == "t":
            deadline = sw.next_deadline()
            if deadline is not None:
                t = max(t, deadline)
                out += [(t, port, frame) for port, frame in sw.transmit(t)]
    t += 10**9
    out += [(t, port, frame) for port, frame in sw.transmit(t)]
    return out, sw.counters()


@settings(max_examples=150, deadline=None)
@given(scenarios)
def test_fast_path_matches_the_general_path(events):
    fast, fast_counters = run(events, hooked=False)
    slow, slow_counters = run(events, hooked=True)
    assert fast == slow
    assert fast_counters == slow_counters


def test_fast_path_is_taken_on_a_plain_port(monkeypatch):
    calls = []
    real = Port._drain

    def spy(self, cls, t):
        calls.append((self.name, cls))
        real(self, cls, t)

    monkeypatch.setattr(Port, "_drain", spy)
    sw = build()
    sw.receive_batch("p0", [udp_frame(src=10, dst=2, size=100) for _ in range(5)], 0)
    assert len(sw.transmit(10**6)) == 5
    assert ("p2", 0) in calls
