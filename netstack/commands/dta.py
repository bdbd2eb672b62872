"""``netstack dta``: Direct Telemetry Access on the running testbed — translator, reports, queries."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..argtypes import uint32
from ..errors import CommandError
from .common import acts_on_testbed, add_json, finish, print_json

DESCRIPTION = """\
Direct Telemetry Access (DTA paper). Reporters send small UDP reports (port 40040) towards the
collector; the collector's ToR switch (the translator) turns each report into RoCEv2 RDMA
operations (WRITE, FETCH_ADD) on memory regions the collector registered, so the collector's
CPU does no per-report work. Here the collector daemon (in the collector's namespace, started
by 'netstack up') is a userspace RoCEv2 responder over shared-memory files in /dev/shm, and
the translator runs inside the ToR's switch daemon once enabled.

Primitives: Key-Write (key -> value, N redundant slots), Append (ring-buffer lists, B entries
per WRITE), Key-Increment (N Fetch&Adds, count-min on query), Sketch-Merge (per-reporter
sketch columns merged at the translator, NACK + retransmission on a gap)."""

EPILOG = """\
examples:
  netstack up
  netstack dta enable                                   translator on c1's ToR (sw2)
  netstack dta report keywrite 42 7 --from h1           key 42 := 7 (2 copies)
  netstack dta report append 4 100 --count 10 --from h2 values 100..109 onto list 4 (B = 4)
  netstack dta report increment 7 --count 100 --from h1
  netstack dta report sketch --reporter-id 1 --random 1000 --from h1
  netstack dta report sketch --reporter-id 2 --random 1000 --seed 2 --from h2
  netstack dta query keywrite 42
  netstack dta query append 4 --last 5
  netstack dta query counter 7
  netstack dta query sketch 1 17
  netstack dta status
  netstack dta disable

docs/dta.md has the design, the memory layouts and the measured numbers."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dta", help="DTA telemetry: translator on the collector's ToR, reports, queries",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = p.add_subparsers(dest="dta_cmd", metavar="ACTION", required=True)
    _register_enable(dsub)
    _register_disable_status(dsub)
    _register_report(dsub)
    _register_query(dsub)


def _register_enable(dsub: argparse._SubParsersAction) -> None:
    e = dsub.add_parser("enable", help="start the translator on the collector's ToR switch",
                        description="Fetch the collector daemon's connect_info (QPN, rkey, base address, size and "
                                    "next PSN of every region: the stand-in for RDMA_CM) and start the "
                                    "translator in the switch daemon, on the port facing the collector. Enabling "
                                    "again replaces the translator (a fresh one, in sequence with the collector's "
                                    "queue pairs; Append heads restart at 0).")
    _common(e, collector=True)
    g = e.add_mutually_exclusive_group()
    g.add_argument("--grace", type=int, metavar="REPORTS",
                   help="grace period after a PSN resync, in reports dropped (default: 1000; the public code's "
                        "100,000 is for Tofino rates)")
    g.add_argument("--grace-ms", type=float, help="grace period as a time instead of a report count")
    f = e.add_mutually_exclusive_group()
    f.add_argument("--append-flush-ms", type=float, default=None,
                   help="write an idle, partly filled Append batch after this long (default: 1 ms)")
    f.add_argument("--no-append-flush", action="store_true",
                   help="never flush idle Append batches (the public translator's behaviour)")
    e.add_argument("--max-redundancy", type=int, help="cap on N for Key-Write / Key-Increment reports")
    e.add_argument("--ack-every", type=int, help="set AckReq on every n-th request of a QP (default: never)")
    w = e.add_mutually_exclusive_group()
    w.add_argument("--nak-window-ms", type=float, default=None,
                   help="with no ACK moving a QP's window, believe a PSN-sequence NAK only for a PSN sent in the "
                        "last this many ms (default: 10000; docs/security.md, DTA finding 1)")
    w.add_argument("--no-nak-window-time", action="store_true",
                   help="no time bound on believed NAKs (only the unacknowledged PSNs and 2^23)")
    e.add_argument("--nak-window-slack", type=int, default=None, metavar="PSNS",
                   help="requests lost in a row that the time window still covers (default: 1024)")
    e.add_argument("--window", type=int, default=None, metavar="REQUESTS",
                   help="at most this many un-acknowledged requests per queue pair; a report that would exceed "
                        "it is dropped before it becomes a request (default: 1536; 0 = no window, the old behaviour)")
    e.add_argument("--window-timeout-ms", type=float, default=None, metavar="MS",
                   help="a full window with no ACK progress for this long goes back to its oldest "
                        "un-acknowledged PSN (default: 50)")
    e.add_argument("--no-seq-tracking", action="store_true",
                   help="do not NACK gaps in retransmittable reports' sequence numbers")
    e.add_argument("--cls", type=int, default=0, help="egress class of the RoCEv2 frames (default: 0)")
    e.add_argument("--postcard-flush-ms", type=float, default=None, metavar="MS",
                   help="Postcarding: write a flow whose path has not fully reported after this long (default: 5)")
    e.add_argument("--postcards", default=None, metavar="SW,SW...",
                   help="Postcarding: these switches, in path order (hop 1 first), postcard every flow they "
                        "forward (its 5-tuple's key, their hop number and switch id) to the collector")
    e.add_argument("--postcard-interval-ms", type=float, default=None, metavar="MS",
                   help="with --postcards: at most one postcard per flow and switch this often (default: 100)")
    add_json(e, "the translator's settings and the collector's regions")
    e.set_defaults(func=cmd_enable)


