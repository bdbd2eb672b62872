"""The ``tcsack`` target: T/C-SACK transfers h1 -> h2 back to back while frames arrive toward both
ends (none toward the receiver that could pass for the sender's data); every transfer must
complete with the right bytes (docs/faults.md "Fuzzing campaign")."""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from headers import strategies as hs

from ..runtime import RunState
from ..topo.nsenter import in_netns
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import row, settled
from .frames import Injector, switch_only, udp_payload, udp_source
from .ports import Link, find_link, ip_of, mac_of
from .sender import Sender
from .traffic import capture

#: the campaign's T/C-SACK transfers h1 -> h2: flow, rate, and h1's ephemeral ports (the
#: sender's socket is connected, from a port of h1's ip_local_port_range, set to these)
TCS_FLOW = 0x5A17


TCS_RATE_BPS = 20_000_000


TCS_BYTES = 3_000_000


TCS_SENDER_PORTS = (41000, 41001)


def tcs_forgery(flow: int) -> Callable[[bytes], bool]:
    """A predicate: the frame may pass for the sender's data of ``flow`` at the receiver: a
    T/C-SACK data packet of the flow from any source, or a UDP fragment or a frame too short to
    tell. Between two transfers the receiver is bound to nobody and takes the first data packet
    of its flow from whoever sent it (finding 7 of the long campaign, docs/faults.md); T/C-SACK
    carries no key, so such a packet is a hijack, not a fault the engines could refuse
    (docs/security.md: "The hosts' own traffic (TCP/UDP, T/C-SACK) is not protected")."""
    def check(frame: bytes) -> bool:
        got = udp_source(frame)
        if got is None:
            return False
        _src, sport, frag = got
        if frag or sport is None:
            return True
        payload = udp_payload(frame)
        return payload is None or len(payload) < 4 or (payload[0] == 1 and payload[2:4] == flow.to_bytes(2, "big"))

    return check


#: the engines' counters of what they ignored, reported with the refusals
TCS_COUNTED = ("foreign", "malformed", "bogus_acks", "duplicates", "resyncs")


def _pick(counters: Any, keys: tuple[str, ...]) -> dict[str, int]:
    return {k: v for k, v in (counters or {}).items() if k in keys and isinstance(v, int)}


class Transfers:
    """T/C-SACK transfers h1 -> h2 back to back (``python -m netstack.tcsack``) in a thread, until stopped."""

    def __init__(self, state: RunState) -> None:
        import threading

        self.state = state
        self.done: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="tcsack", daemon=True)

    def _loop(self) -> None:
        from ..tcsack.control import live_transfer

        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                send, recv = live_transfer(self.state, "tcsack", TCS_BYTES, "--flow", str(TCS_FLOW),
                                           rate=TCS_RATE_BPS, timeout=60.0, seed=n)
            except Exception as exc:  # (TransferError, a timeout, no JSON: the check fails; the next one starts)
                self.errors.append(f"transfer {n}: {type(exc).__name__}: {str(exc)[-2000:]}")
                continue
            self.done.append({"n": n, "ok": recv.get("sha256") == send.get("sha256") and bool(send.get("done", True)),
                              "seconds": send.get("seconds"), "sender_checks": send.get("checks", {}),
                              "receiver_checks": recv.get("checks", {}), "peer": recv.get("peer"),
                              "sender_counters": _pick(send.get("counters"), TCS_COUNTED),
                              "receiver_counters": _pick(recv.get("counters"), TCS_COUNTED)})

    def finish(self, timeout: float) -> None:
        self.stop.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            self.errors.append(f"the last transfer did not end within {timeout:g} s")


@contextlib.contextmanager
def port_range(ns: str, ports: tuple[int, int]) -> Iterator[None]:
    """The namespace's ephemeral ports (``ip_local_port_range``) set to ``ports`` for the body."""
    path = "/proc/sys/net/ipv4/ip_local_port_range"
    with in_netns(ns):
        with open(path) as f:
            old = f.read().split()
        with open(path, "w") as f:
            f.write(f"{ports[0]} {ports[1]}")
    try:
        yield
    finally:
        with in_netns(ns), open(path, "w") as f:
            f.write(" ".join(old))


