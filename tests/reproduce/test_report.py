"""``netstack reproduce``'s runner and report (netstack/reproduce/runner.py, report.py, session.py):
a real benchmark run as a child process, its result read back into claims, the HTML and JSON
written, and rebuilt with ``--report-only``."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from netstack import protocols
from netstack.cli import main
from netstack.reproduce import report, runner, session
from netstack.reproduce.claims import (
    NOT_ATTEMPTED,
    REPRODUCED,
    Claim,
    Experiment,
    Figure,
    PaperSpec,
    Results,
    Shape,
)


def _headers_figures(results: Results) -> list[Figure]:
    """A stand-in paper: 'the fast codec decodes faster than Scapy', read off bench headers' JSON."""
    doc = results.get("headers") or {}
    recs = [r for r in doc.get("results") or [] if isinstance(r, dict)]
    speedups = [float(r["decode_speedup"]) for r in recs if "decode_speedup" in r]
    ours = min(speedups) if speedups else None
    claims = (Claim("decode speedup over Scapy <script>alert(1)</script>", paper=None, ours=ours,
                    check=None if ours is None else ours > 1.0, runtime="in process",
                    note="" if ours is not None else "bench headers did not run"),
              Claim("a number nobody measured", paper=3.0, ours=None, note="not built: nothing"))
    return [Figure("Tab. 1", "codecs", claims, Shape("faster than Scapy", ours is not None and ours > 1.0),
                   images=("bench-headers-nothing.png",))]


STANDIN = PaperSpec("standin", "A stand-in paper", (Experiment(
    "headers", quick=("--only", "linkguardian", "--min-time", "0.01"), full=("--only", "linkguardian"),
    quick_minutes=0.1, what="the codecs"),), _headers_figures, summary="for the tests")


def _broken(results: Results) -> list[Figure]:
    raise RuntimeError("a bug in a paper module")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        d = dict(attrs)
        if d.get("src"):
            self.srcs.append(d["src"] or "")
        if d.get("href"):
            self.hrefs.append(d["href"] or "")


def _tags(path: Path) -> _Tags:
    t = _Tags()
    t.feed(path.read_text())
    return t


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.setattr(session, "papers", lambda names: [STANDIN])
    monkeypatch.setattr(session, "machine", lambda quick: {"summary": "test machine", "checks": []})


def test_a_real_bench_run_becomes_a_report(standin, tmp_path):
    lines: list[str] = []
    doc = session.run(["standin"], "quick", tmp_path, None, False, "netstack reproduce standin", lines.append)
    assert (tmp_path / "index.html").is_file() and (tmp_path / "standin.html").is_file()
    assert (tmp_path / "standin" / "headers" / "bench-headers-latest.json").is_file()
    assert (tmp_path / "standin" / "headers" / "bench.log").read_text().startswith("$ ")
    assert any("[standin/headers] ok" in line for line in lines)
    rows = doc["papers"][0]["figures"][0]["claims"]
    assert [r["verdict"] for r in rows] == [REPRODUCED, NOT_ATTEMPTED]
    assert rows[0]["ours"] > 1.0
    assert doc["header"]["commit"] and doc["header"]["mode"] == "quick"
    assert json.loads((tmp_path / "reproduce.json").read_text())["counts"] == doc["counts"]
    page = (tmp_path / "standin.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "not drawn in this run" in page  # an image the bench did not write is no broken <img>
    # every link and image stays inside the report's directory: it reads offline
    for path in (tmp_path / "index.html", tmp_path / "standin.html"):
        t = _tags(path)
        for ref in t.srcs + t.hrefs:
            assert not re.match(r"^[a-z]+:|^//", ref), ref
            assert ref.startswith("#") or (tmp_path / ref.split("#")[0]).exists(), ref


def test_report_only_rebuilds_the_same_verdicts_without_running(standin, tmp_path):
    first = session.run(["standin"], "quick", tmp_path, None, False, "x", lambda m: None)
    log = tmp_path / "standin" / "headers" / "bench.log"
    before = log.stat().st_mtime_ns
    again = session.run(["standin"], "quick", tmp_path, None, True, "x", lambda m: None)
    assert log.stat().st_mtime_ns == before
    assert again["counts"] == first["counts"]
    assert again["papers"][0]["runs"][0]["status"] == "ok"
    # the header stays the run's (what the numbers are evidence of); the rebuild is added
    assert {k: again["header"][k] for k in ("utc", "commit", "seconds", "machine")} == \
        {k: first["header"][k] for k in ("utc", "commit", "seconds", "machine")}
    assert again["header"]["rebuilt"]["commit"] and "report rebuilt" in (tmp_path / "index.html").read_text()


def test_an_empty_directory_gives_not_attempted_rows(standin, tmp_path):
    doc = session.run(["standin"], "quick", tmp_path, None, True, "x", lambda m: None)
    assert doc["counts"][NOT_ATTEMPTED] == 2
    assert "not in this directory" in doc["papers"][0]["runs"][0]["status"]


def test_a_failing_bench_and_a_broken_module_cost_only_their_rows(monkeypatch, tmp_path):
    bad = PaperSpec("bad", "Broken", (Experiment("headers", quick=("--min-time", "-1")),), _broken)
    monkeypatch.setattr(session, "papers", lambda names: [bad, STANDIN])
    monkeypatch.setattr(session, "machine", lambda quick: {"summary": "m"})
    doc = session.run(["all"], "quick", tmp_path, None, False, "x", lambda m: None)
    bad_doc, good = doc["papers"]
    assert bad_doc["runs"][0]["exit_code"] == 2
    assert bad_doc["figures"][0]["id"] == "error" and "a bug in a paper module" in bad_doc["figures"][0]["title"]
    assert good["figures"][0]["claims"][0]["verdict"] == REPRODUCED


def test_live_experiments_are_skipped_with_the_reason_when_not_root(tmp_path):
    live = Experiment("headers", quick=("--min-time", "0.01"), needs_root=True)
    plan = runner.Plan([PaperSpec("p", "P", (live,), lambda r: [])], "quick", is_root=False)
    rec = runner.run_one(plan, plan.papers[0], live, tmp_path, lambda m: None)
    assert rec.exit_code is None and "needs root" in rec.status
    assert not (tmp_path / "p" / "headers" / "bench-headers-latest.json").exists()


def test_images_resolve_inside_the_papers_directories(tmp_path):
    (tmp_path / "standin" / "headers").mkdir(parents=True)
    (tmp_path / "standin" / "headers" / "a.png").write_bytes(b"\x89PNG")
    assert report.resolve_image(tmp_path, STANDIN, "a.png") == "standin/headers/a.png"
    assert report.resolve_image(tmp_path, STANDIN, "headers/a.png") == "standin/headers/a.png"
    assert report.resolve_image(tmp_path, STANDIN, "b.png") is None


def test_the_command_refuses_an_unknown_paper(capsys, tmp_path):
    assert main(["reproduce", "nosuch", "--out", str(tmp_path), "--report-only"]) == 2
    assert "no paper 'nosuch'" in capsys.readouterr().err


def test_every_paper_of_the_registry_has_a_module_with_a_paper():
    names = list(protocols.reproduce_modules())
    assert names == ["linkguardian", "onepipe", "tcd", "dta", "tcsack"]
    for spec in session.papers(names):
        assert spec.experiments and spec.title
        assert len({e.id for e in spec.experiments}) == len(spec.experiments)
