"""The ``dta`` target: sw2's translator, reports and anything else from h2 into p-h2 and RoCEv2
responses and anything else from c1 into p-c1, while genuine Key-Writes flow; afterwards every
genuine Key-Write must be executed and read back (docs/faults.md "Fuzzing campaign"); and its
attack ``flood``, one reporter flooding the translator while another reports (:func:`run_dta_flood`)."""

from __future__ import annotations

import contextlib
import random
import socket
import sys
import threading
import time
from typing import Any

from headers import strategies as hs

from .. import runtime, toolproc
from ..auth.frame import Sealer
from ..experiment import LagWindow
from ..runtime import RunState
from ..topo.nsenter import in_netns
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import liveness, row, settled
from .errors import FuzzError
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


#: ``--attack flood``: the flooding reporter's rate, at least (reports/s; ``--rate`` may raise it), each
#: a Key-Write of the store's full redundancy (4 WRITEs): 100,000 WRITEs/s, about twice what the
#: collector drained on this 2-core VM under it (46,000/s measured; 15,000 reports/s filled the
#: window only now and then, 5,000/s never)
FLOOD_RATE = 25_000.0
#: the flood's one key (its slots rewritten over and over: a genuine key loses a slot to it only by
#: a hash collision, and keeps its other copy)
FLOOD_KEY = 900_000
#: the genuine Key-Writes (redundancy 2) sent while the window is full, their rate, the first key
FLOOD_GENUINE = 200
FLOOD_GENUINE_RATE = 200.0
FLOOD_GENUINE_KEY = 2_000_000
#: the genuine reporter reports alone this long before the flood starts (it is an active reporter,
#: netstack/dta/fairshare.py, when the flood arrives); the flooder may take FLOOD_START_S to start
#: (a Python process on a busy machine), and its flood FLOOD_LEAD_S to fill the window
FLOOD_WARM_S = 0.2
FLOOD_START_S = 10.0
FLOOD_LEAD_S = 2.0
#: how often the translator's status is read until the window is full
FLOOD_POLL_S = 0.05


def _max_redundancy(q: Any) -> int:
    """The redundancy the collector's Key-Write store takes at most (the flood's)."""
    store = q.memory.find("keywrite")
    if store is None:
        raise FuzzError("the collector has no Key-Write store to flood")
    return int(store.layout["max_redundancy"])


