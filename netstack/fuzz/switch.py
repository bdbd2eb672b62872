"""The ``switch`` target: plain forwarding and edge filtering at sw1's edge port p-h1, from h1, while
a sequenced UDP stream h1 -> h2 crosses it (docs/faults.md "Fuzzing campaign")."""

from __future__ import annotations

from headers import strategies as hs

from ..runtime import RunState
from .campaign import Options, Result, stream_campaign, topology
from .frames import Injector
from .ports import Link, find_link, iface_mtu, ip_of, mac_of
from .traffic import capture, corpus_traffic


def run_switch(opts: Options) -> Result:
    with topology(opts, None) as state:
        res = Result("switch", state.prefix, opts.seed, opts.frames)
        link = find_link(state, "sw1", "h1")
        corpus = capture([link], corpus_traffic(state, [("h1", "h2"), ("h2", "h1")]))
        res.notes.append(f"corpus: {len(corpus)} frames captured at {link.node}/{link.ifname}")
        injectors = switch_injectors(state, link, corpus, iface_mtu(link.far_ns, link.far_ifname) + 14)
        return stream_campaign(opts, state, res, injectors, ("h1", "h2"), lambda node, port: True)


def switch_injectors(state: RunState, link: Link, corpus: list[bytes], max_len: int) -> list[Injector]:
    """Any valid frame aimed at h2, c1, everyone or the port itself, from h1, and mutations of
    them and of the corpus, cut to what h1's interface sends (``max_len``)."""
    ends = hs.Endpoints(dst_macs=[mac_of(state, n) for n in ("h2", "c1")] + [b"\xff" * 6, link.mac],
                        src_macs=[mac_of(state, "h1")], dst_ips=[ip_of(state, n) for n in ("h2", "c1")],
                        src_ips=[ip_of(state, "h1")])
    valid = hs.frame_gen(None, ends)
    return [Injector("h1>sw1", link, hs.fuzz_gen(valid, corpus, max_len=max_len))]
