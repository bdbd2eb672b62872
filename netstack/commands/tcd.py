"""``netstack tcd``: TCD (or the classic ECN baseline) on a running switch port, and its state.

The group is built by :func:`register`; each action is a builder ``(actions) -> None`` in
:data:`SUBCOMMANDS`, so more actions (``run``, ``send``, ``recv``: the host side) are added by
appending a builder there (see :func:`add_run_parser`), without touching the others.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable
from typing import Any

from ..argtypes import delay_ns, int_list, size_bytes
from ..errors import CommandError
from .common import acts_on_testbed, add_json, add_mode, finish, print_json

DEFAULT_PREFIX = "ns"

EPILOG = """\
examples:
  netstack tcd enable sw2 p-sw3                     TCD on sw2's port toward sw3 (derived settings)
  netstack tcd enable sw2 p-sw3 --t-on-max 50ms --k 40KB
  netstack tcd enable sw2 p-sw3 --marker ecn --ecn-k 200KB   the classic baseline (TCD §3.1)
  netstack tcd status                                  every marked port: state, time in each state, marks
  netstack tcd disable sw2 p-sw3

TCD ("Congestion Detection in Lossless Networks") labels each switch egress port congestion,
non-congestion or undetermined (PFC switches it ON and OFF) and writes the label into the IP ECN
field of ECN-capable packets: undetermined raises ECT(0) to ECT(1) ("UE"), congestion sets CE;
a mark is never lowered. Settings not given are derived from the port's rate and delay and the
PFC thresholds that pause it."""


def _add_prefix(p: argparse.ArgumentParser) -> None:
    p.add_argument("--prefix", default=DEFAULT_PREFIX, help="the running testbed's prefix (default %(default)s)")
    acts_on_testbed(p)


def add_enable_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    e = actions.add_parser("enable", help="put a TCD (or ECN) marker on a switch port's egress",
                           description="Install a marker on NODE's PORT. Settings not given are derived: "
                                       "T_on^max = (XOFF-XON)·8/(C-r_min) + 2·(delay + one MTU time), K = the "
                                       "one-hop BDP + (XOFF-XON), W = T_on^max; XOFF/XON are the peer's (from the "
                                       "topology), else the port's own.")
    e.add_argument("node", help="switch node, e.g. sw2")
    e.add_argument("port", help="its port (interface name), e.g. p-sw3")
    e.add_argument("--marker", choices=["tcd", "ecn"], default="tcd",
                   help="tcd: the ternary detector; ecn: CE above a queue threshold, the baseline (default tcd)")
    e.add_argument("--t-on-max", type=delay_ns, metavar="TIME", help="T_on^max, e.g. 50ms (default: derived)")
    e.add_argument("--k", type=size_bytes, metavar="SIZE", help="queue threshold K, e.g. 40KB (default: derived)")
    e.add_argument("--window", type=delay_ns, metavar="TIME", help="queue-trend window W (default: T_on^max)")
    e.add_argument("--min-off", type=delay_ns, metavar="TIME",
                   help="a pause shorter than this is no OFF period for the detector (default: one MTU time "
                        "at the port's rate; 0: every pause counts)")
    e.add_argument("--r-min", type=float, metavar="FRACTION",
                   help="slowest drain still counted as throttled, a fraction of the rate (default 0.9)")
    e.add_argument("--xoff", type=size_bytes, metavar="SIZE", help="the XOFF that pauses this port (default: topology)")
    e.add_argument("--xon", type=size_bytes, metavar="SIZE", help="the XON that resumes it (default: topology)")
    e.add_argument("--classes", type=int_list("classes", "0 or 0,3"), metavar="LIST",
                   help="lossless classes to detect on, e.g. 0,3 (default: every class)")
    e.add_argument("--ce-rule", choices=["tcd", "ecn"],
                   help="what marks CE under --marker tcd: TCD's congestion state (tcd, default) or the ECN "
                        "settings below (ecn: TCD then changes only paused ports' marks, to UE)")
    e.add_argument("--ecn-mode", choices=["threshold", "red"], help="ECN baseline: one threshold, or DCQCN's RED")
    e.add_argument("--ecn-k", type=size_bytes, metavar="SIZE", help="ECN threshold (default: the derived K)")
    e.add_argument("--ecn-kmin", type=size_bytes, metavar="SIZE", help="RED Kmin (default 5KB)")
    e.add_argument("--ecn-kmax", type=size_bytes, metavar="SIZE", help="RED Kmax (default 200KB)")
    e.add_argument("--ecn-pmax", type=float, metavar="P", help="RED Pmax (default 0.01)")
    _add_prefix(e)
    add_json(e, "the marker installed and its settings")
    e.set_defaults(func=cmd_enable)


def add_disable_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    d = actions.add_parser("disable", help="remove a port's marker")
    d.add_argument("node")
    d.add_argument("port")
    _add_prefix(d)
    add_json(d, "the marker removed")
    d.set_defaults(func=cmd_disable)


def add_status_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = actions.add_parser("status", help="every marked port: state, time in each state, UE/CE marks")
    s.add_argument("--json", action="store_true", help="every switch's tcd_status as JSON")
    s.add_argument("--timeline", action="store_true", help="with --json: each class's state changes")
    _add_prefix(s)
    s.set_defaults(func=cmd_status)


def add_run_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = actions.add_parser(
        "run", help="run TCD §3.1's single or multiple congestion point scenario, ECN or TCD marking",
        description="Bring the scenario's topology up (tcd-single or tcd-multi: 4 switches, 20 hosts), start the "
                    "receivers, the long flows F0-F2 and the 15 burst senders A0-A14 as real processes on real "
                    "sockets, read every port's TCD state, tear it down, and report per flow the packets received "
                    "and CE- and undetermined-marked, and per port P0-P3 the time in each state. --mode sim "
                    "runs the same topology and workload in virtual time instead (seconds, no root needed).",
        epilog="the JSON (--json) is {\"flows\": {\"F0\": {\"ce\": n, \"undetermined\": n, \"packets\": n, ...}, "
               "...}, \"ports\": {\"P0\": {\"state\", \"time_in_state_ns\": {...}, \"marked_ce\", "
               "\"marked_ue\", ...}, ...}, ...} (docs/tcd.md \"Running the scenarios\")")
    r.add_argument("scenario", choices=["single", "multi"],
                   help="single: P3 is the only congestion point (F0, F2 at 5 Gbit/s scaled); multi: P2 too "
                        "(F0, F2 at 25 Gbit/s scaled)")
    r.add_argument("--marker", choices=["ecn", "tcd"], default="tcd",
                   help="the switches' marking: tcd (the ternary detector) or ecn (CE above 200KB, the baseline); "
                        "default tcd")
    add_mode(r, "live", "live: namespaces and real processes (root; default); sim: netstack/sim in virtual time")
    r.add_argument("--topology", default=None, metavar="FILE",
                   help="another topology file shaped like the shipped tcd-single/tcd-multi (default: those)")
    r.add_argument("--f1", choices=["fixed", "dcqcn"], default="fixed",
                   help="F1's rate: fixed at 12 Gbit/s scaled, below the 15 the paper observes, or DCQCN's (default "
                        "fixed; ECN's mis-marking of F0 needs it fixed: docs/tcd.md)")
    r.add_argument("--timeline", action="store_true", help="add each port's state changes to the JSON")
    r.add_argument("--prefix", default=None, help="namespace prefix for the live run (default: a fresh one)")
    r.add_argument("--json", action="store_true", help="print the result as one JSON object")
    r.set_defaults(func=cmd_run)


def add_send_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..tcd.live import add_send_arguments

    p = actions.add_parser("send", help="a paced flow (DCQCN or TIMELY, +TCD, or fixed rate) on this host's real "
                                        "socket",
                           description="One TCD data flow over UDP 40300 with ECT(0), paced by DCQCN or TIMELY "
                                       "(--cc; +TCD) or at a fixed rate, holding while PFC pauses the host. Run it "
                                       "in a host's "
                                       "namespace (netstack exec). Last stdout line: one JSON report; progress "
                                       "and a one-line summary on stderr.")
    add_send_arguments(p)
    p.set_defaults(func=cmd_send)


def add_recv_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from ..tcd.live import add_recv_arguments

    p = actions.add_parser("recv", help="receive TCD flows, count ECN/TCD marks, send CNPs (the DCQCN NP)",
                           description="Receive TCD data flows on UDP 40300, read each packet's ECN bits, and send "
                                       "CNPs as a DCQCN notification point does (CNP-UE too, with --tcd). Last "
                                       "stdout line: one JSON report per flow; progress and a one-line summary "
                                       "on stderr.")
    add_recv_arguments(p)
    p.set_defaults(func=cmd_recv)


FCT_EPILOG = """\
examples:
  netstack tcd fct --topology tcd-leafspine --workload websearch --load 0.6 --seeds 1-4 --cc dcqcn --json
  netstack tcd fct --workload hadoop --load 0.6 --seeds 1-8 --cc timely
  netstack tcd fct --flows 40 --seeds 1-2 --incast bursts --incast-load 0.9

