"""``netstack sim``: run a scenario on a topology in virtual time (or live), one run or a sweep."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import CommandError
from .common import add_mode, finish

EPILOG = """\
examples:
  netstack sim --list                                        scenarios and shipped topologies
  netstack sim lg-testbed --scenario lg-stream               LinkGuardian at 1e-2, N = 1, in virtual time
  netstack sim lg-testbed --scenario lg-stream --mode live   the same file and scenario on the testbed
  netstack sim lg-100g --scenario lg-stress --param frames=200000 --seeds 1-4 --workers 2
  netstack sim lab.toml --scenario udp-stream --param rate_pps=1000,2000,4000 --seeds 1,2
  netstack sim lab.toml --scenario udp-stream --scheduler tcp://10.0.0.5:8786   on a Dask cluster

Results: one JSON document per invocation in --results-dir (schema netstack.run/1, one entry per
run: scenario, runtime, seed, params, time_scale, result, engine), a table on stdout, progress on
stderr, then one summary line there (runs, wall time, failures, the JSON's path). The same
topology, scenario, parameters and seed give byte-identical results (but for the engine's
wall-clock fields); another seed draws other frame fates."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sim", help="run a scenario on a topology in virtual time (or live): one run or a sweep",
        description="Run a scenario on a topology with the virtual-time runtime (netstack.sim): the same "
                    "switch engines and features as the live daemons, host models instead of kernels, links "
                    "as delay lines with the topology's impairments. Sweeps (seeds x parameter values) run in "
                    "parallel processes or on a Dask cluster.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topology", nargs="?", help="topology TOML file, or a shipped one by name (see --list)")
    p.add_argument("--scenario", help="what to run (see --list)")
    p.add_argument("--list", action="store_true", help="list the scenarios and shipped topologies, then exit")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE[,VALUE...]",
                   help="a scenario parameter; several comma-separated values sweep it (repeatable)")
    p.add_argument("--seed", type=int, default=None, help="seed of every impairment and workload (default 1)")
    p.add_argument("--seeds", default=None, metavar="A-B|A,B,...", help="sweep seeds, e.g. 1-10 or 1,5,9")
    p.add_argument("--duration", default=None, metavar="TIME",
                   help="virtual (or live) time to run, e.g. 2s or 500ms (default: the scenario's own end)")
    add_mode(p, "sim", "sim (default): virtual time; live: the same scenario on real namespaces (root)")
    p.add_argument("--workers", type=int, default=None,
                   help="parallel processes for a sweep (default: one per CPU; 1 = in this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the sweep on a Dask distributed scheduler (tcp://host:8786) instead")
    p.add_argument("--results-dir", default="results", help="where the JSON goes (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the JSON document instead of the table")
    p.set_defaults(func=cmd_sim)


def parse_seeds(text: str) -> list[int]:
    """``1-10``, ``1,5,9`` or a mix (``1-3,7``); seeds are whole numbers >= 0."""
    out: list[int] = []
    try:
        for part in text.replace(" ", "").split(","):
            if not part:
                continue
            a, sep, b = part.partition("-")
            lo = int(a)
            hi = int(b) if sep else lo
            if lo < 0 or hi < lo:
                raise ValueError
            out.extend(range(lo, hi + 1))
    except ValueError:
        raise CommandError(f"--seeds {text!r}: use a range (1-10) or a list (1,5,9) of seeds >= 0") from None
    if not out:
        raise CommandError(f"--seeds {text!r}: no seed")
    if len(out) > 100_000:
        raise CommandError(f"--seeds {text!r}: {len(out)} seeds is too many")
    return out


