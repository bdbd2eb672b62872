"""The ``dta`` target: sw2's translator, reports and anything else from h2 into p-h2 and RoCEv2
responses and anything else from c1 into p-c1, while genuine Key-Writes flow; afterwards every
genuine Key-Write must be executed and read back (docs/faults.md "Fuzzing campaign")."""

from __future__ import annotations

import contextlib
import random
import socket
import time
from typing import Any

from headers import strategies as hs

from ..auth.frame import Sealer
from ..runtime import RunState
from ..topo.nsenter import in_netns
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import row, settled
from .frames import Injector, switch_only
from .ports import Link, find_link, ip_of, mac_of
from .sender import Sender
from .traffic import capture


class Reports:
    """Genuine DTA Key-Write reports from a host to the collector, sent in this process at a
    rate (``pump``, like :class:`Stream`) or all at once (``send``)."""

    def __init__(self, state: RunState, src: str, collector_ip: str, rate: float, first_key: int,
                 redundancy: int = 2) -> None:
        from headers import dta

        self._dta = dta
        self.sealer = _sealer(state, src)
        with in_netns(state.namespaces[src]):
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("0.0.0.0", 40041))
        self.dst = (collector_ip, 40040)
        self.rate = rate
        self.first_key = first_key
        self.redundancy = redundancy
        self.sent = 0
        self._t0: float | None = None

    @staticmethod
    def value_of(key: int) -> int:
        return (key * 2654435761) & 0xFFFFFFFF

    def _send_one(self) -> None:
        key = self.first_key + self.sent
        prim = self._dta.KeyWrite(self.redundancy, key, (self.value_of(key),))
        report = self._dta.encode_report(self._dta.DTABase.of(prim, self.sent & 0xFF), prim)
        if self.sealer is not None:
            report = self.sealer.seal(report)
        with contextlib.suppress(OSError):
            self.sock.sendto(report, self.dst)
        self.sent += 1

    def start(self) -> None:
        self._t0 = time.monotonic()

    def pump(self) -> None:
        if self._t0 is not None:
            due = int((time.monotonic() - self._t0) * self.rate)
            while self.sent < due:
                self._send_one()

    def send(self, count: int) -> list[int]:
        keys = []
        for _ in range(count):
            keys.append(self.first_key + self.sent)
            self._send_one()
            time.sleep(1 / self.rate)
        return keys

    def close(self) -> None:
        self.sock.close()


def _sealer(state: RunState, src: str) -> Sealer | None:
    """On a keyed topology the translator opens every report: the genuine reports are sealed
    as ``netstack dta report`` seals them (issue 34, finding 7: unsealed, all were refused)."""
    from ..dta import control as dta_control
    from ..dta.reportauth import reporter_sealer

    t = dta_control.translator_status(state.prefix, "sw2", quiet=True)
    found = dta_control.reporter_auth(state, src, t.get("translator") or t)
    if found is None:
        return None
    path, ip, era = found
    return reporter_sealer(str(path), ip, era, time.time())


def run_dta(opts: Options) -> Result:
    from ..dta import control as dta_control

    with topology(opts, None) as state:
        prefix = state.prefix
        res = Result("dta", prefix, opts.seed, opts.frames)
        rep = find_link(state, "sw2", "h2")  # reports (and anything else) from a reporter's edge
        col = find_link(state, "sw2", "c1")  # RoCEv2 responses (and anything else) from the collector's edge
        links = [rep, col]
        before, quiet = settled(state, links)
        info = dta_control.enable_translator(prefix, "sw2", "c1")
        injectors: list[Injector] = []
        try:
            c_ip = state.host_ip("c1")
            warm = Reports(state, "h2", c_ip, 2000.0, 500_000)
            try:
                corpus = capture(links, lambda: warm.send(100))
            finally:
                warm.close()
            res.notes.append(f"corpus: {len(corpus)} frames captured at sw2's p-h2 and p-c1 (reports, RoCEv2)")
            injectors = dta_injectors(state, info, rep, col, corpus)
            open_injectors(injectors)
            _dta_phases(opts, state, res, injectors, info)
        finally:
            dta_control.disable_translator(prefix, "sw2")
            close_injectors(injectors)
        account_settled(state, res, injectors, links, (before, quiet), lambda node, port: False)
        return res


