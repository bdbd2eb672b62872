"""``netstack fault kill | start | link | pause-storm | clock-jump``: faults on a running topology."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..argtypes import finite_float, int_between, non_negative_float, positive_float
from ..errors import CommandError
from .common import acts_on_testbed, print_json

DESCRIPTION = """\
Inject a fault into a topology 'netstack up' started, and say what the network counted. Each
fault is one command; docs/faults.md says what each one costs and how every protocol recovers
(LinkGuardian, DTA, 1Pipe, the PFC watchdog), with the numbers measured on this testbed."""

EPILOG = """\
examples:
  netstack fault kill sw2 --restart --down-ms 300     switch daemon crash (kill -9), back 300 ms later
  netstack fault kill c1 --signal TERM                collector stopped cleanly, stays down
  netstack fault start c1                             ... and started again
  netstack fault kill c1 --signal STOP --down-ms 500  collector frozen for 500 ms (a stall)
  netstack fault kill c1 --signal STOP                frozen until 'netstack fault start c1'
  netstack fault link sw1-sw2 down                    both veth ends down (no carrier)
  netstack fault link sw1-sw2 up
  netstack fault pause-storm h1-sw1 --from h1 --seconds 2   a host floods sw1 with PFC pauses
  netstack fault clock-jump h2 --ms 50                1Pipe processes on h2 see their clock jump 50 ms"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fault", help="inject faults: daemon crash/restart, link down/up, pause storm, clock jump",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    fsub = p.add_subparsers(dest="fault_cmd", metavar="FAULT", required=True)

    k = fsub.add_parser(
        "kill", help="kill a node's daemon (switch, collector...), optionally restart it",
        description="Send a signal to the daemon of NODE (a node running one daemon, or a daemon's name such as "
                    "ctl-r2) and wait until it is gone. KILL is a crash: nothing is cleaned up (a collector leaves "
                    "its shared memory, every protocol state in a switch is lost). TERM is a clean stop. With "
                    "--restart the daemon is started again --down-ms after it died, with the same argv, config, "
                    "control socket and environment, its log appended to, and the command waits until it answers; "
                    "the run state gets the new pid, so 'netstack status' and 'netstack down' keep working. STOP "
                    "freezes the daemon (a stall, not a crash: its sockets stay open and fill up) for --down-ms, "
                    "then resumes it (SIGCONT); without --down-ms it stays frozen until 'netstack fault start'.")
    k.add_argument("node", metavar="NODE", help="node (sw2, c1) or daemon name (ctl-r2)")
    k.add_argument("--signal", dest="sig", type=str.upper, choices=["KILL", "TERM", "STOP"], default="KILL",
                   help="KILL (default: a crash), TERM (a clean stop) or STOP (a freeze)")
    k.add_argument("--restart", action="store_true", help="start the daemon again (after --down-ms)")
    k.add_argument("--down-ms", type=non_negative_float("a time"), default=0.0, metavar="D",
                   help="how long it stays down before the restart, or frozen with STOP (default: 0)")
    _common(k)
    k.set_defaults(func=cmd_kill)

    s = fsub.add_parser("start", help="bring back a daemon 'fault kill' left down or frozen",
                        description="Bring NODE's daemon back after 'netstack fault kill': resume it if it is frozen "
                                    "(SIGCONT), else start it again with the same argv, config, control socket, "
                                    "environment and log, wait until it answers and record its pid in the run state.")
    s.add_argument("node", metavar="NODE", help="node or daemon name")
    _common(s)
    s.set_defaults(func=cmd_start)

    n = fsub.add_parser(
        "link", help="set a link down or up (veth ends administratively down/up)",
        description="Set LINK's veth end(s) administratively down or up, inside the nodes' namespaces. A veth "
                    "whose peer end is down has no carrier, so either end down stops the link in both directions. "
                    "The switch daemons at its ends see the carrier go: the port counts link_down, drops what it "
                    "holds and what is forwarded to it (carrier_drops) until the carrier is back. Same as "
                    "'netstack link LINK down|up'.")
    n.add_argument("link", metavar="LINK", help="a link of the topology (sw1-sw2)")
    n.add_argument("state", choices=["down", "up"], help="down or up")
    n.add_argument("--end", default="both", metavar="A|B|both",
                   help="which end: A (the link's a), B (its b), a node of the link, or both (default)")
    _common(n)
    n.set_defaults(func=cmd_link)

    ps = fsub.add_parser(
        "pause-storm", help="flood a link with PFC pause frames and see the peer's PFC watchdog",
        description="Send 802.1Qbb pause frames (quanta 0xFFFF, CLASS's bit set) out of NODE's end of LINK, "
                    "continuously for --seconds at --pps, from an AF_PACKET socket in NODE's namespace (with the "
                    "software FCS on switch-to-switch links). Then report what the peer switch counted: pauses "
                    "honoured (pauses_rx), refused at an edge port that does not take a host's pauses "
                    "(edge_drops_pfc), released by its PFC watchdog (pfc_watchdog_events) and ignored while it "
                    "recovers (pfc_watchdog_ignored), and how long the class stayed paused. The watchdog is on "
                    "(100 ms) on edge ports and off on fabric ports unless the topology sets pfc_watchdog.")
    ps.add_argument("link", metavar="LINK", help="the link the pauses go over (h1-sw1)")
    ps.add_argument("--from", dest="src", required=True, metavar="NODE", help="the end that sends them (h1)")
    ps.add_argument("--seconds", type=positive_float("the storm length"), default=1.0, metavar="S",
                    help="storm length (default: 1)")
    ps.add_argument("--class", dest="cls", type=int_between(0, 7, "a priority class"), default=0, metavar="C",
                    help="priority class paused, 0-7 (default: 0, where untagged best-effort traffic goes)")
    ps.add_argument("--pps", type=positive_float("the rate"), default=100.0, metavar="N",
                    help="pause frames per second (default: 100, well within a pause's lifetime)")
    _common(ps)
    ps.set_defaults(func=cmd_pause_storm)

    c = fsub.add_parser(
        "clock-jump", help="step the clock of a host's 1Pipe processes",
        description="Make the 1Pipe processes running on HOST ('netstack onepipe run') see their clock jump by X "
                    "ms (negative: backwards), as a PTP or NTP step would. The jump goes to the host's clock file "
                    "<run dir>/onepipe-clock-HOST.json ({\"offset_ns\": sum of the jumps}), which those processes read "
                    "at most 100 ms later and add to the topology's clock_offset and clock_drift_ppm; a new "
                    "'netstack onepipe run' starts from no jump.")
    c.add_argument("host", metavar="HOST", help="a host running 1Pipe processes")
    c.add_argument("--ms", type=finite_float, required=True, metavar="X", help="the step in milliseconds (non-zero)")
    _common(c)
    c.set_defaults(func=cmd_clock_jump)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print what was done (and counted) as JSON")
    acts_on_testbed(p)