def _register_disable_status(dsub: argparse._SubParsersAction) -> None:
    d = dsub.add_parser("disable", help="stop the translator (reports are then forwarded like any frame)")
    _common(d, collector=True)
    add_json(d, "the translator's last counters")
    d.set_defaults(func=cmd_disable)

    s = dsub.add_parser("status", help="translator and collector counters",
                        description="Translator: reports per primitive, RDMA operations generated, NACKs, "
                                    "resyncs, grace-period drops. Collector: per queue pair, requests executed, "
                                    "ACK/NAKs, ICRC errors, duplicates.")
    _common(s, collector=True)
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_status)


def _register_report(dsub: argparse._SubParsersAction) -> None:
    r = dsub.add_parser("report", help="send reports from a host (real UDP datagrams to the collector)",
                        description="Run the reporter tool inside a host's namespace: real UDP datagrams to the "
                                    "collector's IP, port 40040, from source port 40041. The translator on the "
                                    "collector's ToR must be enabled ('netstack dta enable').")
    rsub = r.add_subparsers(dest="kind", metavar="PRIMITIVE", required=True)
    kw = rsub.add_parser("keywrite", help="KEY VALUE: Key-Write (report i writes KEY+i := VALUE+i)")
    kw.add_argument("key", type=uint32)
    kw.add_argument("value", type=uint32)
    kw.add_argument("--redundancy", type=int, default=2, help="N slots per key (default: %(default)s)")
    ap = rsub.add_parser("append", help="LIST VALUE: Append (report i appends VALUE+i to LIST)")
    ap.add_argument("list", type=uint32, help="list id (default layout: 1, 2, 4, 8, 16 = its batch size)")
    ap.add_argument("value", type=uint32)
    inc = rsub.add_parser("increment", help="KEY: Key-Increment (each report adds --by to KEY)")
    inc.add_argument("key", type=uint32)
    inc.add_argument("--by", type=int, default=1, help="amount per report (default: %(default)s)")
    inc.add_argument("--keys", type=int, default=1, help="spread the reports over KEY..KEY+keys-1 round robin")
    inc.add_argument("--redundancy", type=int, default=None,
                     help="N counters per key (default: the store's maximum, which 'query counter' assumes)")
    pc = rsub.add_parser("postcard", help="FLOW HOP VALUE: Postcarding (report i: hop HOP's VALUE+i for flow FLOW+i)")
    pc.add_argument("flow", type=uint32, help="the flow key (32 bits)")
    pc.add_argument("hop", type=int, help="this hop's number on the flow's path (1..the store's hops, default 5)")
    pc.add_argument("value", type=uint32, help="the hop's 32-bit telemetry value (e.g. its switch id)")
    sk = rsub.add_parser("sketch", help="stream a Count-Min sketch, column by column (Sketch-Merge)")
    sk.add_argument("--sketch-id", type=int, default=1)
    sk.add_argument("--reporter-id", type=int, default=1,
                    help="this reporter's id; the collector's layout lists the reporters a column waits for "
                         "(default layout: 1 and 2)")
    sk.add_argument("--items", default="", help="content: KEY[:COUNT],... added to the sketch")
    sk.add_argument("--random", type=int, default=0, metavar="N", help="content: N random keys")
    sk.add_argument("--seed", type=int, default=1, help="seed of --random (default: %(default)s)")
    sk.add_argument("--key-space", type=int, default=1000, help="--random draws keys 1..this (default: %(default)s)")
    sk.add_argument("--epoch", type=int, default=None,
                    help="epoch to send (default: the next one the translator expects from this reporter)")
    for sp in (kw, ap, inc, pc, sk):
        sp.add_argument("--from", dest="src", default="h1", help="host that reports (default: %(default)s)")
        sp.add_argument("--rate", type=float, default=0.0, help="reports/s (default: as fast as possible)")
        if sp is not sk:
            sp.add_argument("--count", type=int, default=1, help="number of reports (default: %(default)s)")
        _common(sp, collector=True)
        sp.add_argument("--json", action="store_true", help="print the reporter's JSON summary")
        sp.set_defaults(func=cmd_report)


