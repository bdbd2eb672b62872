"""``netstack up | down | status | exec | impair``: the live testbed."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..argtypes import int_between, non_negative_float, pair, probability, tcp_port_between
from ..errors import CommandError
from .common import acts_on_testbed, add_json, print_json

if TYPE_CHECKING:
    from ..runtime import RunState


def register(sub: argparse._SubParsersAction) -> None:
    from ..topo.model import METRICS_PORTS, shipped_topologies

    names = ", ".join(shipped_topologies())
    p = sub.add_parser(
        "up", help="build a topology (namespaces, veths) and start its daemons",
        description="Create one network namespace per node, veth pairs for the links (offloads off), host "
                    "addresses and routes, start one switch daemon per switch, and print what was built. "
                    "TOPOLOGY is a TOML file or the name of a shipped topology "
                    f"({names}; docs/topology.md); without it, the default LinkGuardian-testbed topology "
                    "(h1, h2, c1, sw1, sw2). All or nothing: on any error nothing is left half-built.",
    )
    p.add_argument("topology", nargs="?",
                   help=f"TOML topology file, or a shipped topology by name: {names} (omitted: default)")
    p.add_argument("--prefix", help="namespace prefix (default: the file's, 'ns' for the default topology)")
    p.add_argument("--no-impair", action="store_true", help="ignore the impairments the topology file sets")
    p.add_argument("--metrics-port", type=tcp_port_between(*METRICS_PORTS), default=None, metavar="PORT",
                   help="every daemon serves Prometheus metrics on 127.0.0.1, the first on PORT, the next on PORT+1... "
                        "('netstack metrics' reads them all; default: the file's [topology] metrics_port, else none)")
    p.add_argument("--json", action="store_true", help="print the run state as JSON")
    p.add_argument("--store", choices=["sqlite", "etcd"], default=None,
                   help="topologies with a 1Pipe controller node: where the controller keeps its state "
                        "(default sqlite: one file in the run directory; etcd: a 3-member etcd cluster started "
                        "on the controller's node; docs/onepipe-reliable.md)")
    p.add_argument("--controller-replicas", type=int_between(1, 9, "the number of replicas"), default=None,
                   metavar="N",
                   help="topologies with a 1Pipe controller node: controller replicas, one leads "
                        "(default: 1 with sqlite, 2 with etcd)")
    p.set_defaults(func=cmd_up)

    p = sub.add_parser("down", help="stop the daemons and remove namespaces, veths and nft tables",
                       description="Tear a running topology down. With --all, remove every netstack "
                                   "topology on this machine, including what a crashed run left behind.")
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--all", action="store_true", help="every netstack topology, also after a crash")
    add_json(p, "the namespaces removed")
    p.set_defaults(func=cmd_down)

    p = sub.add_parser("status", help="every switch port's counters",
                       description="Per-port counters of every daemon: rx/tx frames and bytes, FCS errors, "
                                   "queue drops, PFC pauses sent/received, kernel socket drops. Exit status 1 "
                                   "when no daemon answers, 2 when no such testbed runs.")
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_status)
    acts_on_testbed(p)

    p = sub.add_parser("exec", help="run a command inside a node (like Mininet's 'h1 ping h2')",
                       description="Run CMD inside NODE's namespace, e.g. 'netstack exec h1 -- ping -c3 10.0.0.2'. "
                                   "In a container deployment CMD runs in the node's container (docker exec). "
                                   "exec's own options go before NODE or between NODE and '--'.")
    p.add_argument("node", help="node name (h1, sw1, ...)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command and its arguments")
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--detach", "-d", action="store_true",
                   help="start CMD in the background and return: prints its pid and its log file; "
                        "'netstack down' stops it with the node")
    p.add_argument("--log", default=None, metavar="FILE",
                   help="with --detach: where CMD's output goes (default: the run directory's exec/ folder)")
    p.add_argument("--json", action="store_true", help="with --detach: print the pid and log file as JSON")
    p.set_defaults(func=cmd_exec, late_options=exec_late_options)
    acts_on_testbed(p)

    _register_impair(sub)


def _register_impair(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "impair", help="corrupt, drop, delay, jitter, duplicate or reorder frames on a link",
        description="Impair a link's egress (replacing what was there). Backends:\n"
                    "  netem   tc, kernels with sch_netem: every option but --gilbert\n"
                    "  nft     netdev egress rules: loss and corruption only (this VM's kernel has no netem)\n"
                    "  switch  the sending switch daemon's seeded model: reproducible, any rate, bursty\n"
                    "          Gilbert-Elliott loss, and netem's delay/jitter/duplicate/reorder\n"
                    "'auto' picks netem; without it nft, or the switch model when the link is shaped\n"
                    "(--delay/--jitter/--duplicate/--reorder) and a switch sends.",
        epilog="examples:\n"
               "  netstack impair sw1-sw2 --corrupt 1e-3                  0.1 %% corruption, sw1 -> sw2\n"
               "  netstack impair sw1-sw2 --delay 5 --jitter 2            5 ms +- 2 ms more: jitter reorders\n"
               "  netstack impair sw1-sw2 --delay 10 --reorder 0.25       a quarter sent at once, ahead\n"
               "  netstack impair sw2-h2 --duplicate 0.01 --direction sw2:h2\n"
               "  netstack impair sw1-sw2 --clear --direction both",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("link", help="link name from the topology (e.g. sw1-sw2)")
    p.add_argument("--corrupt", type=probability, default=0.0, help="fraction of frames corrupted (e.g. 1e-2)")
    p.add_argument("--loss", type=probability, default=0.0, help="fraction of frames dropped")
    ms = non_negative_float("a time")
    p.add_argument("--delay", type=ms, default=0.0, metavar="MS",
                   help="hold every frame MS milliseconds longer (netem's delay)")
    p.add_argument("--jitter", type=ms, default=0.0, metavar="MS",
                   help="+- a uniform MS on each frame's delay (frames then overtake each other)")
    p.add_argument("--duplicate", type=probability, default=0.0, metavar="P", help="fraction of frames sent twice")
    p.add_argument("--reorder", type=probability, default=0.0, metavar="P",
                   help="fraction of frames sent at once, past the delayed ones (needs --delay)")
    p.add_argument("--direction", default=None,
                   help="which sending end: A:B or 'A>B' (quote the >), e.g. sw1:sw2; or both "
                        "(default: the link's a>b)")
    p.add_argument("--backend", choices=["auto", "netem", "nft", "switch"], default="auto")
    p.add_argument("--seed", type=int, default=1, help="seed of the switch backend (default: %(default)s)")
    p.add_argument("--gilbert", metavar="P_GB,P_BG", type=pair(probability, "two probabilities, P_GB,P_BG"),
                   help="switch backend only: bursty Gilbert-Elliott model; per-frame probabilities of moving "
                        "good->bad and bad->good; --corrupt/--loss then apply in the good state")
    p.add_argument("--bad-corrupt", type=probability, default=0.0, help="corruption rate in the bad state")
    p.add_argument("--bad-loss", type=probability, default=0.0, help="loss rate in the bad state")
    p.add_argument("--clear", action="store_true", help="remove every impairment from the link")
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    add_json(p, "what each sending end got")
    p.set_defaults(func=cmd_impair)
    acts_on_testbed(p)


def up_options(args: argparse.Namespace) -> dict[str, Any]:
    """The node kinds' options ``netstack up`` was given (``runtime.up(options=...)``): only those
    given, so that a topology without a node that takes one is an error only when it was asked for."""
    given = {"store": getattr(args, "store", None), "controller_replicas": getattr(args, "controller_replicas", None)}
    return {k: v for k, v in given.items() if v is not None}


def _need_root() -> None:
    if os.geteuid() != 0:
        raise CommandError("needs root (namespaces, veths, nft): run with sudo")


def cmd_up(args: argparse.Namespace) -> int:
    from ..runtime import check_options, up
    from ..topo.model import load_topology_spec

    try:
        topology = load_topology_spec(args.topology)
        metrics_port = getattr(args, "metrics_port", None)  # (callers may build args by hand)
        if metrics_port is not None:
            topology = dataclasses.replace(topology, metrics_port=metrics_port)
        options = up_options(args)
        check_options(topology, options)  # before asking for root: a wrong option is wrong for anyone
    except OSError as exc:
        raise CommandError(f"cannot read {args.topology}: {exc}") from None
    from ..progress import Reporter

    _need_root()
    rep = Reporter("up")
    state = up(topology, args.prefix, apply_impairments=not args.no_impair, options=options, progress=rep)
    summary = (f"{state.topology} under prefix {state.prefix} in {rep.took()}: {len(state.namespaces)} "
               f"namespaces, {len(state.daemons)} daemons, {len(state.ports)} ports")
    if args.json:
        print(json.dumps(state.to_dict(), indent=2))
        rep.summary(summary)
        return 0
    print(f"topology {state.topology} is up under prefix {state.prefix}")
    print("\nnodes:")
    for node, ns in state.namespaces.items():
        ip = state.hosts.get(node, "")
        print(f"  {node:<6} netns {ns:<12} {ip}")
    print("\nports:")
    for p in state.ports:
        extra = " fcs" if p.fcs else ""
        print(f"  {p.node:<6} {p.ifname:<8} {p.mac}  -> {p.peer:<6} ({p.link}){extra}")
    if state.impairments:
        print("\nimpairments:", ", ".join(f"{k} [{v}]" for k, v in state.impairments.items()))
    print("\ndaemons:")
    for d in state.daemons:
        print(f"  {d.key:<10} {d.kind} pid {d.pid}  log {d.log}")
    hints = []
    hosts = [(h.name, h.ip.ip) for h in topology.hosts if h.ip is not None]
    if len(hosts) >= 2:  # the first host pings the last (default: h1 -> h2; onepipe: h1 -> h4, across the spine)
        exec_prefix = "" if state.prefix == "ns" else f"--prefix {state.prefix} "
        hints.append(f"netstack exec {exec_prefix}{hosts[0][0]} -- ping -c3 {hosts[-1][1]}")
    hints += [f"netstack status --prefix {state.prefix}", f"netstack down --prefix {state.prefix}"]
    print("\ntry: " + "\n     ".join(hints))
    rep.summary(summary)
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from ..progress import Reporter
    from ..runtime import down, down_all

    _need_root()
    if not args.all:
        _refuse_containers(args.prefix)
    rep = Reporter("down")
    with rep.heartbeat("tearing down"):
        removed = down_all() if args.all else down(args.prefix)
    if getattr(args, "json", False):
        print_json({"removed": removed})
    else:
        print(f"removed {len(removed)} namespaces" + (f": {', '.join(removed)}" if removed else ""))
    rep.summary(f"removed {len(removed)} namespaces in {rep.took()}")
    return 0


def _refuse_containers(prefix: str) -> None:
    """``down`` of a prefix that runs in containers, not namespaces: say how to stop it."""
    from ..runtime import run_dir
    from ..topo.netns import list_running

    if prefix in list_running() or (run_dir(prefix) / "state.json").exists():
        return
    from ..container.discover import running_prefixes

    if prefix in running_prefixes():
        raise CommandError(f"prefix {prefix!r} runs in containers: stop it with 'docker-compose down' (or "
                           "'docker stack rm STACK' for a swarm stack) where it was started")


def cmd_status(args: argparse.Namespace) -> int:
    from ..runtime import status

    st = status(args.prefix)
    if args.json:
        print(json.dumps(st, indent=2))
        return _answered(st)
    _print_status(st)
    return _answered(st)


def _answered(st: dict[str, Any]) -> int:
    """Exit status of ``status``: 1 with one line on stderr when daemons were asked and none
    answered (not root: the control sockets are root's; a crash), else 0 (the table says which
    daemon is silent: one killed by 'netstack fault' is no reason to fail)."""
    from ..validity import EXIT_FAILED, EXIT_OK

    silent = [k for k, d in st["daemons"].items() if "error" in d]
    asked = [k for k, d in st["daemons"].items() if set(d) != {"kind", "node", "pid", "alive"}]
    if not silent or len(silent) < len(asked):
        return EXIT_OK
    hint = " (not root: the control sockets are root's; try sudo)" if os.geteuid() != 0 else \
        f" (crashed? 'netstack down --prefix {st['prefix']}' cleans up)"
    sys.stdout.flush()
    print(f"netstack status: no daemon of testbed {st['prefix']} answers ({len(silent)} asked){hint}",
          file=sys.stderr)
    return EXIT_FAILED


def _print_status(st: dict[str, Any]) -> None:
    from ..bench.common import format_table

    cols = ["rx_frames", "tx_frames", "rx_bytes", "tx_bytes", "fcs_errors", "queue_drops", "malformed",
            "pauses_rx", "pauses_tx", "kernel_drops"]
    rows = []
    for node, d in st["daemons"].items():
        if "error" in d:
            rows.append([node, "-", d["error"], *[""] * (len(cols) - 1)])
            continue
        if "ports" not in d:
            continue  # not a switch (e.g. the DTA collector): listed below
        for port, c in d["ports"].items():
            rows.append([node, port, *[_get(c, k) for k in cols]])
    print(f"topology {st['topology']} (prefix {st['prefix']})")
    print(format_table(["node", "port", *cols], rows))
    _print_carrier(st)
    _print_defences(st)
    _print_protocols(st)
    _print_ecmp(st)
    others = {node: d for node, d in st["daemons"].items() if "ports" not in d and "error" not in d}
    for node, d in others.items():
        summary = {k: v for k, v in d.items() if isinstance(v, (int, float, str)) and k != "pid"}
        print(f"\n{node}: " + ", ".join(f"{k}={v}" for k, v in list(summary.items())[:8]))
    if st.get("impairments"):
        print("\nimpairments (counts are the injector's own):")
        irows = [[where, i.get("link", ""), i.get("backend", "?"), i.get("corrupt", ""), i.get("loss", ""),
                  _shaping_text(i), i.get("corrupted", ""), i.get("dropped", ""), _get(i, "reordered"),
                  _get(i, "duplicated")] for where, i in sorted(st["impairments"].items())]
        print(format_table(["direction", "link", "backend", "corrupt", "loss", "shaping", "corrupted", "dropped",
                            "reordered", "duplicated"], irows))


def _shaping_text(imp: dict[str, Any]) -> str:
    """``5ms±1ms dup 1% reorder 10%`` for an impairment's netem-style shaping ("" when none)."""
    parts = []
    delay, jitter = imp.get("delay_ns") or 0, imp.get("jitter_ns") or 0
    if delay or jitter:
        parts.append(f"{delay / 1e6:g}ms" + (f"±{jitter / 1e6:g}ms" if jitter else ""))
    for key, word in (("duplicate", "dup"), ("reorder", "reorder")):
        if imp.get(key):
            parts.append(f"{word} {imp[key] * 100:g}%")
    return " ".join(parts)


