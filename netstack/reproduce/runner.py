"""Runs the benches a paper needs, each into a directory of its own, and reads back what they wrote.

Every experiment (:class:`netstack.reproduce.claims.Experiment`) runs as a child process,
``python -m netstack.cli bench NAME ARGS... --results-dir OUT/<paper>/<experiment id>``: a bench that
fails, is interrupted or exits 3 (an invalid run) costs its own rows only, never the report. Its
stderr (the bench's progress lines) is shown prefixed with the experiment's name and kept, with
its stdout, in ``<dir>/bench.log``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .claims import Experiment, PaperSpec

Say = Callable[[str], None]
#: what an experiment's directory keeps of its run (``--report-only`` reads it back)
RECORD = "run.json"


@dataclass
class RunRecord:
    """What happened to one experiment."""

    paper: str
    id: str
    bench: str
    args: list[str]
    directory: str
    #: None: it did not run (``skipped`` says why)
    exit_code: int | None = None
    seconds: float = 0.0
    skipped: str = ""
    #: the result file it wrote (relative to the report's directory), "" if none
    result_file: str = ""
    what: str = ""

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped: " + self.skipped
        if self.exit_code is None:
            return "a result is there, with no record of its run" if self.result_file else "did not run"
        if self.exit_code == 0:
            return "ok"
        if self.exit_code == 3:
            return "invalid run (exit 3): its invalid rows are left out"
        return f"failed (exit {self.exit_code})"

    def to_dict(self) -> dict[str, Any]:
        return {"paper": self.paper, "id": self.id, "bench": self.bench, "args": self.args,
                "directory": self.directory, "exit_code": self.exit_code, "seconds": round(self.seconds, 1),
                "skipped": self.skipped, "result_file": self.result_file, "status": self.status, "what": self.what}


@dataclass
class Plan:
    """The experiments of the chosen papers in one mode, and what skips them."""

    papers: list[PaperSpec]
    mode: str
    workers: int | None = None
    is_root: bool = field(default_factory=lambda: os.geteuid() == 0)

    def items(self) -> list[tuple[PaperSpec, Experiment]]:
        return [(p, e) for p in self.papers for e in p.experiments]

    def skip_reason(self, exp: Experiment) -> str:
        if exp.needs_root and not self.is_root:
            return "needs root (namespaces and live daemons); run as root to include it"
        return ""

    def minutes(self) -> float:
        return sum(e.minutes(self.mode) for _, e in self.items() if not self.skip_reason(e))

    def argv(self, exp: Experiment, directory: Path) -> list[str]:
        argv = [sys.executable, "-m", "netstack.cli", "bench", exp.bench, *exp.args(self.mode),
                "--results-dir", str(directory)]
        if exp.workers and self.workers:
            argv += ["--workers", str(self.workers)]
        return argv


def result_path(directory: Path, bench: str) -> Path:
    """Where ``netstack bench NAME`` leaves its latest result (netstack.bench.output.write_results)."""
    return directory / f"bench-{bench}-latest.json"


def load_result(directory: Path, bench: str) -> dict[str, Any] | None:
    """The result document in ``directory``, or None (none written, unreadable, not an object)."""
    try:
        doc = json.loads(result_path(directory, bench).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def _stream(proc: subprocess.Popen[str], log: Any, prefix: str, say: Say) -> None:
    """Copy the child's output to the log, and its progress lines to ``say``, as they come."""
    assert proc.stdout is not None
    for line in proc.stdout:
        log.write(line)
        log.flush()
        text = line.rstrip()
        if text:
            say(f"{prefix} {text}")


