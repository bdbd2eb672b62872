"""``netstack onepipe``: 1Pipe on a running testbed (enable, disable, status), a live run of P
scattering processes (best effort or reliable), killing one of them mid-run, and the checker for
their logs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import CommandError
from .common import acts_on_testbed, add_json, finish, print_json

EPILOG = """\
examples:
  netstack up onepipe                                  2 ToRs, a spine, 4 hosts (docs/onepipe.md)
  netstack onepipe run --procs 8 --seconds 5 --out /tmp/op
  netstack onepipe check /tmp/op/*.jsonl               total order, FIFO, one ts per scattering, causality
  netstack onepipe run --procs 8 --seconds 5 --out /tmp/op --loss tor1-spine1:0.01
  netstack onepipe status                              barriers, inputs, beacons per switch; the controller
  netstack onepipe run --reliable --procs 8 --seconds 5 --out /tmp/opr &
  netstack onepipe kill p3                             SIGKILL one process of the run in progress
  netstack onepipe check /tmp/opr                      ... and atomicity, from the run directory's logs

1Pipe ("1Pipe: Scalable Total Order Communication in Data Center Networks") gives every
scattering one timestamp; switches aggregate barriers with min, and a receiver delivers what
lies below the barrier, so every receiver sees one total order. docs/onepipe.md has the design
as built and the delivery-log format."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..onepipe.params import OnePipeParams

    defaults = OnePipeParams()
    p = sub.add_parser("onepipe", help="1Pipe total-order scatterings: enable, status, run, kill, check",
                       description="1Pipe on the running testbed: processes scatter messages that every receiver "
                                   "delivers in one total order, through barriers the switches aggregate; best "
                                   "effort, or reliable under the controller.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    osub = p.add_subparsers(dest="onepipe_cmd", metavar="ACTION", required=True)
    e = osub.add_parser("enable", help="turn 1Pipe on in every switch (barrier aggregation, beacons)")
    e.add_argument("--t-beacon-ms", type=float, default=defaults.t_beacon_ns / 1e6,
                   help="beacon interval in ms (default %(default)g: the paper's 3 us, 1000x)")
    e.add_argument("--timeout-beacons", type=int, default=defaults.timeout_beacons,
                   help="an input silent for this many beacon intervals leaves the min (default %(default)s)")
    add_json(e, "every switch's directions and the timers")
    e.set_defaults(func=cmd_enable)
    d = osub.add_parser("disable", help="turn 1Pipe off in every switch")
    add_json(d, "which switches had it on")
    d.set_defaults(func=cmd_disable)
    s = osub.add_parser("status", help="every switch's 1Pipe inputs, barriers and beacons; the controller's view")
    s.add_argument("--json", action="store_true",
                   help="as JSON: {switch: its status, ..., \"controller\": the controller's status (if one runs), "
                        "\"run\": the last run's state and counts (if one ran)}")
    s.set_defaults(func=cmd_status)
    r = osub.add_parser("run", help="P processes scatter concurrently for S seconds; each writes DIR/<process>.jsonl")
    r.add_argument("--procs", type=int, required=True, metavar="P", help="how many 1Pipe processes")
    r.add_argument("--seconds", type=float, required=True, metavar="S", help="how long they scatter")
    r.add_argument("--out", required=True, metavar="DIR", help="directory for the logs (created)")
    r.add_argument("--loss", action="append", default=[], metavar="LINK:RATE",
                   help="drop this share of the link's frames, both directions, during the run (repeatable)")
    r.add_argument("--rate", type=float, default=100.0, help="scatterings per second per process (default 100)")
    r.add_argument("--fanout", type=int, default=2, help="destinations per scattering (default 2)")
    r.add_argument("--size", type=int, default=64, help="bytes per message (default 64; >1400 fragments)")
    r.add_argument("--drain", type=float, default=1.0, help="seconds to keep receiving after the last send")
    r.add_argument("--seed", default="1", help="seed of the destinations drawn")
    r.add_argument("--reliable", action="store_true",
                   help="reliable 1Pipe: needs the topology's controller (a node of kind onepipe-controller)")
    r.add_argument("--json", action="store_true", help="print the summary as JSON")
    k = osub.add_parser("kill", help="SIGKILL one process of the run in progress (a crash, for reliable 1Pipe)")
    k.add_argument("proc", metavar="PROC", help="the process: its name (p3) or ip:port")
    add_json(k, "the process killed")
    k.set_defaults(func=cmd_kill)
    from ..onepipe import check

    c = osub.add_parser("check", help=check.CHECK_HELP, description=check.CHECK_DESCRIPTION)
    check.add_check_arguments(c)
    c.set_defaults(func=cmd_check)
    for q in (e, d, s, r, k):
        q.add_argument("--prefix", default="op", help="the running testbed's prefix (default %(default)s)")
    acts_on_testbed(e, d, s, r, k)
    r.set_defaults(func=cmd_run)


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except OSError as exc:  # a daemon's socket gone (the NetstackErrors reach cli.main as they are)
        raise CommandError(str(exc)) from None


def cmd_enable(args: argparse.Namespace) -> int:
    from ..onepipe.control import enable_all
    from ..onepipe.params import OnePipeParams

    params = OnePipeParams.beaconing(round(args.t_beacon_ms * 1e6), args.timeout_beacons)
    done = _call(enable_all, args.prefix, params)
    if args.json:
        print_json({"switches": done, "t_beacon_ns": params.t_beacon_ns, "input_timeout_ns": params.input_timeout_ns,
                    "ack_timeout_ns": params.ack_timeout_ns})
        return 0
    for sw, r in done.items():
        dirs = r["directions"]
        print(f"1Pipe enabled on {sw}: up {', '.join(p for p in sorted(dirs) if dirs[p] == 'up') or '-'}; "
              f"down {', '.join(p for p in sorted(dirs) if dirs[p] == 'down') or '-'}")
    print(f"T_beacon {params.t_beacon_ns / 1e6:g} ms, input timeout {params.input_timeout_ns / 1e6:g} ms")
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    from ..onepipe.control import disable_all

    done = _call(disable_all, args.prefix)
    if args.json:
        print_json({"switches": done})
        return 0
    for sw, was in done.items():
        print(f"{sw}: {'1Pipe disabled' if was else '1Pipe was not enabled'}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from ..onepipe.control import status_all
    from ..onepipe.runner import controller_status, read_procs_file

    st = _call(status_all, args.prefix)
    ctl = _call(controller_status, args.prefix)
    if args.json:
        print(json.dumps({**st, **({"controller": ctl} if ctl is not None else {}), **_run_doc(args.prefix)},
                         indent=2))
        return 0
    if all(v is None for v in st.values()):
        print("1Pipe is not enabled ('netstack onepipe enable')")
    else:
        print_switches(st)
    run = read_procs_file(args.prefix) or {}
    print_run_state(run or None)
    if ctl is not None:
        names = {p["addr"]: n for n, p in run.get("processes", {}).items() if isinstance(p, dict) and "addr" in p}
        print_controller(ctl, names)
    return 0


def _run_doc(prefix: str) -> dict[str, Any]:
    """``{"run": {"state", "out", "processes", "counts"}}`` of the last run, or ``{}``."""
    import time
    from pathlib import Path

    from ..onepipe.accounting import tally
    from ..onepipe.runner import read_procs_file, run_phase

    run = read_procs_file(prefix)
    if run is None:
        return {}
    out = run.get("out")
    counts = tally(Path(out)).totals if out and Path(out).is_dir() else None
    return {"run": {"state": run_phase(run, time.time()), "out": out, "processes": run.get("processes"),
                    "counts": counts}}


def print_run_state(run: dict[str, Any] | None) -> None:
    """The last run under the prefix: its state, and its logs counted as ``run`` and ``check``
    count them (:func:`netstack.onepipe.accounting.tally`)."""
    import time
    from pathlib import Path

    from ..onepipe.accounting import tally
    from ..onepipe.runner import run_phase

    phase = run_phase(run, time.time())
    if run is None:
        print(f"\n1Pipe run: {phase}")
        return
    out = run.get("out")
    counts = _fates(tally(Path(out)).totals) if out and Path(out).is_dir() else "no logs"
    print(f"\n1Pipe run: {phase}, {len(run.get('processes') or {})} processes, logs in {out}: {counts}")


def print_switches(st: dict[str, Any]) -> None:
    from ..bench.common import format_table

    rows = []
    for sw, status in st.items():
        if status is None:
            rows.append([sw, "-", "off", *[""] * (len(STATUS_COLS) - 1)])
            continue
        for port, p in sorted(status.get("ports", {}).items()):
            rows.append([sw, port, *port_row(p)])
    print(format_table(["switch", "port", *STATUS_COLS], rows))
    print("(inputs/live: per process on an edge port, the port on a fabric port; barrier: the lowest any "
          "output of the port carried, in the switch's clock)")
    for sw, status in st.items():
        t = (status or {}).get("timers")
        if t:  # the failure timers in force on a loaded host (docs/onepipe-reliable.md)
            fail = t.get("failure_timeout_ns")
            print(f"{sw}: input timeout {t['input_timeout_ns'] / 1e6:g} ms, failure timeout "
                  f"{'-' if fail is None else f'{fail / 1e6:g} ms'} in force (slack {t['timer_slack_ns'] / 1e6:g} ms)")


def print_controller(ctl: dict[str, Any], names: dict[str, str]) -> None:
    """The controller's view (``status`` of its leader): processes, failures, undeliverable
    recalls. ``names``: ``ip:port`` -> process name of the run in progress."""
    from ..bench.common import format_table

    head = f"\ncontroller {ctl.get('node')} ({ctl.get('addr')})"
    if "error" in ctl:
        print(f"{head}: {ctl['error']}")
        return
    view = ctl.get("view")
    print(f"{head}: {ctl.get('role', '?')}, replica {ctl.get('replica', '?')}, store {ctl.get('store', '?')}")
    force, conf = ctl.get("timers_in_force") or {}, ctl.get("timers") or {}
    if force.get("answer_timeout_ns") is not None:
        print(f"answer timeout {force['answer_timeout_ns'] / 1e6:g} ms in force = configured "
              f"{(conf.get('answer_timeout_ns') or 0) / 1e6:g} + slack {(force.get('timer_slack_ns') or 0) / 1e6:g} ms")
    if not isinstance(view, dict):
        print("no view: this replica does not lead (yet)")
        return

    def who(addr: Any) -> str:
        return f"{addr} ({names[addr]})" if addr in names else str(addr)

    procs = view.get("processes") or []
    print(format_table(["process", "incarnation", "state"],
                       [[who(p.get("addr")), p.get("incarnation"), p.get("state")] for p in procs])
          if procs else "processes: none registered")
    everything = view.get("failures") or []
    # every failure still in progress, and the latest released ones: the view keeps them all
    fails = [f for f in everything if not f.get("released")]
    fails = sorted([*[f for f in everything if f.get("released")][-SHOW_RELEASED:], *fails],
                   key=lambda f: f.get("fid") or 0)
    if fails:
        print(format_table(["failed", "incarnation", "t_f", "fid", "waiting", "released"],
                           [[who(f.get("proc")), f.get("incarnation"), f.get("t_f"), f.get("fid"),
                             ", ".join(who(w) for w in f.get("waiting", [])) or "-", f.get("released")]
                            for f in fails]))
    if len(fails) < len(everything):
        print(f"({len(everything) - len(fails)} older released failures not shown: --json has them all)")
    elif not fails:
        print("failures: none")
    recalls = view.get("recalls") or []
    if recalls:
        print(format_table(["undeliverable recall: sender", "psn", "receiver"],
                           [[who(r.get("sender")), r.get("psn"), who(r.get("receiver"))]
                            for r in recalls[-SHOW_RECALLS:]]))
        if len(recalls) > SHOW_RECALLS:
            print(f"({len(recalls) - SHOW_RECALLS} more undeliverable recalls: --json has them all)")
    else:
        print("undeliverable recalls: none")


#: how many released failures and undeliverable recalls ``status`` prints (the latest)
SHOW_RELEASED = 10
SHOW_RECALLS = 20


STATUS_COLS = ["direction", "inputs", "live", "barrier_ns", "rx", "beacons_rx", "stamped", "beacons_tx", "timeouts",
               "backwards", "late_fwd", "dropped", "auth_refused"]


def port_row(p: dict[str, Any]) -> list[Any]:
    """One port of ``onepipe_status`` as a table row (``STATUS_COLS``)."""
    c = p.get("counters", {})
    ins = p.get("inputs", {}).values()
    barriers = [o["barrier"] for o in p.get("outputs", {}).values() if o.get("barrier") is not None]
    dropped = sum(c.get(k, 0) for k in ("malformed", "unroutable", "valley", "table_full", "beacon_drops"))
    return [p.get("direction", ""), len(ins), sum(1 for i in ins if i.get("live")), min(barriers) if barriers else "-",
            c.get("rx", 0), c.get("beacons_rx", 0), c.get("stamped", 0), c.get("beacons_tx", 0),
            sum(i.get("timeouts", 0) for i in ins), c.get("barrier_backwards", 0), c.get("late_forwarded", 0), dropped,
            _auth_refused(p.get("auth"))]


def _auth_refused(auth: dict[str, int] | None) -> Any:
    """Frames from the port the keys refused (docs/onepipe.md "Authenticated beacons and
    barriers"), per reason when any: ``3 (forged 2, replayed 1)``; ``-`` without keys."""
    if auth is None:
        return "-"
    from ..onepipe.auth import REASONS

    why = {r: auth.get(r, 0) for r in REASONS if auth.get(r, 0)}
    total = sum(why.values())
    return f"{total} ({', '.join(f'{r} {n}' for r, n in why.items())})" if total else 0


def cmd_run(args: argparse.Namespace) -> int:
    import sys

    from ..onepipe.runner import run

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    from ..progress import Reporter

    if args.seconds <= 0 or args.rate <= 0 or args.fanout < 1 or args.size < 8 or args.drain < 0:
        raise CommandError("--seconds and --rate must be positive, --fanout at least 1, --size at least 8 bytes")
    rep = Reporter("onepipe run")
    # the processes scatter, then drain, without a word in between: the heartbeat says it runs
    with rep.heartbeat(f"{args.procs} processes running", expect_s=args.seconds + args.drain):
        out = _call(run, args.prefix, procs=args.procs, seconds=args.seconds, out=args.out, loss=args.loss,
                    rate=args.rate, fanout=args.fanout, size=args.size, drain=args.drain, seed=args.seed,
                    reliable=args.reliable, say=say)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print_run(out)
    rep.summary(run_summary(out, args, rep.took()))
    return finish(out)


def run_summary(out: dict[str, Any], args: argparse.Namespace, took: str) -> str:
    """``netstack onepipe run``'s closing line: the run, how long, the totals, where the logs are."""
    killed = out.get("killed") or []
    return (f"{args.procs} {'reliable ' if args.reliable else ''}processes scattered for {args.seconds:g} s, "
            f"{took} in all: {_fates(out)}"
            + (f", {len(killed)} killed" if killed else "") + f"; logs in {out.get('out')}")


def _fates(c: dict[str, Any]) -> str:
    """The accounting identity in words (issue 31): sent = the four fates; unaccounted apart."""
    return (f"{c.get('messages_sent')} messages sent = {c.get('delivered')} delivered + {c.get('send_failed')} "
            f"send-failed + {c.get('send_unknown')} send-unknown + {c.get('in_flight_at_end')} in flight at the end "
            f"({c.get('unaccounted')} unaccounted)")


def print_run(out: dict[str, Any]) -> None:
    """``netstack onepipe run``'s summary as a table per process, then the totals."""
    from ..bench.common import format_table

    reliable = out.get("reliable", False)
    extra = ["retransmits", "proc_fail", "incarnation"] if reliable else []
    rows = []
    killed = out.get("killed", [])
    for p in sorted({*out["processes"], *killed}, key=lambda x: int(x[1:]) if x[1:].isdigit() else 0):
        s = out["processes"].get(p) or {}
        c = s.get("counters") or {}
        gone = "killed" if p in killed else ""
        rows.append([p + (" (killed)" if gone else ""), s.get("messages_sent", ""), s.get("delivered", ""),
                     s.get("send_failed", ""), s.get("send_unknown", ""), s.get("in_flight_at_end", ""),
                     s.get("received", ""), c.get("late_dropped", gone), c.get("beacons_sent", ""),
                     *([c.get("retransmits", ""), s.get("proc_failed", ""), s.get("incarnation", "")] if reliable
                       else [])])
    print(format_table(["process", "sent", "delivered", "send_failed", "send_unknown", "in_flight", "received",
                        "late_dropped", "beacons", *extra], rows))
    print("(sent .. in_flight: the process's messages by their fate, delivered as the receivers logged them; "
          "received: what it delivered itself)")
    print(_fates(out) + (f"; killed: {', '.join(killed)}" if killed else "") + f"; logs in {out['out']}")
    what = "the order and atomicity" if reliable else "the order"
    print(f"check {what}: netstack onepipe check {out['out']}" + (" --allow-empty" if killed else ""))
    if "checks" in out:
        from ..onepipe.verdict import verdict_line

        print(verdict_line(out))  # netstack.validity: did the run happen as planned


def cmd_kill(args: argparse.Namespace) -> int:
    from ..onepipe.runner import kill

    got = _call(kill, args.prefix, args.proc)
    if args.json:
        print_json(got)
        return 0
    print(f"killed pid {got['pid']} of {got['name']} on {got['host']} ({got['addr']}) with SIGKILL; "
          f"the run is {got['state']}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from ..onepipe.check import run_check

    return run_check(args)
