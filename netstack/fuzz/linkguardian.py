"""The ``linkguardian`` target: both ends of sw1-sw2 with LinkGuardian on, in three phases (what it
must withstand with the stream checked; everything, forged tags and PFC included, unchecked; a
new stream after), and the receiver's bounds (docs/faults.md "Fuzzing campaign")."""

from __future__ import annotations

import random
import time
from typing import Any

from headers import strategies as hs
from headers.linkguardian import ETHERTYPE as LG_ETHERTYPE

from .. import runtime
from ..runtime import RunState
from ..switch.forwarding import is_link_local
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import row, settled
from .frames import Injector, switch_only
from .ports import Link, find_link, ip_of, mac_of
from .sender import Sender
from .traffic import Stream, capture, corpus_traffic, stream_detail, stream_ok


def lg_or_mac_control(frame: bytes) -> bool:
    """A frame the link's protocols act on as protocol state: a LinkGuardian frame (its tags
    move the receiver's sequence state and the sender's Tx buffer) or MAC control (PFC, PAUSE,
    link-local groups)."""
    if len(frame) < 14:
        return False
    etype = frame[12] << 8 | frame[13]
    return etype in (LG_ETHERTYPE, 0x8808) or is_link_local(frame)


def run_linkguardian(opts: Options) -> Result:
    from ..linkguardian.control import disable_link, enable_link

    with topology(opts, None) as state:
        prefix = state.prefix
        res = Result("linkguardian", prefix, opts.seed, opts.frames)
        rx = find_link(state, "sw2", "sw1")  # into sw2's receiver, sent on sw1's p-sw2
        tx = find_link(state, "sw1", "sw2")  # into sw1's sender, sent on sw2's p-sw1
        links = [rx, tx]
        before, quiet = settled(state, links)
        enable_link(prefix, "sw1-sw2", copies=2)
        injectors: list[Injector] = []
        try:
            corpus = capture(links, corpus_traffic(state, [("h1", "h2"), ("h2", "h1"), ("h1", "c1")]))
            res.notes.append(f"corpus: {len(corpus)} frames captured on sw1-sw2 (LinkGuardian on)")
            injectors = lg_injectors(state, rx, tx, corpus)
            open_injectors(injectors)
            _lg_phases(opts, state, res, injectors)
            lg = runtime.control(prefix, "sw2", "lg_status")
        finally:
            disable_link(prefix, "sw1-sw2")
            close_injectors(injectors)
        account_settled(state, res, injectors, links, (before, quiet),
                        lambda node, port: (node, port) != ("sw1", "p-sw2"))
        res.checks += _lg_bounds(lg)
        return res


def lg_injectors(state: RunState, rx: Link, tx: Link, corpus: list[bytes]) -> list[Injector]:
    from ..linkguardian import LG_CONTROL_MAC

    hosts = [mac_of(state, n) for n in ("h1", "h2", "c1")]
    into_rx = hs.Endpoints(dst_macs=[*hosts, b"\xff" * 6, rx.mac], src_macs=hosts,
                           dst_ips=[ip_of(state, n) for n in ("h2", "c1")], src_ips=[ip_of(state, "h1")])
    into_tx = hs.Endpoints(dst_macs=[LG_CONTROL_MAC, tx.mac, *hosts], src_macs=[rx.mac, *hosts],
                           dst_ips=[ip_of(state, "h1")], src_ips=[ip_of(state, n) for n in ("h2", "c1")])
    lg_heavy = ["linkguardian"] * 4 + ["pfc", "pause", "udp", "ethernet", "dta", "roce"]
    return [
        Injector("sw1>sw2 receiver", rx, hs.fuzz_gen(hs.frame_gen(lg_heavy, into_rx), corpus),
                 guarded=lg_or_mac_control),
        Injector("sw2>sw1 sender", tx, hs.fuzz_gen(hs.frame_gen(lg_heavy, into_tx), corpus),
                 guarded=lg_or_mac_control),
    ]


def _lg_phases(opts: Options, state: RunState, res: Result, injectors: list[Injector]) -> None:
    """Phase 1: the stream runs while frames arrive that LinkGuardian must withstand (any frame
    without a valid FCS; with a valid one, anything but LinkGuardian tags and MAC control,
    which docs/security.md lists as what an attacker on the link can forge without keys): the
    stream must be complete and in order. Phase 2: everything, forged tags and PFC with a
    valid FCS included, while a stream runs (not checked). Phase 3: no injection; a new
    stream must be complete and in order (LinkGuardian recovered)."""
    rng = random.Random(opts.seed)
    stream = Stream(state, "h1", "h2", rate=max(200.0, min(2000.0, opts.rate / 5)))
    try:
        sender = Sender(injectors, rng, opts.rate, opts.out, opts.target, switch_only())
        first = opts.frames // 2
        stream.start()
        sender.run(first, stream, guard=True, total=opts.frames)
        phase1 = stream.finish()
        res.checks.append(row("h1>h2", "stream (phase 1)", stream_detail(phase1), stream_ok(phase1)))
        stream.reset()
        stream.start()
        sender.run(opts.frames - first, stream, guard=False, total=opts.frames)
        sender.progress(opts.frames)
        phase2 = stream.finish()
        stream.reset()
        time.sleep(0.5)  # holes the attack opened time out (ackNoTimeout is milliseconds)
        stream.send_all(2000)
        phase3 = stream.finish()
        res.checks.append(row("h1>h2", "stream (phase 3)", stream_detail(phase3), stream_ok(phase3)))
        res.stream = {"phase1": phase1, "phase2 (not checked)": phase2, "phase3": phase3}
        finish(res, injectors, sender)
    finally:
        stream.close()


def _lg_bounds(lg: dict[str, Any]) -> list[dict[str, Any]]:
    """The receiver's state stayed within its bounds through the attack."""
    st = lg.get("p-sw1", {}).get("receiver", {})
    c, p = st.get("counters", {}), st.get("params", {})
    limit = p.get("reorder_buffer_limit_bytes")
    peak = c.get("reorder_buffer_max_bytes", 0)
    ok = limit is not None and peak <= limit
    return [row("sw2/p-sw1", "lg bounds", f"reordering buffer peak {peak} B <= limit {limit} B; resyncs "
                 f"{c.get('resyncs')}, holes abandoned {c.get('holes_abandoned')}, mode switches "
                 f"{c.get('mode_switches')}", ok)]