def parse_params(items: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError(f"--param {item!r}: use KEY=VALUE (or KEY=V1,V2,... to sweep)")
        out[key.strip()] = [v.strip() for v in value.split(",")] if value else [""]
    return out


def _duration(text: str | None) -> int | None:
    if text is None:
        return None
    from ..topo.model import parse_delay

    try:
        ns = parse_delay(text)
    except ValueError as exc:
        raise CommandError(f"--duration {text!r}: {exc}") from None
    if ns <= 0:
        raise CommandError(f"--duration {text!r}: must be positive")
    return ns


def _list() -> int:
    from ..sim import scenario as sc

    print("scenarios:")
    for name, s in sorted(sc.scenarios().items()):
        params = ", ".join(f"{k}={v!r}" for k, v in s.params.items())
        print(f"  {name:<16} [{'/'.join(s.runtimes)}] {s.description}")
        print(f"  {'':<16} parameters: {params}")
    print("\nshipped topologies (give the name instead of a file):")
    for name, path in sorted(sc.examples().items()):
        print(f"  {name:<16} {path}")
    return 0


def summary_row(r: dict[str, Any]) -> dict[str, Any]:
    """A few columns of one run for the table (errors say so)."""
    row: dict[str, Any] = {"seed": r.get("seed")}
    row.update({k: v for k, v in (r.get("params") or {}).items()})
    if "error" in r:
        row["error"] = r["error"][:80]
        return row
    res = r.get("result", {})
    for key in ("effective_loss", "reordered"):
        if isinstance(res.get(key), dict):
            e = res[key]
            row[key] = f"{e['lost']}/{e['frames']} ({e['rate']:.2e})"
    for key in ("actual_loss", "effective_link_speed", "goodput_bps", "ok", "seconds"):
        v = res.get(key)
        if v is not None:
            row[key] = f"{v:.4g}" if isinstance(v, float) else v
    if isinstance(res.get("link"), dict) and "actual_loss" not in row:
        row["actual_loss"] = f"{res['link']['actual_loss']:.3e}"
    eng = r.get("engine", {})
    if "events_per_s" in eng:
        row["events/s"] = eng["events_per_s"]
        row["us/frame"] = eng.get("us_per_frame")
    row["wall s"] = eng.get("wall_s")
    return row


def cmd_sim(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    scenario, topology = _checked(args)
    specs, workers = _specs(args, scenario)
    from ..bench.common import Progress
    from ..progress import Reporter

    say = Progress()
    rep = Reporter("sim")
    say(f"netstack sim: {scenario.name} on {topology.name} ({args.mode}), {len(specs)} run(s)"
        + (f" on {args.scheduler}" if args.scheduler else f", {workers or 'one per CPU'} worker(s)"
           if len(specs) > 1 else ""))
    if args.mode == "sim" and topology.keys_path() is not None:
        # docs/sim.md "Topology files": virtual time runs the protocols without authentication
        say(f"note: {topology.name} names a key file; virtual time runs without it (no frame is sealed "
            "or opened: 'netstack bench auth' measures what keys cost)")
    t0 = time.perf_counter()
    results = _execute(args, specs, workers, say, rep)
    doc = {"command": "netstack sim", "scenario": scenario.name, "topology": topology.name,
           "runtime": args.mode, "runs": results, "wall_s": round(time.perf_counter() - t0, 3),
           "workers": workers, "scheduler": args.scheduler, **runs_validity(results)}
    return _report(args, scenario.name, doc, results, rep)


def runs_validity(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Several runs as one verdict (netstack.validity): valid when every run is; the failed
    checks of the others, each named after its run."""
    bad = [(r, c) for r in results if r.get("valid") is False for c in r.get("checks", []) if not c["ok"]]
    checks = [{**c, "name": f"seed {r.get('seed')}: {c['name']}"} for r, c in bad]
    return {"valid": not any(r.get("valid") is False for r in results), "checks": checks}


def _checked(args: argparse.Namespace) -> tuple[Any, Any]:
    """The scenario and topology the arguments name, and every option checked (CommandError)."""
    import os

    from ..sim import scenario as sc
    from ..topo.model import TopologyError

    if not args.scenario:
        raise CommandError("--scenario is required (see 'netstack sim --list')")
    if args.seed is not None and args.seeds is not None:
        raise CommandError("give --seed or --seeds, not both")
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers {args.workers}: must be >= 1")
    try:
        scenario = sc.get(args.scenario)
        topology = sc.resolve_topology(_topology_arg(args))
    except (sc.ScenarioError, TopologyError) as exc:
        raise CommandError(str(exc)) from None
    if args.mode not in scenario.runtimes:
        raise CommandError(f"scenario {scenario.name} runs on {', '.join(scenario.runtimes)}, not {args.mode}")
    if args.mode == "live":
        if os.geteuid() != 0:
            raise CommandError("--mode live builds namespaces and starts daemons: run as root")
        if args.scheduler:
            raise CommandError("--mode live runs on this machine's namespaces; --scheduler is for virtual time")
    return scenario, topology


def _topology_arg(args: argparse.Namespace) -> Any:
    """What each run resolves where it runs, read once (the text validated is the text that runs):
    a shipped topology by its name (a Dask worker finds it in its own netstack, wherever that is
    installed), a file by its text with its path (a worker on another machine has no copy of it:
    docs/sim.md "Across machines: a Dask cluster"). A file that cannot be read is a TopologyError."""
    from ..sim import scenario as sc

    if getattr(args, "topology_file", None) is None and args.topology is not None and Path(args.topology).is_file():
        args.topology_file = sc.TopologyFile.read(args.topology)
    return getattr(args, "topology_file", None) or args.topology


def _carried_files(points: dict[str, list[str]]) -> dict[str, str]:
    """A parameter value that names a file (a flow-size CDF: docs/sim.md "Workloads") becomes its
    absolute path, and the file's text goes with every run (``RunSpec.files``): a worker's working
    directory is not this one, and on another machine it has no copy of the file."""
    files: dict[str, str] = {}
    for key, values in points.items():
        for i, value in enumerate(values):
            path = Path(value)
            if value and not value.isdigit() and path.is_file():
                values[i] = str(path.absolute())
                try:
                    files[values[i]] = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as exc:
                    raise CommandError(f"--param {key}={value}: cannot read the file: {exc}") from None
    return files


def _specs(args: argparse.Namespace, scenario: Any) -> tuple[list[Any], int | None]:
    """Every run of the invocation (seeds x parameter values) and the worker count."""
    from ..sim import scenario as sc
    from ..sim.sweep import grid

    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed if args.seed is not None else 1]
    points = parse_params(args.param)
    for key, values in points.items():
        try:
            for v in values:
                scenario.check_params({key: v})
        except sc.ScenarioError as exc:
            raise CommandError(str(exc)) from None
    files = _carried_files(points)
    base = sc.RunSpec(args.scenario, _topology_arg(args), seeds[0], _duration(args.duration), {}, args.mode,
                      files=files)
    workers = 1 if args.mode == "live" else args.workers
    return grid(base, seeds, points), workers


def _execute(args: argparse.Namespace, specs: list[Any], workers: int | None, say: Any,
             rep: Any) -> list[dict[str, Any]]:
    """Run the specs: one in this process, or a sweep (processes or Dask); results in spec order.
    A heartbeat line every few seconds says it still runs while no run ends."""
    from ..sim import scenario as sc
    from ..sim.sweep import run_safely, sweep
    from ..topo.model import TopologyError

    finished = [0]

    def progress(done: int, total: int, r: dict[str, Any]) -> None:
        finished[0] = done
        what = f"error: {r['error']}" if "error" in r else (
            f"{r['engine'].get('events_per_s', '-')} events/s, {r['engine']['wall_s']} s")
        say(f"[{done}/{total}] seed {r.get('seed')} {r.get('params', {})}: {what}")

    one = len(specs) == 1 and args.scheduler is None
    what = f"{specs[0].label()} ({args.mode}) running" if one else \
        (lambda: f"{finished[0]}/{len(specs)} runs done")
    with rep.heartbeat(what):
        if one and args.mode == "live":
            try:
                return [sc.run(specs[0], progress=say)]
            except (sc.ScenarioError, TopologyError) as exc:
                raise CommandError(str(exc)) from None
        if one:
            results = [run_safely(specs[0])]
            progress(1, 1, results[0])
            return results
        try:
            return sweep(specs, workers=workers, scheduler=args.scheduler, progress=progress)
        except sc.ScenarioError as exc:
            raise CommandError(str(exc)) from None


def _report(args: argparse.Namespace, name: str, doc: dict[str, Any], results: list[dict[str, Any]],
            rep: Any) -> int:
    """Write the JSON document, print the table (or the JSON), end with the summary line on
    stderr (``rep``: a :class:`netstack.progress.Reporter`); exit status 1 if a run failed."""
    from ..bench.common import format_table, write_results

    path = write_results(args.results_dir, f"sim-{name}", doc)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        rows = [summary_row(r) for r in results]
        cols = list(dict.fromkeys(k for row in rows for k in row))
        print(format_table(cols, [[row.get(c, "") for c in cols] for row in rows]))
        print(f"\nresults: {path}")
    failed = [r for r in results if "error" in r]
    if failed:
        print(f"{len(failed)} of {len(results)} run(s) failed; first: {failed[0]['error']}", file=sys.stderr)
    rep.summary(summary_line(doc, results, str(path), rep.took()))
    return finish(doc, 1 if failed else 0)


def summary_line(doc: dict[str, Any], results: list[dict[str, Any]], path: str, took: str) -> str:
    """``netstack sim``'s closing line: what ran, how long, how many failed, the engine's speed
    (sim runs) and where the JSON went."""
    failed = sum(1 for r in results if "error" in r)
    rates = [r["engine"]["events_per_s"] for r in results
             if "error" not in r and isinstance(r.get("engine", {}).get("events_per_s"), int | float)]
    speed = f", {sum(rates) / len(rates):,.0f} events/s per run" if rates else ""
    return (f"{doc['scenario']} on {doc['topology']} ({doc['runtime']}), {len(results)} run(s) in {took}: "
            f"{len(results) - failed} ok, {failed} failed{speed}; JSON in {path}")