def _print_carrier(st: dict[str, Any]) -> None:
    """Switch ports whose link is down now or went down since the start (``netstack link``)."""
    said = []
    for node, d in st["daemons"].items():
        for port, c in (d.get("ports") or {}).items():
            if c.get("carrier") is False or c.get("link_down"):
                said.append(f"{node}/{port} carrier {'up' if c.get('carrier', True) else 'DOWN'} "
                            f"(link_down {c.get('link_down', 0)}, carrier_drops {c.get('carrier_drops', 0)})")
    if said:
        print("\nlinks that lost carrier: " + "; ".join(said))


def _print_protocols(st: dict[str, Any]) -> None:
    """What each protocol running in the switches reports (``protocols`` in a switch daemon's
    status: its control plug-in's ``switch_status``): the per-port counters, one table each."""
    from ..bench.common import format_table

    tables: dict[str, list[list[Any]]] = {}
    cols: dict[str, list[str]] = {}
    for node, d in st["daemons"].items():
        for proto, rep in (d.get("protocols") or {}).items():
            for port, p in sorted((rep.get("ports") or {}).items()):
                counters = {k: v for k, v in (p.get("counters") or {}).items() if isinstance(v, int)}
                names = cols.setdefault(proto, list(counters))
                tables.setdefault(proto, []).append([node, port, *[counters.get(k, "") for k in names]])
    for proto, rows in tables.items():
        print(f"\n{proto} (per port; 'netstack {proto} status' has more):")
        print(format_table(["node", "port", *cols[proto]], rows))