def _register_query(dsub: argparse._SubParsersAction) -> None:
    q = dsub.add_parser("query", help="read the collector's memory (Key-Write, Append, counters, sketches, postcards)",
                        description="Read the collector's registered regions (shared-memory files), as the "
                                    "collector's CPU does while the NIC ingests. Exit status 1 when a key is "
                                    "not found.")
    qsub = q.add_subparsers(dest="what", metavar="STORE", required=True)
    qk = qsub.add_parser("keywrite", help="KEY: the value stored under KEY (tries slots n = 0..N-1)")
    qk.add_argument("key", type=uint32)
    qk.add_argument("--redundancy", type=int, default=None, help="copies to try (default: the store's maximum)")
    qk.add_argument("--consensus", type=int, default=1,
                    help="require this many agreeing copies (fewer wrong answers, more misses; default 1)")
    qa = qsub.add_parser("append", help="LIST: entries of an Append list, oldest first")
    qa.add_argument("list", type=uint32)
    qa.add_argument("--last", type=int, default=None, help="only the K newest entries")
    qc = qsub.add_parser("counter", help="KEY: Key-Increment count (minimum of its N counters)")
    qc.add_argument("key", type=uint32)
    qc.add_argument("--redundancy", type=int, default=None, help="N the reporters used (default: the store's max)")
    qs = qsub.add_parser("sketch", help="ID [KEY]: point estimate of KEY from a merged sketch, or --matrix")
    qs.add_argument("sketch_id", type=int)
    qs.add_argument("key", type=uint32, nargs="?")
    qs.add_argument("--epoch", type=int, default=None,
                    help="epoch (default: the newest one every reporter completed, else 0)")
    qs.add_argument("--matrix", action="store_true", help="print the whole merged sketch")
    qp = qsub.add_parser("postcard", help="FLOW: every hop's value of a flow (Postcarding), exit 1 if not found")
    qp.add_argument("flow", type=_flow, help="the flow key (32 bits), or its 5-tuple SRC:SPORT>DST:DPORT/PROTO as the "
                    "switches' postcards key it (e.g. 10.0.0.1:6666>10.0.0.2:7777/udp)")
    for sp in (qk, qa, qc, qs, qp):
        _common(sp, collector=True)
        sp.add_argument("--json", action="store_true")
        sp.set_defaults(func=cmd_query)


def _flow(text: str) -> int:
    from ..dta.hopreport import parse_flow

    try:
        return parse_flow(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _common(p: argparse.ArgumentParser, collector: bool = False) -> None:
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--switch", default=None, help="the translator's switch (default: the collector's ToR)")
    acts_on_testbed(p)
    if collector:
        p.add_argument("--collector", default="c1", help="collector node (default: %(default)s)")


def _dta() -> Any:
    """netstack.dta.control, imported lazily so that 'netstack --help' stays fast."""
    from ..dta import control

    return control


def _switch(args: argparse.Namespace) -> str:
    dta = _dta()
    if args.switch:
        return args.switch
    return dta.collector_tor(dta.run_state(args.prefix), args.collector)


# --------------------------------------------------------------------------- enable / disable / status