Each seed draws one workload (the background flows, the incast's senders); both arms run it in
virtual time on the same topology: base (marker ecn, the cc without TCD) and tcd (marker tcd, the
cc's TCD mode). On tcd-leafspine both mark CE by DCQCN's RED (Kmin 5 KB, Kmax 200 KB, Pmax 1 %)
at ports that are not paused; TCD adds UE at paused ones. Classes: contributor (to the incast
receiver), victim (shares a link with the incast before the congested port), other; buckets:
small (< 100 KB), large (> 1 MB). ratio = base slowdown / tcd slowdown (> 1: TCD helps); ci95: a
paired percentile bootstrap over seeds. The JSON (--json) is {"arms": {"base": {"marking", "fct",
...}, "tcd": {...}}, "ratio": {"all": {"median", "p99"}, "victim": ..., "small": ..., "large":
..., ...}, "ci95": {...}, "flows": n, "seeds": [...], "setup": {...}} (docs/tcd.md "FCT on a
leaf-spine fabric"). About a minute of wall time per run of 300 full-size websearch flows, or of 3000
fb-hadoop flows."""


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be 1 or more")
    return value


def add_fct_parser(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = actions.add_parser(
        "fct", help="FCT slowdown with and without TCD on a leaf-spine fabric (virtual time, both arms, seeds)",
        description="TCD's FCT comparison (\"Congestion Detection in Lossless Networks\": 3.3x median, 2.0x p99): "
                    "Poisson flows at a load of the hosts' links plus an incast to one host, run with the congestion "
                    "control alone and with TCD, on the same flows, for every seed; median and p99 slowdown per "
                    "class (contributor, victim, other) and size bucket, and their ratios with 95 % intervals.",
        epilog=FCT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topology", default="tcd-leafspine", metavar="NAME|FILE",
                   help="a shipped topology or a file whose switch ports carry a tcd marker (default %(default)s)")
    p.add_argument("--workload", choices=["websearch", "hadoop"], default="websearch",
                   help="flow sizes: websearch (DCTCP's) or hadoop (Facebook's), full size (default %(default)s)")
    p.add_argument("--load", type=_fraction, default=0.6, metavar="L",
                   help="the background flows offer L x each host's link, 0 < L <= 1 (default %(default)s)")
    p.add_argument("--seeds", default="1-4", metavar="A-B|A,B,...",
                   help="one workload per seed, both arms each (default %(default)s)")
    p.add_argument("--cc", choices=["dcqcn", "timely"], default="dcqcn",
                   help="the congestion control, without TCD (base) and with it (tcd) (default %(default)s)")
    p.add_argument("--flows", type=_positive_int, default=None, metavar="N",
                   help="background flows per seed (default 300 websearch, 3000 hadoop: about the same bytes and "
                        "arrival window)")
    p.add_argument("--workers", type=_positive_int, default=None, metavar="N",
                   help="runs in parallel (processes; default min(2, cores))")
    p.add_argument("--incast", choices=["persistent", "bursts", "none"], default="persistent",
                   help="persistent: the incast senders send at line rate, held only by PFC, while flows arrive; "
                        "bursts: --incast-bytes each at once, offering --incast-load of the receiver's link; "
                        "none (default %(default)s)")
    p.add_argument("--incast-senders", type=int, default=6, metavar="N",
                   help="incast senders, drawn per seed from the hosts off the receiver's leaf (default %(default)s)")
    p.add_argument("--incast-receiver", default="", metavar="HOST",
                   help="the incast's receiver (default: the first host of the first leaf, h0)")
    p.add_argument("--incast-load", type=_fraction, default=0.9, metavar="F",
                   help="with --incast bursts: their average load on the receiver's link (default %(default)s)")
    p.add_argument("--incast-bytes", type=size_bytes, default=64 * 1024, metavar="SIZE",
                   help="with --incast bursts: bytes per sender and burst (default 64KiB, TCD §3.1's)")
    p.add_argument("--size-scale", type=_fraction, default=1.0, metavar="F",
                   help="flow sizes x F (default 1: full size)")
    p.add_argument("--ce-rule", choices=["ecn", "tcd"], default=None,
                   help="the tcd arm's CE rule at ports that are not paused: as the topology says (tcd-leafspine: "
                        "ecn, the base arm's RED: like for like), or tcd (TCD's own congestion state: K and the "
                        "queue trend; not like for like, a diagnostic)")
    p.add_argument("--flow-list", action="store_true",
                   help="with --json: every flow's seed, class, bucket, size and slowdown under arms.<arm>.flows")
    add_json(p, "the comparison")
    p.set_defaults(func=cmd_fct)


#: the actions of ``netstack tcd``, in the order ``--help`` lists them
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = [
    add_enable_parser, add_disable_parser, add_status_parser, add_run_parser, add_fct_parser, add_send_parser,
    add_recv_parser,
]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("tcd", help="TCD congestion detection: enable, disable, status, run a scenario, FCT "
                                   "comparison, send, recv",
                       description="Ternary congestion detection (TCD) at switch egress ports under PFC, or "
                                   "the classic ECN threshold as a baseline.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = p.add_subparsers(dest="tcd_cmd", metavar="ACTION", required=True)
    for build in SUBCOMMANDS:
        build(actions)


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except OSError as exc:  # a daemon's socket gone (the NetstackErrors reach cli.main as they are)
        raise CommandError(str(exc)) from None


def cmd_enable(args: argparse.Namespace) -> int:
    from ..tcd.control import enable

    overrides = {"t_on_max_ns": args.t_on_max, "k_bytes": args.k, "window_ns": args.window,
                 "min_off_ns": args.min_off, "r_min_fraction": args.r_min, "xoff_bytes": args.xoff,
                 "xon_bytes": args.xon,
                 "classes": args.classes, "ce_rule": args.ce_rule, "ecn_mode": args.ecn_mode,
                 "ecn_k_bytes": args.ecn_k, "ecn_kmin_bytes": args.ecn_kmin, "ecn_kmax_bytes": args.ecn_kmax,
                 "ecn_pmax": args.ecn_pmax}
    out = _call(enable, args.prefix, args.node, args.port, args.marker,
                {k: v for k, v in overrides.items() if v is not None})
    if args.json:
        print_json(out)
        return 0
    print(f"{args.marker.upper()} marking on {args.node}/{out['port']}: {_describe(out)}")
    return 0


def _describe(out: dict[str, Any]) -> str:
    p = out.get("params") or {}
    if out.get("marker") == "ecn":
        if p.get("mode") == "red":
            return f"RED Kmin {p['kmin_bytes']} B, Kmax {p['kmax_bytes']} B, Pmax {p['pmax']:g}"
        return f"CE above {p.get('k_bytes')} B"
    src = (p.get("derived") or {}).get("inputs", {})
    ce = ""
    if out.get("ce_rule") == "ecn":
        ce = "; CE by the ECN rule: " + _describe({"marker": "ecn", "params": out.get("ecn") or {}})
    return (f"T_on^max {p.get('t_on_max_ns', 0) / 1e6:g} ms, K {p.get('k_bytes')} B, "
            f"W {p.get('window_ns', 0) / 1e6:g} ms (XOFF/XON {src.get('xoff_bytes')}/{src.get('xon_bytes')} B){ce}")


def cmd_disable(args: argparse.Namespace) -> int:
    from ..tcd.control import disable

    out = _call(disable, args.prefix, args.node, args.port)
    if args.json:
        print_json(out)
        return 0
    if out.get("marker") is None:
        print(f"{args.node}/{args.port} had no marker")
    else:
        print(f"{str(out['marker']).upper()} marking removed from {args.node}/{args.port}")
    return 0


COLUMNS = ["node", "port", "marker", "state", "t_noncon_ms", "t_undet_ms", "t_cong_ms", "marked_ue", "marked_ce",
           "ecn_would_mark"]


def status_rows(out: dict[str, Any]) -> list[list[Any]]:
    """The status table's rows from :func:`netstack.tcd.control.status`'s answer."""
    rows: list[list[Any]] = []
    for node, st in sorted(out.items()):
        if "error" in st:
            rows.append([node, "-", "error", st["error"], "", "", "", "", "", ""])
            continue
        for port, p in sorted((st.get("ports") or {}).items()):
            s = p.get("summary") or {}
            c = s.get("counters") or {}
            ce = c.get("marked_ce", c.get("marked", ""))
            rows.append([node, port, s.get("marker", ""), s.get("state") or "-", c.get("t_noncon_ms", ""),
                         c.get("t_undet_ms", ""), c.get("t_cong_ms", ""), c.get("marked_ue", ""), ce,
                         c.get("ecn_would_mark", "")])
    return rows


def cmd_status(args: argparse.Namespace) -> int:
    from ..bench.common import format_table
    from ..tcd.control import status

    out = _call(status, args.prefix, timeline=args.timeline)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    rows = status_rows(out)
    if not rows:
        print("no TCD or ECN marker on any switch port ('netstack tcd enable NODE PORT')")
        return 0
    print(format_table(COLUMNS, rows))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import sys

    from ..progress import Reporter
    from ..sim.scenario import RunSpec, ScenarioError, run
    from ..tcd.scenarios import load_doc

    rep = Reporter("tcd run")
    spec = args.topology or f"tcd-{args.scenario}"
    try:
        topology = load_doc(spec, args.marker)
        # a live run waits seconds on its senders without a word: the heartbeat says it is alive
        with rep.heartbeat(f"{args.scenario}/{args.marker} ({args.mode})") if args.mode == "live" \
                else contextlib.nullcontext():
            res = run(RunSpec("tcd", topology=topology,  # type: ignore[arg-type]  # resolve_topology takes it
                              params={"kind": args.scenario, "timeline": args.timeline, "f1": args.f1},
                              runtime=args.mode, prefix=args.prefix),
                      progress=lambda msg: print(msg, file=sys.stderr, flush=True))
    except (ScenarioError, OSError) as exc:  # (ScenarioError is no NetstackError: netstack.sim's own)
        raise CommandError(str(exc)) from None
    from ..tcd.verdict import verdict_line

    # the verdict (netstack.validity) sits at the run document's top: the printed result carries it
    result = {**res["result"], "valid": res.get("valid", True), "checks": res.get("checks", [])}
    if args.json:
        print(json.dumps(result))
    else:
        print_result(result)
        print(verdict_line(result))
    rep.summary(run_summary(result, args.mode, rep.took()))
    return finish(res, 0, result)


def run_summary(result: dict[str, Any], runtime: str, took: str) -> str:
    """``netstack tcd run``'s closing line: the scenario, how long, the marks and the ports that
    ended in congestion."""
    flows = result.get("flows") or {}
    packets = sum(int(f.get("packets") or 0) for f in flows.values())
    ce = sum(int(f.get("ce") or 0) for f in flows.values())
    ue = sum(int(f.get("undetermined") or 0) for f in flows.values())
    congested = [n for n, p in (result.get("ports") or {}).items() if p.get("state") == "congestion"]
    return (f"{result.get('scenario')} congestion point, marker {result.get('marker')} ({runtime}) in {took}: "
            f"{len(flows)} flows, {packets} packets received, {ce} CE and {ue} undetermined marks; ports in "
            f"congestion at the end: {', '.join(congested) or 'none'}")


def print_result(result: dict[str, Any]) -> None:
    """The two tables of ``netstack tcd run``: marks per flow, state times per port."""
    from ..bench.common import format_table

    print(f"TCD §3.1 {result['scenario']} congestion point scenario, marker {result['marker']}, "
          f"scale {result['scale']:g}x (times x{result['scale']:g}, rates /{result['scale']:g})")
    rows = [[name, f["src"], f["dst"], f["kind"], f["sent"], f["packets"], f["ce"], f["undetermined"]]
            for name, f in result["flows"].items()]
    print(format_table(["flow", "src", "dst", "kind", "sent", "received", "CE", "undetermined"], rows))
    prow = []
    for name, p in result["ports"].items():
        t = p.get("time_in_state_ns") or {}
        prow.append([name, f"{p['node']}/{p['port']}", p.get("state") or "-",
                     *(f"{t[s] / 1e6:.0f}" if s in t else "-" for s in ("non_congestion", "undetermined",
                                                                         "congestion")),
                     p.get("pauses", ""), p["marked_ue"], p["marked_ce"]])
    print(format_table(["port", "where", "state at end", "non-cong ms", "undet ms", "cong ms", "pauses",
                        "UE marks", "CE marks"], prow))


def cmd_fct(args: argparse.Namespace) -> int:
    from ..progress import Reporter
    from ..tcd.compare import DEFAULT_FLOWS, CompareError, FctCompare, run_compare, table
    from .sim import parse_seeds

    rep = Reporter("tcd fct")
    params = {"incast": args.incast, "incast_senders": args.incast_senders, "incast_receiver": args.incast_receiver,
              "incast_load": args.incast_load, "incast_bytes": args.incast_bytes, "size_scale": args.size_scale}
    flows = args.flows or DEFAULT_FLOWS[args.workload]
    cmp = FctCompare(args.topology, args.workload, args.load, args.cc, tuple(parse_seeds(args.seeds)), flows,
                     tuple(params.items()), args.ce_rule)
    rep(f"{len(cmp.seeds)} seed(s) x 2 arms of {flows} {args.workload} flows at load {args.load:g} on "
        f"{args.topology}, {args.cc}, incast {args.incast}")
    try:
        with rep.heartbeat("runs", every_s=30):
            out = run_compare(cmp, workers=args.workers, progress=rep, flow_list=args.flow_list)
    except CompareError as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print_json(out)
    else:
        print(table(out))
    r = out["ratio"]
    rep.summary(f"{out['flows']} flows x 2 arms in {rep.took()}: {args.cc} / {args.cc}+TCD median "
                f"{_x(r['all']['median'])}, p99 {_x(r['all']['p99'])}; victims {_x(r['victim']['median'])}, "
                f"{_x(r['victim']['p99'])} (the paper: 3.3x, 2.0x)")
    return 0


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def cmd_send(args: argparse.Namespace) -> int:
    return _host_tool("send", args)


def cmd_recv(args: argparse.Namespace) -> int:
    return _host_tool("recv", args)


def _host_tool(which: str, args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..progress import Reporter
    from ..tcd.live import run_recv, run_send

    rep = Reporter(f"tcd {which}")
    try:
        out = run_send(args) if which == "send" else run_recv(args)
    except (ConfigError, OSError) as exc:  # a DCQCN or TIMELY setting, a --cc / --mode mismatch; the socket
        raise CommandError(f"tcd {which}: {exc}") from None
    print(json.dumps(out))  # the last stdout line stays the JSON report; the summary goes to stderr
    rep.summary(end_summary(out))
    return finish(out)


def end_summary(out: dict[str, Any]) -> str:
    """One line for ``tcd send`` / ``tcd recv``'s JSON report: what moved, how long, the marks."""
    c = out.get("counters") or {}
    cnps = f"CNPs {c.get('cnps_ce', 0)} CE / {c.get('cnps_ue', 0)} UE"
    secs = float(out.get("seconds") or 0.0)
    if out.get("tool") == "tcd-send":
        return (f"flow {out.get('flow')} ({out.get('mode')}) to {out.get('dst')}: {int(out.get('bytes') or 0):,} B in "
                f"{secs:.3f} s, {float(out.get('rate_bps_avg') or 0) / 1e6:.3f} Mbit/s on average, {cnps} received, "
                f"{'done' if out.get('done') else 'NOT done'}")
    flows = out.get("flows") or {}
    complete = sum(1 for f in flows.values() if f.get("complete"))
    return (f"{len(flows)} flow(s) ({complete} complete), {c.get('datagrams', 0)} packets in {secs:.1f} s, "
            f"{cnps} sent")