def dta_injectors(state: RunState, info: dict[str, Any], rep: Link, col: Link,
                   corpus: list[bytes]) -> list[Injector]:
    c1, h2 = mac_of(state, "c1"), mac_of(state, "h2")
    t_mac = bytes.fromhex(str(info["translator_mac"]).replace(":", ""))
    t_ip = socket.inet_aton(str(info["translator_ip"]))
    reports = hs.Endpoints(dst_macs=[c1, rep.mac, b"\xff" * 6], src_macs=[h2], dst_ips=[ip_of(state, "c1")],
                           src_ips=[ip_of(state, "h2"), ip_of(state, "h1")])
    responses = hs.Endpoints(dst_macs=[t_mac, h2], src_macs=[c1], dst_ips=[t_ip, ip_of(state, "h2")],
                             src_ips=[ip_of(state, "c1")])
    mix = ["dta"] * 4 + ["dta-nack", "roce", "udp", "ethernet", "pfc", "linkguardian"]
    return [
        Injector("h2>sw2 reports", rep, hs.fuzz_gen(hs.frame_gen(mix, reports), corpus), weight=2),
        Injector("c1>sw2 responses", col, hs.fuzz_gen(hs.frame_gen(["roce"] * 4 + ["dta", "udp"], responses),
                                                      corpus)),
    ]


def _dta_phases(opts: Options, state: RunState, res: Result, injectors: list[Injector],
                info: dict[str, Any]) -> None:
    """Genuine reports from h1 flow while the frames arrive (forged Key-Writes may overwrite their
    slots, as any reporter's may: not checked); then, with the injection over, every one of a
    batch of genuine Key-Writes must be executed by the collector (its ``writes``) and read
    back with its value: nothing the fuzzing did (a forged NAK, a PSN resync, a garbage
    response) left the translator or the collector stuck."""
    from ..dta import CollectorQuery
    from ..dta import control as dta_control

    prefix = state.prefix
    c_ip = state.host_ip("c1")
    rng = random.Random(opts.seed)
    during = Reports(state, "h1", c_ip, max(100.0, min(1000.0, opts.rate / 10)), 1_000_000)
    after = during  # (one socket: the reporter's port)
    q = CollectorQuery.open(info["memory_dir"])
    try:
        sender = Sender(injectors, rng, opts.rate, opts.out, opts.target, switch_only())
        during.start()
        sender.run(opts.frames, during, guard=False, total=opts.frames)
        sender.progress(opts.frames)
        finish(res, injectors, sender)
        time.sleep(0.5)

        def writes() -> int:
            return int(dta_control.collector_status(prefix)["responder"]["qps"]["keywrite"]["writes"])

        after.rate = 1000.0
        t = dta_control.translator_status(prefix, "sw2", quiet=True)
        tc = (t.get("translator") or t).get("counters", {})
        left = int(tc.get("grace_reports_left") or 0) if tc.get("in_grace") else 0
        if left:
            # a resync the campaign caused (a forged response the translator had to believe: a
            # mutated copy of the collector's own) drops the next grace_reports reports by
            # design (DTA §5.3): send them first
            after.send(left + 10)
            time.sleep(0.2)
        res.notes.append(f"translator after the injection: resyncs {tc.get('resyncs')}, "
                         f"in grace {bool(tc.get('in_grace'))} ({left} reports left)")
        w0 = writes()
        keys = after.send(300)
        want = w0 + len(keys) * after.redundancy
        deadline = time.monotonic() + 10
        while writes() < want and time.monotonic() < deadline:
            time.sleep(0.05)
        got = writes()
        res.checks.append(row("c1", "reports executed", f"{got - w0} WRITEs for {len(keys)} genuine Key-Writes "
                               f"x redundancy {after.redundancy} after the campaign (want {want - w0})",
                               got - w0 == want - w0))
        wrong = [k for k in keys if q.keywrite_get(k) != (Reports.value_of(k),)]
        res.checks.append(row("c1", "reports in memory", f"{len(keys) - len(wrong)}/{len(keys)} keys read back "
                               f"their values" + (f" (first wrong: {wrong[:5]})" if wrong else ""), not wrong))
        res.stream = {"reports during the campaign (not checked)": during.sent - len(keys), "reports after": len(keys)}
        t = dta_control.translator_status(prefix, "sw2", quiet=True)
        tc = (t.get("translator") or t).get("counters", {})
        res.notes.append("translator: " + ", ".join(f"{k} {v}" for k, v in tc.items()
                                                    if isinstance(v, int) and v and not isinstance(v, bool)))
    finally:
        q.close()
        during.close()