#: ``enable_translator`` options given by value: (option, the argparse destination)
_ENABLE_OPTIONS = (("grace_reports", "grace"), ("grace_ms", "grace_ms"), ("append_flush_ms", "append_flush_ms"),
                   ("max_redundancy", "max_redundancy"), ("ack_every", "ack_every"),
                   ("nak_window_ms", "nak_window_ms"), ("nak_window_slack", "nak_window_slack"),
                   ("window", "window"), ("window_timeout_ms", "window_timeout_ms"),
                   ("postcard_flush_ms", "postcard_flush_ms"))


def cmd_enable(args: argparse.Namespace) -> int:
    dta = _dta()
    opts: dict[str, Any] = {"cls": args.cls}
    for option, value in _ENABLE_OPTIONS:
        if getattr(args, value) is not None:
            opts[option] = getattr(args, value)
    # the --no-* flags switch a feature off (None or False); they are exclusive with its value
    for flag, option, off in (("no_append_flush", "append_flush_ms", None), ("no_seq_tracking", "track_seqnum", False),
                              ("no_nak_window_time", "nak_window_ms", None)):
        if getattr(args, flag):
            opts[option] = off
    out = dta.enable_translator(args.prefix, args.switch, args.collector, **opts)
    if args.postcards:
        switches = [s for s in args.postcards.split(",") if s]
        out["postcards"] = dta.enable_postcards(args.prefix, switches, args.collector,
                                                interval_ms=args.postcard_interval_ms,
                                                translator_ip_=out["translator_ip"])
    if args.json:
        print_json(out)
        return 0
    cfg = out["config"]
    grace = (f"{cfg['grace_reports']} reports" if cfg["grace_reports"] else
             f"{cfg['grace_ns'] / 1e6:g} ms" if cfg["grace_ns"] else "none")
    flush = f"{cfg['append_flush_ns'] / 1e6:g} ms" if cfg["append_flush_ns"] is not None else "never"
    print(f"DTA translator {'replaced' if out['replaced'] else 'enabled'} on {out['switch']}/{out['port']} "
          f"(translator {out['translator_ip']}, {out['translator_mac']}) for collector {out['collector_node']} "
          f"({out['collector_ip']}, {out['collector_mac']})")
    print(f"  regions: {', '.join(out['regions'])}; memory in {out['memory_dir']}")
    window = f"{cfg['nak_window_ns'] / 1e6:g} ms" if cfg.get("nak_window_ns") is not None else "no time bound"
    print(f"  grace period {grace}, idle Append flush {flush}, max redundancy "
          f"{cfg['max_redundancy'] or 'per store'}, NAK window {window} + {cfg.get('nak_window_slack', 0)} PSNs")
    if cfg.get("window") is not None:
        print(f"  output window {cfg['window'] or 'off'}"
              + (f" requests per QP, time-out {cfg['window_timeout_ns'] / 1e6:g} ms" if cfg["window"] else ""))
    if out.get("bound"):
        print(f"  collector QPs bound to the translator: {', '.join(out['bound'])}")
    if out.get("postcards"):
        hops = ", ".join(f"{sw} hop {st['counters']['hop']}" for sw, st in out["postcards"].items())
        print(f"  postcards from {hops} (netstack dta query postcard FLOW)")
    if out.get("auth"):
        reporters = out["auth"]["reporters"]
        print(f"  reports authenticated (keys {out['auth']['keys']}): {len(reporters)} reporters "
              f"({', '.join(reporters[:8])}{', ...' if len(reporters) > 8 else ''}); others are refused")
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    dta = _dta()
    out = dta.disable_translator(args.prefix, _switch(args))
    stopped = [sw for sw, st in dta.disable_postcards(args.prefix).items() if st.get("final")]
    if stopped:
        out["postcards_stopped"] = stopped
    if args.json:
        print_json({"switch": _switch(args), **out})
        return 0
    if out.get("was_enabled"):
        c = out["counters"]
        print(f"DTA translator disabled on {_switch(args)}/{out['port']} after {c['reports']} reports "
              f"({c['roce_frames']} RoCEv2 frames)")
    else:
        print(f"DTA was not enabled on {_switch(args)}")
    if stopped:
        print(f"  postcards stopped on {', '.join(stopped)}")
    return 0


TRANSLATOR_COLS = ["reports", "auth_ok", "keywrite", "append", "keyincrement", "sketch", "roce_frames", "writes",
                   "fetch_adds", "append_batches", "append_flushes", "sketch_writes", "acks", "resyncs",
                   "grace_dropped", "seq_nacks", "sketch_nacks", "malformed", "internal_errors"]
