"""The ``tcd`` target: sw3's marked port toward r0 on ``tcd-single`` during a DCQCN flow s0 -> r0;
afterwards the detector's state times must add up and both ends of the flow must have run to
the end (docs/faults.md "Fuzzing campaign")."""

from __future__ import annotations

import random
import sys
import time
from typing import Any

from headers import strategies as hs

from .. import runtime, toolproc
from ..runtime import RunState
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import row, settled
from .errors import FuzzError
from .frames import Injector, switch_only
from .ports import Link, find_link, ip_of, mac_of
from .sender import Sender
from .traffic import capture


class DcqcnFlow:
    """One DCQCN flow (``python -m netstack.tcd send|recv``, TCD's mode) between two hosts for
    ``seconds``; ``finish`` waits for both ends and returns their reports and exit statuses."""

    def __init__(self, state: RunState, src: str, dst: str, seconds: float) -> None:
        def argv(node: str, *args: str) -> list[str]:
            return runtime.node_exec_argv(state, node, [sys.executable, "-m", "netstack.tcd", *args])

        self.recv = toolproc.start(argv(dst, "recv", "--quiet", "--idle", "3", "--wait", "30"),
                                   "the TCD receiver", ready_on="stderr", error=FuzzError)
        self.send = toolproc.popen(argv(src, "send", "--quiet", "--dst", state.host_ip(dst),
                                        "--seconds", f"{seconds:g}", "--mode", "tcd", "--max-seconds",
                                        f"{seconds + 60:g}"))
        self.timeout = seconds + 90

    def finish(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, proc in (("sender", self.send), ("receiver", self.recv)):
            done = toolproc.finish(proc, self.timeout)
            out[name] = {"rc": done.returncode, "report": done.json() or {}, "stderr": done.err.strip()[-300:]}
        return out

    def kill(self) -> None:
        for proc in (self.send, self.recv):
            toolproc.kill(proc)


def run_tcd(opts: Options) -> Result:
    from ..tcd import control as tcd_control

    with topology(opts, "tcd-single") as state:
        prefix = state.prefix
        res = Result("tcd", prefix, opts.seed, opts.frames)
        link = find_link(state, "sw3", "r0")  # the receiver's edge port: its egress carries TCD's marker
        before, quiet = settled(state, [link])
        enabled_ns = time.monotonic_ns()
        tcd_control.enable(prefix, "sw3", link.ifname, "tcd")
        injectors: list[Injector] = []
        flow = DcqcnFlow(state, "s0", "r0", round(opts.frames / opts.rate * 1.2 + 2.0, 1))
        try:
            time.sleep(1.0)  # (the flow under way: its data and CNPs are the corpus)
            corpus = capture([link], lambda: time.sleep(0.2))
            res.notes.append(f"corpus: {len(corpus)} frames captured at sw3's {link.ifname} (TCD data, CNPs)")
            injectors = [tcd_injector(state, link, corpus)]
            open_injectors(injectors)
            sender = Sender(injectors, random.Random(opts.seed), opts.rate, opts.out, opts.target, switch_only())
            sender.run(opts.frames, None, guard=False, total=opts.frames)
            sender.progress(opts.frames)
            finish(res, injectors, sender)
            ends = flow.finish()
            st = runtime.control(prefix, "sw3", "tcd_status", port=link.ifname, timeline=True)
            res.checks += tcd_checks(st, link.ifname, enabled_ns) + _flow_rows(ends)
        finally:
            flow.kill()
            close_injectors(injectors)
        account_settled(state, res, injectors, [link], (before, quiet), lambda node, port: False)
        return res


def tcd_injector(state: RunState, link: Link, corpus: list[bytes]) -> Injector:
    senders = ("s0", "s1", "s2")
    ends = hs.Endpoints(src_macs=[mac_of(state, "r0")], dst_macs=[mac_of(state, n) for n in senders]
                        + [b"\xff" * 6, link.mac], src_ips=[ip_of(state, "r0"), ip_of(state, "r1")],
                        dst_ips=[ip_of(state, n) for n in senders])
    mix = ["tcd"] * 5 + ["pfc", "pfc", "pause", "udp", "ethernet", "roce"]
    return Injector("r0>sw3", link, hs.fuzz_gen(hs.frame_gen(mix, ends), corpus))


def tcd_checks(st: dict[str, Any], port: str, enabled_ns: int) -> list[dict[str, Any]]:
    """The marker's detectors after the campaign (``tcd_status`` with timelines): per class, the
    time in the three states adds up to the time from the detector's creation (its timeline's
    first entry, no earlier than the enable) to the status's ``now_ns``; no counter negative."""
    now = int(st["now_ns"])
    p = st["ports"][port]
    rows = []
    classes = p.get("classes", {})
    for cls, det in sorted(classes.items()):
        times = det["time_in_state_ns"]
        total = sum(times.values())
        timeline = p.get("timeline", {}).get(cls) or []
        created = int(timeline[0][0]) if timeline and not det["timeline_dropped"] else None
        ints = {k: v for k, v in {**det, **det["counters"], **times}.items() if isinstance(v, int)}
        negative = sorted(k for k, v in ints.items() if v < 0)
        if created is not None:
            ok = total == now - created and created >= enabled_ns
            what = f"{total} ns = now {now} - created {created}"
        else:  # (the creation entry dropped from the timeline: bounded by the enable)
            ok = 0 <= total <= now - enabled_ns
            what = f"{total} ns <= now - enable {now - enabled_ns}"
        ok = ok and not negative and det.get("clock_regressions") == 0
        rows.append(row(f"sw3/{port} class {cls}", "tcd states", f"{what}; " + ", ".join(
            f"{k} {v}" for k, v in times.items()) + f"; transitions {det['transitions']}, pauses {det['pauses']}, "
            f"resumes {det['resumes']}, clock regressions {det.get('clock_regressions')}"
            + (f"; negative: {negative}" if negative else ""), ok))
    if not classes:
        rows.append(row(f"sw3/{port}", "tcd states", "no class detector: the marker saw nothing", False))
    return rows


def _flow_rows(ends: dict[str, Any]) -> list[dict[str, Any]]:
    """Both ends ran to the end and reported (exit status 1 with a report: a flow the receiver saw
    is incomplete, e.g. a forged one, or ours cut short by its idle timeout under forged pauses;
    no report: a crash). The flows the receiver saw are listed."""
    s, r = ends["sender"], ends["receiver"]
    rep, rr = s["report"], r["report"]
    flows = rr.get("flows") or {}
    seen = ", ".join(f"flow {k}: {v.get('bytes', v.get('bytes_rx', '?'))} B, complete {v.get('complete')}"
                     for k, v in list(flows.items())[:4]) + (f" and {len(flows) - 4} more" if len(flows) > 4 else "")
    detail = (f"sender rc {s['rc']} ({rep.get('bytes', 0):,} B, done {rep.get('done')}, CNPs "
              f"{rep.get('counters', {}).get('cnps_ce')} CE / {rep.get('counters', {}).get('cnps_ue')} UE, malformed "
              f"{rep.get('malformed')}); receiver rc {r['rc']} (malformed {rr.get('malformed')}, CNPs sent "
              f"{rr.get('cnps_sent')}; {seen or 'no flow'})")
    if s["rc"] or r["rc"]:
        detail += f"; stderr: {s['stderr'][-200:]} {r['stderr'][-200:]}"
    ok = bool(rep) and bool(rr) and s["rc"] in (0, 1) and r["rc"] in (0, 1) and bool(rep.get("bytes"))
    return [row("s0>r0", "dcqcn flow", detail, ok)]


#: ``--attack short-pauses``: the quanta of each pause (512 bit times: far shorter than one frame)
SHORT_PAUSE_QUANTA = 1


def run_tcd_short_pauses(opts: Options) -> Result:
    """``netstack fuzz tcd --attack short-pauses`` (netstack/fuzz/attacks.py; issue 34, finding 4):
    while a DCQCN flow s0 -> r0 crosses sw3's marked port p-r0, r0 sends that port a PFC frame
    pausing every class for 1 quantum, every T_on^max/2, ``--frames`` times at most, for as long
    as the flow runs. The oracle, per class detector of the port: every pause counted as too short
    (``short_pauses``), none started an OFF period (``pauses``) and no time was spent undetermined.
    Before the fix each pause was an OFF period and the port stayed undetermined."""
    from headers.pfc import pause_frame

    from ..tcd import control as tcd_control
    from .ports import raw_socket

    with topology(opts, "tcd-single") as state:
        prefix = state.prefix
        res = Result("tcd", prefix, opts.seed, opts.frames)
        link = find_link(state, "sw3", "r0")
        tcd_control.enable(prefix, "sw3", link.ifname, "tcd")
        st = runtime.control(prefix, "sw3", "tcd_status", port=link.ifname)["ports"][link.ifname]
        t_on = int(st["params"]["t_on_max_ns"])
        every = t_on / 2e9
        seconds = max(2.0, min(opts.frames * every, 20.0))
        frame = pause_frame(mac_of(state, "r0"), range(8), SHORT_PAUSE_QUANTA)
        flow = DcqcnFlow(state, "s0", "r0", seconds)
        sock = raw_socket(link.far_ns, link.far_ifname)
        sent = 0
        try:
            time.sleep(0.5)  # (the flow under way)
            start = time.monotonic()
            while sent < opts.frames and time.monotonic() - start < seconds - 0.5:
                sock.send(frame)
                sent += 1
                time.sleep(max(0.0, start + sent * every - time.monotonic()))
            res.sent, res.duration_s = sent, time.monotonic() - start
            res.wall_s = res.duration_s
            ends = flow.finish()
            st = runtime.control(prefix, "sw3", "tcd_status", port=link.ifname)["ports"][link.ifname]
        finally:
            flow.kill()
            sock.close()
        res.notes.append(f"--attack short-pauses: {sent} PFC frames of {SHORT_PAUSE_QUANTA} quantum per class, one "
                         f"every {every * 1e3:.1f} ms (T_on^max/2) from r0 into sw3's {link.ifname}")
        res.checks += short_pause_checks(st, link.ifname, sent) + _flow_rows(ends)
        return res


def short_pause_checks(st: dict[str, Any], port: str, sent: int) -> list[dict[str, Any]]:
    """Per class detector of ``port`` (its ``tcd_status`` entry ``st``): ``sent`` pauses, each too
    short to be an OFF period (netstack/tcd/params.py ``min_off_ns``), made none and no time
    undetermined. A detector from before the fix has no ``short_pauses``: it fails."""
    rows = []
    classes = st.get("classes", {})
    for cls, det in sorted(classes.items()):
        short, pauses = det.get("short_pauses", 0), det.get("pauses", 0)
        undet = int(det["time_in_state_ns"]["undetermined"])
        ok = short == sent and pauses == 0 and undet == 0
        rows.append(row(f"sw3/{port} class {cls}", "short pauses",
                        f"{short} of {sent} pauses counted too short (min_off {st['params'].get('min_off_ns')} ns), "
                        f"{pauses} OFF periods, {undet / 1e6:.1f} ms undetermined", ok))
    if len(classes) != 8:
        rows.append(row(f"sw3/{port}", "short pauses", f"{len(classes)} class detectors, 8 expected (every class "
                                                       "paused)", False))
    return rows
