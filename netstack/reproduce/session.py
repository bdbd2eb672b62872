"""One ``netstack reproduce`` run from start to end: the papers chosen, their experiments run (or,
with ``--report-only``, read back), the figures built, the report written, and its header: the
commit, the date, the machine (``netstack doctor``) and the total run time."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import protocols
from ..bench.output import loadavg
from ..errors import NetstackError
from . import report, runner
from .claims import Figure, PaperSpec, Results
from .runner import Plan, Say

#: the repository this package is in (its commit goes into the header)
ROOT = Path(__file__).resolve().parents[2]


class ReproduceError(NetstackError):
    """A paper's module is broken, or the output directory cannot be written."""


def papers(names: list[str]) -> list[PaperSpec]:
    """The papers named (``all``: every one, in the registry's order)."""
    modules = protocols.reproduce_modules()
    chosen = list(modules) if not names or "all" in names else names
    out = []
    for name in chosen:
        if name not in modules:
            raise ReproduceError(f"no paper {name!r}: choose from {', '.join(modules)} or all")
        spec = getattr(importlib.import_module(modules[name]), "PAPER", None)
        if not isinstance(spec, PaperSpec):
            raise ReproduceError(f"{modules[name]} has no PAPER (a netstack.reproduce.claims.PaperSpec)")
        out.append(spec)
    return out


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def commit(out: Path | None = None) -> tuple[str, bool]:
    """(the commit checked out, whether tracked files differ from it, the report's own directory
    ``out`` left aside: a report regenerated in place, e.g. docs/results, is not a change of the
    code); ("unknown", False) outside git."""
    head = _git("rev-parse", "HEAD")
    if not head:
        return "unknown (not a git checkout)", False
    aside = [f":(exclude){out.resolve()}"] if out is not None else []
    return head, bool(_git("status", "--porcelain", "--untracked-files=no", "--", str(ROOT), *aside))


def machine(quick: bool) -> dict[str, Any]:
    """``netstack doctor --json``'s document and a one-line summary; an error's text if it failed."""
    argv = [sys.executable, "-m", "netstack.cli", "doctor", "--json", "--quiet", *(["--quick"] if quick else [])]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        doc = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return {"summary": f"netstack doctor failed: {exc}"}
    if not isinstance(doc, dict):
        return {"summary": "netstack doctor printed no document"}
    cpu = doc.get("cpu") or {}
    load = (doc.get("load") or {}).get("loadavg")
    summary = (f"{cpu.get('cpus', '?')} CPUs ({cpu.get('usable_cpus', '?')} usable, a busy loop got "
               f"{cpu.get('core_share', '?')} of a core), load {load}; doctor's verdict {doc.get('verdict')}; "
               f"live experiments trustworthy here: {', '.join(doc.get('trustworthy') or []) or 'none'}"
               + (f"; not: {', '.join(doc['untrustworthy'])}" if doc.get("untrustworthy") else ""))
    return {"summary": summary, "checks": doc.get("checks"), "experiments": doc.get("experiments"),
            "verdict": doc.get("verdict")}


def _figures(paper: PaperSpec, results: Results) -> list[Figure]:
    try:
        return paper.figures(results)
    except Exception as exc:  # a paper module's bug must not cost the other papers' report
        return [Figure("error", f"{paper.name}'s module failed to read its results: {type(exc).__name__}: {exc}")]


def _saved_header(out: Path) -> dict[str, Any] | None:
    """The header of the report already in ``out`` (its ``reproduce.json``), or None."""
    try:
        doc = json.loads((out / "reproduce.json").read_text())
    except (OSError, ValueError):
        return None
    head = doc.get("header") if isinstance(doc, dict) else None
    return head if isinstance(head, dict) else None


def _header(out: Path, mode: str, command: str, chosen: list[PaperSpec], report_only: bool,
            say: Say) -> dict[str, Any]:
    """The run's header. ``--report-only`` keeps the header of the run that made the results (its
    commit, date, machine and time: what the numbers are evidence of) and adds when and at which
    commit the report was rebuilt."""
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    at, dirty = commit(out)
    saved = _saved_header(out) if report_only else None
    if saved is not None:
        return {**saved, "report_only": True, "rebuilt": {"utc": now, "commit": at, "dirty": dirty,
                                                          "command": command}}
    head: dict[str, Any] = {"utc": now, "mode": mode, "command": command, "papers": [p.name for p in chosen],
                            "commit": at, "dirty": dirty, "report_only": report_only}
    if report_only:
        head["machine"] = {"summary": "not recorded: the report was rebuilt from results with no record of "
                                      "the run that made them"}
    else:
        say("reproduce: measuring the machine (netstack doctor)")
        head["machine"] = machine(quick=mode == "quick")
    return head


def run(names: list[str], mode: str, out: Path, workers: int | None, report_only: bool, command: str,
        say: Say) -> dict[str, Any]:
    """Run (or read back) the chosen papers' experiments and write the report into ``out``."""
    chosen = papers(names)
    plan = Plan(chosen, mode, workers)
    t0 = time.monotonic()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReproduceError(f"cannot create {out}: {exc.strerror or exc}") from None
    head = _header(out, mode, command, chosen, report_only, say)
    records = runner.records_from_disk(out, plan) if report_only else runner.run_plan(plan, out, say)
    built = [(p, _figures(p, runner.collect(out, p))) for p in chosen]
    if not report_only:
        head["seconds"] = time.monotonic() - t0
        head["load_at_end"] = loadavg()  # the machine at the end too: other work that started meanwhile
    elif "seconds" not in head:
        head["seconds"] = sum(r.seconds for r in records)
    doc = report.write(out, built, records, head)
    say(f"reproduce: report in {out / 'index.html'} ({head['seconds'] / 60:.1f} min)")
    return doc