def run_dta_flood(opts: Options) -> Result:
    """``netstack fuzz dta --attack flood`` (netstack/fuzz/attacks.py; issue 34, finding 5): h1
    sends genuine Key-Writes at :data:`FLOOD_GENUINE_RATE`/s; then h2, a legitimate reporter (its
    reports sealed on a keyed topology), floods sw2's translator with Key-Writes at a bounded
    rate, :data:`FLOOD_RATE` reports/s of 4 WRITEs each, faster than the collector drains them.
    Once the translator's status shows the output window full (reports shed for want of room),
    h1 sends :data:`FLOOD_GENUINE` more and the flood stops. The oracle (:func:`flood_checks`):
    the window was full while they were sent (the attack landed); every genuine Key-Write was
    executed and reads back its value; the flood's excess was counted against h2 alone
    (``share_dropped``, per reporter in ``fair_share``); every daemon alive. ``--frames`` does
    not apply: the flood lasts as long as the genuine reports."""
    from ..dta import CollectorQuery
    from ..dta import control as dta_control

    with topology(opts, None) as state:
        prefix = state.prefix
        res = Result("dta", prefix, opts.seed, opts.frames)
        info = dta_control.enable_translator(prefix, "sw2", "c1")
        c_ip = state.host_ip("c1")
        rate = max(opts.rate, FLOOD_RATE)
        port = find_link(state, "sw2", "h2").ifname  # the flooder's edge port
        flood = None
        stop = threading.Event()
        genuine = Reports(state, "h1", c_ip, FLOOD_GENUINE_RATE, FLOOD_GENUINE_KEY)
        # the genuine reports from a thread of their own: a status read that waits on a busy sw2
        # must not pause them (a reporter quiet for the horizon is no longer active)
        pacer = threading.Thread(target=_pace, args=(genuine, stop), daemon=True)
        q = CollectorQuery.open(info["memory_dir"])
        try:
            t0 = _translator(prefix)
            n = _max_redundancy(q)
            argv = _flooder_argv(state, "h2", c_ip, rate, n, dta_control.report_auth_argv(state, "h2", t0))
            lags = LagWindow(prefix).start()
            genuine.start()
            pacer.start()
            time.sleep(FLOOD_WARM_S)
            rx0 = _port_rx(prefix, port)
            flood = toolproc.popen(argv)
            start = _until_flooding(prefix, port, rx0, flood, time.monotonic() + FLOOD_START_S)
            t1 = None if start is None else _until_full(prefix, start + FLOOD_LEAD_S)
            lead = time.monotonic() - (start or 0.0)
            at_full, full_at = genuine.sent, time.monotonic()
            while t1 is not None and genuine.sent < at_full + FLOOD_GENUINE:
                time.sleep(0.05)
            t2 = _translator(prefix)
            during = time.monotonic() - full_at
            toolproc.kill(flood)
            stop.set()
            pacer.join()
            flooded = _port_rx(prefix, port) - rx0
            res.duration_s = res.wall_s = time.monotonic() - start if start is not None else 0.0
            keys = list(range(FLOOD_GENUINE_KEY, FLOOD_GENUINE_KEY + genuine.sent))
            wrong = _read_back(q, keys)
            lags.stop()
            t3 = _translator(prefix)
            err = "" if flood.stderr is None else flood.stderr.read().strip()[-300:]
        finally:
            stop.set()
            if pacer.is_alive():
                pacer.join()
            toolproc.kill(flood)
            genuine.close()
            q.close()
            dta_control.disable_translator(prefix, "sw2")
        res.sent = flooded
        res.stream = {"genuine Key-Writes": len(keys), "while the window was full": len(keys) - at_full,
                      "read back": len(keys) - len(wrong)}
        full = None if start is None else f"after {lead:.2f} s" if t1 is not None else f"not within {FLOOD_LEAD_S:g} s"
        res.notes.append(f"--attack flood: h2 sent {flooded} Key-Writes of redundancy {n} into sw2's {port} at "
                         f"{flooded / max(res.duration_s, 1e-9):,.0f}/s (paced at {rate:,.0f}/s); "
                         + ("it never started" if full is None else f"the window full {full}")
                         + f"; h1 sent {len(keys)} Key-Writes of redundancy {genuine.redundancy} at "
                         f"{FLOOD_GENUINE_RATE:g}/s, {len(keys) - at_full} of them while the window was full")
        res.checks += flood_checks(t1, t2, t3, during, state.host_ip("h2"), state.host_ip("h1"), keys, wrong)
        res.checks.append(starved_row(lags, t3, bool(wrong)))
        res.checks.append(row("h2", "flooder", f"{flooded} reports received at sw2's {port}" + (
            f"; it never started: {err}" if start is None else ""), start is not None and flooded > 0))
        res.checks += liveness(state)
        return res


def _flooder_argv(state: RunState, src: str, c_ip: str, rate: float, redundancy: int, auth: list[str]) -> list[str]:
    """``netstack dta report``'s tool in ``src``: Key-Writes of :data:`FLOOD_KEY` at ``rate``,
    sealed with ``auth`` (its sealing options); stopped once the genuine reports are in, its
    ``--duration`` only bounds it."""
    seconds = FLOOD_START_S + FLOOD_LEAD_S + 2 * FLOOD_GENUINE / FLOOD_GENUINE_RATE
    return runtime.node_exec_argv(state, src, [
        sys.executable, "-m", "netstack.dta.live", "report", "keywrite", "--dst", c_ip, "--key", str(FLOOD_KEY),
        "--count", "1", "--redundancy", str(redundancy), "--rate", f"{rate:g}", "--duration", f"{seconds:g}",
        "--quiet", *auth])


def _port_rx(prefix: str, port: str) -> int:
    """Frames sw2's ``port`` received, its socket's overflow included."""
    c = runtime.control(prefix, "sw2", "status")["ports"][port]
    return int(c["rx_frames"]) + int(c.get("kernel_drops", 0))


def _until_flooding(prefix: str, port: str, rx0: int, flood: Any, deadline: float) -> float | None:
    """When the flood reached sw2's ``port`` (its first thousand reports), or None: the flooder
    exited or did not start before ``deadline``."""
    while flood.poll() is None:
        if _port_rx(prefix, port) - rx0 >= 1000:
            return time.monotonic()
        if time.monotonic() >= deadline:
            return None
        time.sleep(FLOOD_POLL_S)
    return None


def _translator(prefix: str) -> dict[str, Any]:
    from ..dta import control as dta_control

    t = dta_control.translator_status(prefix, "sw2", quiet=True)
    return dict(t.get("translator") or t)


def _dropped(t: dict[str, Any]) -> int:
    """Reports the translator shed for want of room: the window full, or a reporter over its share."""
    c = t.get("counters", {})
    return int(c.get("window_dropped", 0)) + int(c.get("share_dropped", 0))


def _pace(reports: Reports, stop: threading.Event) -> None:
    """Send ``reports`` at their rate until ``stop`` is set."""
    while not stop.is_set():
        reports.pump()
        stop.wait(1 / reports.rate)