QP_COLS = ["requests", "writes", "fetch_adds", "acks", "atomic_acks", "naks_psn", "naks_access", "naks_invalid",
           "out_of_sequence_dropped", "duplicates"]
RESPONDER_COLS = ["frames", "not_roce", "malformed", "not_for_us", "icrc_errors", "bad_header", "unknown_qp",
                  "requests_unbound", "requests_rejected_source", "not_request", "internal_errors"]


def cmd_status(args: argparse.Namespace) -> int:
    from ..bench.common import format_table

    dta = _dta()
    switch = _switch(args)
    tr = dta.translator_status(args.prefix, switch, quiet=True)
    col = dta.collector_status(args.prefix, args.collector)
    if args.json:
        print(json.dumps({"translator": tr, "collector": col}, indent=2))
        return 0
    if tr.get("enabled"):
        c = tr["counters"]
        print(f"translator on {switch}/{tr['port']} ({tr['translator_ip']}) -> collector {tr['collector']} "
              f"({tr['collector_ip']}){'  [IN GRACE PERIOD]' if tr['in_grace'] else ''}")
        rows = [[k, c.get(k, 0)] for k in TRANSLATOR_COLS if c.get(k) or k in ("reports", "roce_frames")]
        drops = {k: v for k, v in c.items() if isinstance(v, int) and v and k not in TRANSLATOR_COLS}
        rows += [[k, v] for k, v in drops.items()]
        if "auth_refused" in c:
            rows += [[f"auth_refused {reason}", n] for reason, n in c["auth_refused"].items() if n]
        rows.append(["enqueue_drops (collector port full)", tr["enqueue_drops"]])
        print(format_table(["translator counter", "value"], rows))
        lists = {k: v for k, v in c.get("lists", {}).items() if v["head"] or v["buffered"]}
        if lists:
            print("Append heads: " + ", ".join(f"list {k}: head {v['head']}, {v['buffered']} buffered"
                                               for k, v in lists.items()))
    else:
        print(f"DTA is not enabled on {switch}: netstack dta enable")
    print()
    r = col["responder"]
    print(f"collector {col['collector']} ({col['ip']}, {col['ifname']}), memory in {col['memory_dir']}, "
          f"UDP 4791 guard: {col['udp4791_guard']}, socket drops: {col['kernel_drops']}")
    print(format_table(["responder", *RESPONDER_COLS], [["all QPs", *(r.get(k, 0) for k in RESPONDER_COLS)]]))
    rows = [[name, _peer(qp.get("peer")), *(qp.get(k, 0) for k in QP_COLS)] for name, qp in r["qps"].items()]
    print(format_table(["queue pair", "bound to", *QP_COLS], rows))
    return 0


def _peer(peer: dict[str, Any] | None) -> str:
    """A QP's connected peer (the translator) for the status table; unbound QPs accept nothing."""
    return "(unbound)" if not peer else f"{peer['ip']} qpn {peer['qpn']}"


# --------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    from ..progress import Reporter

    dta = _dta()
    # checked against the testbed, the reporter tool's command line built (netstack.dta.control)
    plan = dta.plan_report(args.prefix, args.kind, vars(args))
    rep = Reporter("dta report")
    with rep.heartbeat(f"{args.src} reporting", expect_s=plan.expect_s):
        # judged over the reporter's and every daemon's scheduling delay (netstack.validity)
        res = dta.run_report(args.prefix, plan.src, plan.argv, plan.switch)
    if not args.json:  # its first line is the summary already
        _print_report(args, res, plan.dst, plan.switch)
        print(f"  {dta.verdict_line(res)}")
        return finish(res)
    print(json.dumps(res))
    rate = f" ({res['sent'] / res['seconds']:.0f}/s)" if res.get("seconds") else ""
    rep.summary(f"{res['sent']} {args.kind} reports {args.src} -> {args.collector} via {plan.switch} in "
                f"{res.get('seconds', 0):.3f} s{rate}, {rep.took()} in all")
    return finish(res)