def _say(msg: str) -> None:
    print(f"[fault] {msg}", file=sys.stderr, flush=True)


def _run(fn: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    try:
        return dict(fn(*args, say=_say, **kwargs))
    except PermissionError as exc:
        raise CommandError(f"needs root (namespaces, signals to the daemons): {exc}") from None


def cmd_kill(args: argparse.Namespace) -> int:
    from .. import faults
    from ..progress import Reporter

    with Reporter("fault").heartbeat(f"{args.node} down", expect_s=args.down_ms / 1000):
        out = _run(faults.kill, args.prefix, args.node, sig=args.sig, restart=args.restart, down_ms=args.down_ms)
    if args.json:
        print_json(out)
    elif args.sig == "STOP" and "frozen_ms" in out:
        print(f"{out['kind']} daemon {out['daemon']} (pid {out['pid']}) frozen {out['frozen_ms']:g} ms, "
              f"{'resumed' if out['resumed'] else 'gone since'}")
    elif args.sig == "STOP":
        print(f"{out['kind']} daemon {out['daemon']} (pid {out['pid']}) frozen; 'netstack fault start "
              f"{out['daemon']}{_prefix(args)}' resumes it")
    elif out.get("restarted"):
        print(f"{out['kind']} daemon {out['daemon']}: pid {out['pid']} killed (SIG{args.sig}), restarted as pid "
              f"{out['new_pid']} after {out['down_ms']:g} ms down")
    else:
        print(f"{out['kind']} daemon {out['daemon']}: pid {out['pid']} killed (SIG{args.sig}); it stays down "
              f"('netstack fault start {out['daemon']}{_prefix(args)}' starts it again)")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    from .. import faults

    out = _run(faults.start, args.prefix, args.node)
    if args.json:
        print_json(out)
    elif out.get("resumed"):
        print(f"{out['kind']} daemon {out['daemon']} (pid {out['pid']}) resumed")
    else:
        print(f"{out['kind']} daemon {out['daemon']} started again as pid {out['new_pid']}")
    return 0


def cmd_link(args: argparse.Namespace) -> int:
    from .. import faults

    out = _run(faults.set_link, args.prefix, args.link, args.state == "up", end=args.end)
    if args.json:
        print_json(out)
        return 0
    from .link import switch_summary

    oper = ", ".join(f"{k} {v}" for k, v in out["operstate"].items())
    print(f"link {out['link']} {out['state']}: {' and '.join(out['ends'])} set {out['state']} (now {oper})"
          f"{switch_summary(out['switches'])}")
    return 0


def cmd_pause_storm(args: argparse.Namespace) -> int:
    from .. import faults
    from ..progress import Reporter

    rep = Reporter("fault")
    with rep.heartbeat("pause storm", expect_s=args.seconds):
        out = _run(faults.pause_storm, args.prefix, args.link, args.src, seconds=args.seconds, cls=args.cls,
                   pps=args.pps)
    head = (f"{out['frames']} pauses (class {out['class']}) from {out['from']} in {out['seconds']:g} s")
    if args.json:
        print(json.dumps(out, indent=2))
        rep.summary(f"pause-storm: {head}")
        return 0
    if out.get("peer") is None:
        print(f"{head}; {out['to']} is no switch: nothing counted them")
        return 0
    c = out["counted"]
    if not out["honours_pfc"]:
        why = (f"{c['edge_drops_pfc']} at the edge (a host may not pause it)" if out.get("role") == "edge" else
               f"{c['pauses_refused']} (PFC is not enabled for class {out['class']} there: pfc_enable)")
        print(f"{head}: {out['to']} refused {why}, class paused {out['paused_ms']:g} ms")
        return 0
    wd = f"watchdog {out['watchdog_ms']:g} ms" if out["watchdog_ms"] else "no watchdog"
    print(f"{head}: {out['to']} ({wd}) honoured {c['pauses_rx']}, watchdog released the class "
          f"{c['pfc_watchdog_events']} time(s) and ignored {c['pfc_watchdog_ignored']}; class paused "
          f"{out['paused_ms']:g} ms of the storm{', still paused' if out['still_paused'] else ''}")
    return 0


def cmd_clock_jump(args: argparse.Namespace) -> int:
    from .. import faults

    out = _run(faults.clock_jump, args.prefix, args.host, args.ms)
    if args.json:
        print_json(out)
        return 0
    procs = ", ".join(f"{n} (pid {p})" for n, p in out["processes"].items())
    print(f"clock of {out['host']} jumped {out['jump_ns'] / 1e6:+g} ms (now {out['offset_ns'] / 1e6:+g} ms in "
          f"total) for {procs}: {out['file']}")
    return 0


def _prefix(args: argparse.Namespace) -> str:
    return f" --prefix {args.prefix}" if args.prefix != "ns" else ""