def _until_full(prefix: str, deadline: float) -> dict[str, Any] | None:
    """The translator's status once it shed a report for want of room in its window (None: not
    before ``deadline``)."""
    while True:
        t = _translator(prefix)
        if _dropped(t):
            return t
        if time.monotonic() >= deadline:
            return None
        time.sleep(FLOOD_POLL_S)


def _read_back(q: Any, keys: list[int], timeout: float = 10.0) -> list[int]:
    """The genuine keys that do not read back their values (waiting up to ``timeout`` s for the
    collector to execute what is still in flight)."""
    deadline = time.monotonic() + timeout
    while True:
        wrong = [k for k in keys if q.keywrite_get(k) != (Reports.value_of(k),)]
        if not wrong or time.monotonic() >= deadline:
            return wrong
        time.sleep(0.2)


def starved_row(lags: LagWindow, t: dict[str, Any], lost: bool) -> dict[str, Any]:
    """Whether the machine may have decided the run: a daemon's largest scheduling delay during
    the flood beyond the translator's window time-out (as a DTA report run's limit,
    netstack/dta/verdict.py), in a run that lost genuine reports (``lost``). A collector held up
    longer than that times the window out, and the probing window that follows sheds genuine
    reports too (20 of 308 once on CI, the unit tests running beside); a switch on h1's path held
    up longer than the fair share's horizon makes h1 inactive, and its late reports meet a window
    h2 took (docs/faults.md). A run that lost none passes whatever the delays (on 2 cores the flood
    itself holds sw1 up 85-150 ms beside the unit tests): the oracle held. Not the p99 a report run
    must keep: the flood keeps sw2 busy on purpose (its p99 20-22 ms on an idle machine). The row
    is the run's validity, ``scheduling delay``: failed, the run is the machine's, not a verdict."""
    from ..dta.verdict import lag_limits
    from ..validity import Validity

    v = Validity()
    most = lag_limits((t.get("config") or {}).get("window_timeout_ns"))["max_ms"]
    if lags.check(v, p99_ms=most, max_ms=most):
        return row("machine", "scheduling delay", f"every daemon on time: {v.checks[0].measured}", True)
    if not lost:
        return row("machine", "scheduling delay", f"{'; '.join(v.reasons)}; every genuine report read back all "
                   "the same: the machine did not decide the run", True)
    return row("machine", "scheduling delay", f"{'; '.join(v.reasons)}: the genuine reports lost may be the "
               "machine's (a starved run, not a verdict: run it again on a quieter machine)", False)


def flood_checks(t1: dict[str, Any] | None, t2: dict[str, Any], t3: dict[str, Any], seconds: float, flooder: str,
                 genuine: str, keys: list[int], wrong: list[int]) -> list[dict[str, Any]]:
    """The oracle of ``--attack flood`` from the translator's status once the window was full
    (``t1``; None: it never was), ``seconds`` later after the genuine reports (``t2``) and at
    the end (``t3``), and the genuine ``keys``, of which ``wrong`` did not read back. A translator
    from before the fix has no fair share: the last check fails there, and the second with it."""
    c2, c3 = t2.get("counters", {}), t3.get("counters", {})
    window = t2.get("config", {}).get("window")
    if t1 is None:
        rows = [row("sw2", "window full", f"no report shed for want of room (window {window}): the flood did not "
                    "fill the window (a faster machine: raise --rate)", False)]
    else:
        shed = _dropped(t2) - _dropped(t1)
        taken = int(c2.get("keywrite", 0)) - int(t1.get("counters", {}).get("keywrite", 0))
        rows = [row("sw2", "window full", f"{shed} reports shed for want of room while the genuine ones were sent, "
                    f"{taken} taken ({taken / max(seconds, 1e-9):,.0f}/s: the collector's pace) in {seconds:.2f} s; "
                    f"window {window}", shed > 0)]
    rows.append(row("c1", "genuine reports", f"{len(keys) - len(wrong)}/{len(keys)} genuine Key-Writes executed and "
                    "read back" + (f" (first missing: {wrong[:5]})" if wrong else "") + f"; translator: window_dropped "
                    f"{c3.get('window_dropped')}, window_timeouts {c3.get('window_timeouts')}, resyncs "
                    f"{c3.get('resyncs')}, grace_dropped {c3.get('grace_dropped')}", bool(keys) and not wrong))
    fair = c3.get("fair_share")
    share = int(c3.get("share_dropped", 0))
    by = (fair or {}).get("share_dropped_by_reporter", {})
    rows.append(row("sw2", "share dropped", f"share_dropped {share}, by reporter {by}" if fair is not None
                    else "no fair share in the translator's status", fair is not None and share > 0
                    and by == {flooder: share} and genuine not in by))
    return rows