def _print_report(args: argparse.Namespace, res: dict[str, Any], dst: str, switch: str) -> None:
    rate = f"{res['sent'] / res['seconds']:.0f}/s" if res.get("seconds") else "-"
    print(f"{args.src} -> {args.collector} ({dst}:40040) via {switch}: {res['sent']} {args.kind} reports "
          f"in {res['seconds']:.3f} s ({rate})")
    if res.get("auth"):
        a = res["auth"]
        print(f"  sealed as reporter {a['reporter']} (key {a['key_id']}, era {a['era']}): {a.get('sealed', 0)} reports")
    if args.kind == "sketch":
        print(f"  sketch {args.sketch_id}, reporter {args.reporter_id}, epoch {res['epoch']}: "
              f"{res['columns_sent']} columns sent, {res['nacks']} NACKs, {res['rewinds']} rewinds; "
              f"{res['total']} items")


# --------------------------------------------------------------------------- query


def _latest_epoch(args: argparse.Namespace, dta: Any, columns: int) -> int:
    try:
        st = dta.translator_status(args.prefix, _switch(args), quiet=True)
    except (dta.DTAError, CommandError):
        return 0
    expected = st.get("counters", {}).get("sketches", {}).get(str(args.sketch_id), {}).get("expected", {})
    if not expected:
        return 0
    return max(0, min(int(v) for v in expected.values()) // columns - 1)


def cmd_query(args: argparse.Namespace) -> int:
    from ..dta.query import CollectorQuery, QueryError

    dta = _dta()
    directory = dta.memory_dir(args.prefix, args.collector)
    try:
        q = CollectorQuery.open(directory)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot open the collector's memory in {directory}: {exc}") from None
    try:
        return _query(args, q, dta)
    except QueryError as exc:
        raise CommandError(str(exc).strip("'\"")) from None
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    finally:
        q.close()


def _query(args: argparse.Namespace, q: Any, dta: Any) -> int:
    out: dict[str, Any]
    if args.what == "keywrite":
        cands = q.keywrite_candidates(args.key, args.redundancy)
        value = q.keywrite_get(args.key, args.redundancy, args.consensus)
        matched = sum(c is not None for c in cands)
        out = {"key": args.key, "value": list(value) if value else None, "copies_matched": matched,
               "copies_tried": len(cands)}
        text = (f"key {args.key}: {' '.join(str(v) for v in value)}" if value else f"key {args.key}: not found") + \
            f"  ({matched} of {len(cands)} slots hold this key's checksum)"
        found = value is not None
    elif args.what == "append":
        values = q.append_read(args.list, args.last)
        out = {"list": args.list, "entries": values}
        text = f"list {args.list} ({len(values)} entries, oldest first): {' '.join(map(str, values)) or '-'}"
        found = True
    elif args.what == "postcard":
        hops = q.postcard_get(args.flow)
        out = {"flow": args.flow, "hops": {str(h): v for h, v in sorted(hops.items())} if hops else None}
        text = (f"flow {args.flow}: " + "  ".join(f"hop {h}: {v}" for h, v in sorted(hops.items()))
                if hops else f"flow {args.flow}: not found")
        found = hops is not None
    elif args.what == "counter":
        counters = q.counters_of(args.key, args.redundancy)
        out = {"key": args.key, "count": min(counters), "counters": counters}
        text = f"key {args.key}: {min(counters)}  (min of its counters {counters})"
        found = True
    else:
        region = q.memory.find("sketch", sketch_id=args.sketch_id)
        if region is None:
            raise CommandError(f"the collector has no sketch {args.sketch_id}")
        epoch = args.epoch if args.epoch is not None else _latest_epoch(args, dta, int(region.layout["columns"]))
        if args.matrix or args.key is None:
            m = q.sketch_matrix(args.sketch_id, epoch)
            out = {"sketch": args.sketch_id, "epoch": epoch, "matrix": m}
            text = "\n".join([f"sketch {args.sketch_id}, epoch {epoch} ({len(m)} rows x {len(m[0])} columns):"]
                             + [" ".join(map(str, row)) for row in m])
        else:
            est = q.sketch_point(args.sketch_id, args.key, epoch)
            out = {"sketch": args.sketch_id, "epoch": epoch, "key": args.key, "estimate": est}
            text = f"sketch {args.sketch_id}, epoch {epoch}: key {args.key} ~ {est}"
        found = True
    print(json.dumps(out) if args.json else text)
    return 0 if found else 1