def _print_ecmp(st: dict[str, Any]) -> None:
    """Every switch's ECMP groups (``ecmp`` in its status, docs/topology.md "ECMP"): the frames
    the hash sent to each next hop, per destination; nothing without ECMP."""
    from ..bench.common import format_table

    rows = []
    for node, d in st["daemons"].items():
        for dst, hops in (d.get("ecmp") or {}).items():
            total = sum(hops.values())
            rows += [[node, dst, port, n, f"{100 * n / total:.0f}%" if total else "-"] for port, n in hops.items()]
    if rows:
        print("\nECMP (frames the hash sent to each next hop):")
        print(format_table(["node", "destination", "next hop", "frames", "share"], rows))


#: what the switches refused or repaired (docs/security.md): shown when any of it happened
DEFENCES = ("edge_drops_switch_only", "edge_drops_pfc", "edge_drops_spoofed", "mac_control_dropped",
            "pfc_watchdog_events", "pfc_watchdog_ignored")


def _print_defences(st: dict[str, Any]) -> None:
    rows = [[node, port, *[c.get(k, 0) for k in DEFENCES]]
            for node, d in st["daemons"].items() for port, c in d.get("ports", {}).items()
            if any(c.get(k) for k in DEFENCES)]
    if rows:
        from ..bench.common import format_table

        print("\nrefused at the edge / PFC watchdog (docs/security.md):")
        print(format_table(["node", "port", *DEFENCES], rows))