def run_tcsack(opts: Options) -> Result:
    with topology(opts, None) as state:
        res = Result("tcsack", state.prefix, opts.seed, opts.frames)
        to_rcv = find_link(state, "sw1", "h1")  # from h1's namespace, toward the receiver on h2
        to_snd = find_link(state, "sw2", "h2")  # from h2's namespace, toward the sender on h1
        links = [to_rcv, to_snd]
        before, quiet = settled(state, links)
        injectors: list[Injector] = []
        with port_range(state.namespaces["h1"], TCS_SENDER_PORTS):
            warm = Transfers(state)
            try:
                warm.thread.start()
                time.sleep(1.0)  # the first transfer under way: its data and ACKs are the corpus
                corpus = [f for link in links for f in capture([link], lambda: time.sleep(0.15))]
            finally:
                warm.finish(60)
            res.notes.append(f"corpus: {len(corpus)} frames captured at sw1's p-h1 and sw2's p-h2 (T/C-SACK data "
                             "and ACKs of a transfer)")
            try:
                injectors = tcs_injectors(state, to_rcv, to_snd, corpus)
                open_injectors(injectors)
                _tcs_phase(opts, state, res, injectors, warm)
            finally:
                close_injectors(injectors)
        account_settled(state, res, injectors, links, (before, quiet), lambda node, port: node == "sw1")
        return res


def tcs_injectors(state: RunState, to_rcv: Link, to_snd: Link, corpus: list[bytes]) -> list[Injector]:
    from ..tcsack.live import PORT

    h1, h2 = ip_of(state, "h1"), ip_of(state, "h2")
    toward_receiver = hs.Endpoints(src_macs=[mac_of(state, "h1")], dst_macs=[mac_of(state, "h2"), b"\xff" * 6,
                                                                             to_rcv.mac],
                                   src_ips=[h1], dst_ips=[h2], sports=[*TCS_SENDER_PORTS, PORT], dports=[PORT])
    toward_sender = hs.Endpoints(src_macs=[mac_of(state, "h2")], dst_macs=[mac_of(state, "h1"), b"\xff" * 6,
                                                                           to_snd.mac],
                                 src_ips=[h2], dst_ips=[h1], sports=[PORT], dports=list(TCS_SENDER_PORTS))
    forged = tcs_forgery(TCS_FLOW)
    mix = ["tcsack"] * 6 + ["udp", "ethernet", "pfc", "pause", "linkguardian"]
    return [
        Injector("h1>sw1 toward the receiver", to_rcv, hs.fuzz_gen(hs.frame_gen(mix, toward_receiver), corpus),
                 forbidden=forged),
        Injector("h2>sw2 toward the sender", to_snd, hs.fuzz_gen(hs.frame_gen(mix, toward_sender), corpus)),
    ]


def _tcs_phase(opts: Options, state: RunState, res: Result, injectors: list[Injector],
               warm: Transfers) -> None:
    """Transfers run back to back while the frames arrive (toward the receiver none that could
    pass for the sender's data of the flow: :func:`tcs_forgery`; toward the sender everything,
    forged ACKs of the flow included, which the sender checks, docs/security.md "T/C-SACK");
    every transfer must complete with the receiver's SHA-256 equal to the sender's."""
    transfers = Transfers(state)
    sender = Sender(injectors, random.Random(opts.seed), opts.rate, opts.out, opts.target, switch_only())
    transfers.thread.start()
    time.sleep(0.8)  # (the receiver starts, the sender resolves h2)
    sender.run(opts.frames, None, guard=True, total=opts.frames)
    sender.progress(opts.frames)
    finish(res, injectors, sender)
    transfers.finish(90)
    runs = warm.done + transfers.done
    errors = warm.errors + transfers.errors
    bad = [t["n"] for t in transfers.done if not t["ok"]]
    res.checks.append(row("h1>h2", "transfers", f"{len(transfers.done) + len(transfers.errors)} transfers of "
                           f"{TCS_BYTES:,} B during the injection, {len(transfers.done) - len(bad)} complete with "
                           "matching SHA-256"
                           + (f"; mismatched: {bad}" if bad else "") + (f"; {'; '.join(errors)}" if errors else ""),
                           bool(transfers.done) and not bad and not errors and all(t["ok"] for t in warm.done)))
    h1 = state.host_ip("h1")
    peers = {f"{t['peer'][0]}:{t['peer'][1]}" if isinstance(t["peer"], list) else str(t["peer"]) for t in runs}
    res.checks.append(row("h2", "receiver's peer", f"bound to {', '.join(sorted(peers))} (the spoofed sender "
                           f"ports: {h1}:{TCS_SENDER_PORTS})", bool(runs) and peers <= {f"{h1}:{p}"
                                                                                         for p in TCS_SENDER_PORTS}))
    totals: Counter[str] = Counter()
    for t in transfers.done:
        for side in ("sender_checks", "receiver_checks", "sender_counters", "receiver_counters"):
            who = side.split("_")[0]
            totals.update({f"{who} {k}": v for k, v in (t[side] or {}).items() if isinstance(v, int)})
    res.notes.append("refusals: " + (", ".join(f"{k} {v}" for k, v in sorted(totals.items()) if v) or "none"))
    res.stream = {"transfers": [{k: t[k] for k in ("n", "ok", "seconds")} for t in runs]}