def run_one(plan: Plan, paper: PaperSpec, exp: Experiment, out: Path, say: Say) -> RunRecord:
    directory = out / paper.name / exp.id
    rec = RunRecord(paper.name, exp.id, exp.bench, list(exp.args(plan.mode)),
                    str(directory.relative_to(out)), what=exp.what)
    rec.skipped = plan.skip_reason(exp)
    directory.mkdir(parents=True, exist_ok=True)
    result_path(directory, exp.bench).unlink(missing_ok=True)  # an earlier run's must not pass for this one's
    if rec.skipped:
        say(f"[{paper.name}/{exp.id}] skipped: {rec.skipped}")
        (directory / RECORD).write_text(json.dumps(rec.to_dict(), indent=2) + "\n")
        return rec
    argv = plan.argv(exp, directory)
    say(f"[{paper.name}/{exp.id}] netstack bench {exp.bench} {' '.join(argv[5:])} "
        f"(about {exp.minutes(plan.mode):g} min here)")
    t0 = time.monotonic()
    with open(directory / "bench.log", "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        # stderr into stdout: one stream, in order; the benches print progress on stderr
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              stdin=subprocess.DEVNULL, bufsize=1) as proc:
            try:
                _stream(proc, log, f"  [{paper.name}/{exp.id}]", say)
                rec.exit_code = proc.wait()
            except KeyboardInterrupt:
                proc.terminate()
                proc.wait(timeout=30)  # the benches tear their testbeds down on SIGTERM
                raise
    rec.seconds = time.monotonic() - t0
    if result_path(directory, exp.bench).exists():
        rec.result_file = str(result_path(directory, exp.bench).relative_to(out))
        _drop_stamped_copy(directory, exp.bench)
    say(f"[{paper.name}/{exp.id}] {rec.status} in {rec.seconds / 60:.1f} min")
    (directory / RECORD).write_text(json.dumps(rec.to_dict(), indent=2) + "\n")
    return rec


def _drop_stamped_copy(directory: Path, bench: str) -> None:
    """A bench writes its result twice, ``bench-NAME-<UTC>.json`` and ``-latest.json``; in a report's
    directory (one run each) the stamped copy only doubles the size of what gets checked in."""
    latest = result_path(directory, bench).read_bytes()
    for path in directory.glob(f"bench-{bench}-2*.json"):
        if path.read_bytes() == latest:
            path.unlink()


def collect(out: Path, paper: PaperSpec) -> dict[str, dict[str, Any] | None]:
    """The result documents a paper's experiments left in ``out`` (by experiment id)."""
    return {e.id: load_result(out / paper.name / e.id, e.bench) for e in paper.experiments}


def records_from_disk(out: Path, plan: Plan) -> list[RunRecord]:
    """For ``--report-only``: what each experiment's directory holds (its ``run.json``, written when it
    ran), without running anything."""
    recs = []
    for paper, exp in plan.items():
        directory = out / paper.name / exp.id
        rec = RunRecord(paper.name, exp.id, exp.bench, list(exp.args(plan.mode)),
                        str(directory.relative_to(out)), what=exp.what)
        try:
            saved = json.loads((directory / RECORD).read_text())
        except (OSError, ValueError):
            saved = None
        if isinstance(saved, dict):
            rec.args = [str(a) for a in saved.get("args") or []]
            rec.exit_code = saved.get("exit_code") if isinstance(saved.get("exit_code"), int) else None
            rec.seconds = float(saved.get("seconds") or 0.0)
            rec.skipped = str(saved.get("skipped") or "")
        elif not result_path(directory, exp.bench).exists():
            rec.skipped = "not in this directory (--report-only runs nothing)"
        if result_path(directory, exp.bench).exists():
            rec.result_file = str(result_path(directory, exp.bench).relative_to(out))
        recs.append(rec)
    return recs


def run_plan(plan: Plan, out: Path, say: Say) -> list[RunRecord]:
    items = plan.items()
    say(f"reproduce: {len(items)} experiment(s) of {len(plan.papers)} paper(s), --{plan.mode}, about "
        f"{plan.minutes():.0f} min here")
    records = []
    for n, (paper, exp) in enumerate(items, 1):
        say(f"reproduce: {n}/{len(items)}")
        records.append(run_one(plan, paper, exp, out, say))
    return records


def doc_map(records: list[RunRecord]) -> Mapping[str, RunRecord]:
    return {f"{r.paper}/{r.id}": r for r in records}