def _get(counters: dict[str, Any], key: str) -> Any:
    value = counters.get(key, "")
    return sum(value.values()) if isinstance(value, dict) else value


#: exec's options, as they may also come between NODE and ``--``: option -> (dest, takes a value)
EXEC_OPTIONS = {"--prefix": ("prefix", True), "--log": ("log", True), "--detach": ("detach", False),
                "-d": ("detach", False), "--json": ("json", False)}


def exec_late_options(args: argparse.Namespace) -> None:
    """``netstack exec NODE --prefix P -- CMD``: argparse.REMAINDER gives exec everything after
    NODE, its own options too; take those written before ``--`` (or before CMD's first word),
    as if they had come before NODE. (netstack.cli calls it before the global ``--prefix`` is
    merged in, which this ``--prefix`` wins over.)"""
    argv = list(args.argv)
    while argv and argv[0] != "--":
        name, eq, value = argv[0].partition("=")
        if name not in EXEC_OPTIONS:
            break
        dest, takes_value = EXEC_OPTIONS[name]
        argv.pop(0)
        if not takes_value:
            if eq:
                raise CommandError(f"{name} takes no value")
            setattr(args, dest, True)
            continue
        if not eq:
            if not argv or argv[0] == "--":
                raise CommandError(f"{name} needs a value")
            value = argv.pop(0)
        setattr(args, dest, value)
        args.given_options = {*getattr(args, "given_options", ()), dest}
    args.argv = argv[1:] if argv and argv[0] == "--" else argv


def cmd_exec(args: argparse.Namespace) -> int:
    from ..runtime import load_state

    argv = args.argv[1:] if args.argv and args.argv[0] == "--" else args.argv
    if not argv:
        raise CommandError("no command given: netstack exec NODE -- CMD ...")
    if getattr(args, "json", False) and not args.detach:
        raise CommandError("--json goes with --detach (without it CMD's own output comes here)")
    state = load_state(args.prefix)
    ns = state.namespaces.get(args.node)
    if ns is None:
        raise CommandError(f"no node {args.node!r}; nodes: {', '.join(state.namespaces)}")
    container = state.containers.get(args.node)
    if args.log is not None and not args.detach:
        raise CommandError("--log goes with --detach (without it the output comes here)")
    if args.detach:
        return _detach(args, state, ns, container, argv)
    if container:  # a container deployment: the command runs in the container, with its files
        tty = ["-t"] if sys.stdin.isatty() and sys.stdout.isatty() else []
        os.execvp("docker", ["docker", "exec", "-i", *tty, container, *argv])
    os.execvp("ip", ["ip", "netns", "exec", ns, *argv])
    return 0  # not reached


def _detach(args: argparse.Namespace, state: RunState, ns: str, container: str | None,
            argv: list[str]) -> int:
    """``exec --detach``: CMD in its own session, stdin from /dev/null, output to a log file; the
    namespace's processes are stopped by ``netstack down`` (netstack.topo.netns), so nothing is
    left behind."""
    import subprocess
    import time

    from ..runtime import run_dir

    if container:
        # docker keeps a detached exec's output nowhere: send it to a file in the container
        log = args.log or f"/tmp/netstack-exec-{int(time.time())}.log"
        cmd = " ".join(_shell_quote(a) for a in argv)
        r = subprocess.run(["docker", "exec", "-d", container, "sh", "-c", f"exec {cmd} >{_shell_quote(log)} 2>&1"],
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise CommandError(f"docker exec -d failed: {r.stderr.strip()}")
        if getattr(args, "json", False):
            print_json({"node": args.node, "container": container, "argv": argv, "pid": None, "log": log})
        else:
            print(f"{args.node}: started {argv[0]} detached in container {container}; output in {log} (inside it)")
        return 0
    log_path = Path(args.log) if args.log else run_dir(state.prefix) / "exec" / (
        f"{args.node}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log")
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        out = open(log_path, "ab")  # noqa: SIM115 (handed to the child, closed below)
    except OSError as exc:
        raise CommandError(f"cannot write the log {log_path}: {exc.strerror or exc}") from None
    with out:
        try:
            proc = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise CommandError(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
    for _ in range(6):  # a command that cannot start (not found) fails within a few ms: say so
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    if proc.returncode not in (None, 0):
        said = log_path.read_text(errors="replace").strip()[-300:]
        raise CommandError(f"{argv[0]} exited at once with status {proc.returncode}: {said}")
    if getattr(args, "json", False):
        print_json({"node": args.node, "container": None, "argv": argv, "pid": proc.pid, "log": str(log_path)})
        return 0
    print(f"{args.node}: started pid {proc.pid} ({argv[0]}), detached; output in {log_path}; "
          f"'netstack down --prefix {state.prefix}' stops it")
    return 0


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def cmd_impair(args: argparse.Namespace) -> int:
    from ..impairctl import Impair, impair_link
    from ..topo.impair import Shaping

    _need_root()
    shaping = Shaping(round(args.delay * 1e6), round(args.jitter * 1e6), args.duplicate, args.reorder)
    done = impair_link(args.prefix, args.link, args.direction, Impair(
        corrupt=args.corrupt, loss=args.loss, shaping=shaping, backend=args.backend, seed=args.seed,
        gilbert=tuple(args.gilbert) if args.gilbert else None, bad_corrupt=args.bad_corrupt,
        bad_loss=args.bad_loss, clear=args.clear))
    if getattr(args, "json", False):
        print_json({"link": args.link, "ends": done})
        return 0
    for end in done:
        if end["cleared"]:
            print(f"{args.link} {end['direction']}: cleared")
            continue
        shaped = f" {_shaping_text(end['shaping'])}" if end["shaping"] else ""
        print(f"{args.link} {end['direction']}: corrupt {end['corrupt']:g} loss {end['loss']:g}{shaped} "
              f"[{end['backend']}]", flush=True)
    return 0

