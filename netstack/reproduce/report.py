"""The report ``netstack reproduce`` writes: ``index.html`` (the run, the machine, each paper's
verdicts), one page per paper (``<paper>.html``: its figures, our images with the paper's series,
a row per claim), and ``reproduce.json`` (the same, for tools).

The pages are plain HTML with their style inline and images referenced inside the output
directory, so the directory can be copied anywhere and read with no network access.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .claims import NOT_ATTEMPTED, NOT_REPRODUCED, REPRODUCED, SHAPE_ONLY, VERDICTS, Figure, PaperSpec
from .runner import RunRecord

SCHEMA = "netstack.reproduce/1"

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 1400px; padding: 0 1em; color: #222; }
h1, h2, h3 { line-height: 1.2; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; text-align: left; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.v { font-weight: 600; white-space: nowrap; padding: 1px 6px; border-radius: 3px; }
.v-reproduced { background: #d4f4d4; } .v-shape-only { background: #fdf2c4; }
.v-not-reproduced { background: #f9d0d0; } .v-not-attempted { background: #e6e6e6; }
.muted { color: #666; } .small { font-size: 12px; }
figure { display: inline-block; margin: .4em 1em .4em 0; } figure img { max-width: 640px; border: 1px solid #ddd; }
dl.head { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; }
dl.head dt { font-weight: 600; } dl.head dd { margin: 0; }
"""


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int | float):
        av = abs(v)
        return f"{v:.3g}" if av and (av < 1e-3 or av >= 1e5) else f"{v:.4g}"
    return _e(v)


def badge(verdict: str) -> str:
    return f'<span class="v v-{verdict.replace(" ", "-")}">{_e(verdict)}</span>'


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def counts(figures: Sequence[Figure]) -> dict[str, int]:
    c = Counter(row["verdict"] for f in figures for row in f.rows())
    return {v: c.get(v, 0) for v in VERDICTS}


def _counts_cells(c: dict[str, int]) -> str:
    return "".join(f'<td class="num">{c[v]}</td>' for v in VERDICTS)


def resolve_image(out: Path, paper: PaperSpec, name: str) -> str | None:
    """The image's path relative to ``out``, or None when no experiment of the paper wrote it."""
    if "/" in name:
        path = out / paper.name / name
        return str(path.relative_to(out)) if path.is_file() else None
    for exp in paper.experiments:
        path = out / paper.name / exp.id / name
        if path.is_file():
            return str(path.relative_to(out))
    return None


def _header(head: dict[str, Any]) -> list[str]:
    m = head.get("machine") or {}
    rows = [("commit", head.get("commit", "unknown") + (" (with uncommitted changes)" if head.get("dirty") else "")),
            ("date (UTC)", head.get("utc", "")), ("mode", "--" + str(head.get("mode", ""))),
            ("total run time", f"{float(head.get('seconds', 0)) / 60:.1f} min"),
            ("command", head.get("command", "")),
            ("machine", m.get("summary", "netstack doctor did not run"))]
    if isinstance(head.get("rebuilt"), dict):
        rows.append(("report rebuilt", f"{head['rebuilt'].get('utc', '')} at commit {head['rebuilt'].get('commit', '')}"
                     " (--report-only: the numbers are the run's above, the verdicts the code's at this commit)"))
    if head.get("load_at_end"):
        rows.append(("load at the end", " ".join(str(x) for x in head["load_at_end"])
                     + " (1, 5, 15 min; the machine's other work during the run shows here)"))
    out = ['<dl class="head">'] + [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows] + ["</dl>"]
    checks = m.get("checks") or []
    if checks:
        out += ["<details><summary>netstack doctor: the machine's checks</summary><table>",
                "<tr><th>check</th><th>measured</th><th>limit</th><th>status</th></tr>"]
        out += [f"<tr><td>{_e(c.get('name'))}</td><td>{_e(c.get('measured'))}</td><td>{_e(c.get('limit'))}</td>"
                f"<td>{_e(c.get('status'))}</td></tr>" for c in checks if isinstance(c, dict)]
        out += ["</table></details>"]
    return out


def _runs_table(records: Sequence[RunRecord], links: bool) -> list[str]:
    out = ["<table><tr><th>experiment</th><th>what</th><th>command</th><th>status</th><th>time</th>"
           "<th>files</th></tr>"]
    for r in records:
        files = ""
        if links and r.result_file:
            files = f'<a href="{_e(r.result_file)}">JSON</a> · <a href="{_e(r.directory)}/bench.log">log</a>'
        out.append(f"<tr><td>{_e(r.paper)}/{_e(r.id)}</td><td>{_e(r.what)}</td>"
                   f"<td><code>netstack bench {_e(r.bench)} {_e(' '.join(r.args))}</code></td>"
                   f"<td>{_e(r.status)}</td><td class=\"num\">{r.seconds / 60:.1f} min</td><td>{files}</td></tr>")
    return [*out, "</table>"]


CLAIM_HEADERS = ("claim", "paper", "ours", "unit", "ratio", "scale", "at scale", "tolerance", "runtime",
                 "validity", "verdict", "why", "where")


def _claim_row(r: dict[str, Any], fig: Figure) -> str:
    """One claim's row; what its figure already says above the table (the scale, the paper's
    source) is not repeated in every row."""
    same_scale = not r["scale"] or r["scale"] == fig.note
    factor = f"factor {_num(r['scale_factor'])}"
    scale = factor if same_scale else f"{_e(r['scale'])} ({factor})"
    parts = [] if r["source"] == fig.paper_source else [f"paper: {_e(r['source'])}"]
    parts += [f"ours: {_e(r['ours_source'])}"] if r["ours_source"] else []
    where = "<br>".join(parts)
    why = _e(r["why"]) + (f'<br><span class="muted">{_e(r["note"])}</span>' if r["note"] and r["note"] != r["why"]
                          else "")
    ours = _num(r["ours"]) if r["ours"] is not None or r["check"] is None else _num(r["check"])
    cells = [_e(r["claim"]), _num(r["paper"]), ours, _e(r["unit"]), _num(r["ratio"]), scale, _num(r["at_scale"]),
             _e(r["tolerance"]["text"]), _e(r["runtime"]), _e(r["validity"]["text"]), badge(r["verdict"]), why,
             f'<span class="small">{where}</span>']
    num = {1, 2, 4, 6}
    return "<tr>" + "".join(f'<td class="num">{c}</td>' if i in num else f"<td>{c}</td>"
                            for i, c in enumerate(cells)) + "</tr>"


def _figure(out: Path, paper: PaperSpec, fig: Figure) -> list[str]:
    body = [f'<h3 id="{_e(fig.id)}">{_e(fig.id)}: {_e(fig.title)} {badge(fig.verdict())}</h3>']
    if fig.shape is not None:
        held = {True: "holds", False: "does not hold", None: "not measured"}[fig.shape.holds]
        body.append(f"<p>Shape: {_e(fig.shape.text)}: <b>{held}</b>"
                    + (f" ({_e(fig.shape.measured)})" if fig.shape.measured else "") + "</p>")
    if fig.note:
        body.append(f'<p class="muted">{_e(fig.note)}</p>')
    for name in fig.images:
        rel = resolve_image(out, paper, name)
        if rel is None:
            body.append(f'<p class="muted">image {_e(name)}: not drawn in this run</p>')
        else:
            body.append(f'<figure><a href="{_e(rel)}"><img src="{_e(rel)}" alt="{_e(fig.id)}: {_e(name)}"></a>'
                        f"<figcaption class=\"small\">{_e(name)}</figcaption></figure>")
    if fig.paper_source:
        body.append('<p class="small muted">The paper\'s numbers (every row, unless it names another source): '
                    f"{_e(fig.paper_source)}</p>")
    body.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in CLAIM_HEADERS) + "</tr>")
    body += [_claim_row(r, fig) for r in fig.rows()]
    return [*body, "</table>"]


def paper_page(out: Path, paper: PaperSpec, figures: Sequence[Figure], records: Sequence[RunRecord],
               head: dict[str, Any]) -> str:
    c = counts(figures)
    body = [f'<p><a href="index.html">&larr; all papers</a></p><h1>{_e(paper.title)}</h1>',
            f"<p>{_e(paper.summary)}</p>" if paper.summary else "",
            f'<p class="small muted">commit {_e(head.get("commit", ""))}, {_e(head.get("utc", ""))}, '
            f"--{_e(head.get('mode', ''))}</p>",
            "<table><tr>" + "".join(f"<th>{badge(v)}</th>" for v in VERDICTS) + f"</tr><tr>{_counts_cells(c)}</tr>"
            "</table>", "<h2>Runs</h2>", *_runs_table(records, links=True)]
    if paper.data_sources:
        body += ["<p>The paper's numbers come from: " + "; ".join(_e(s) for s in paper.data_sources) + "</p>"]
    body += ["<h2>Figures and claims</h2>", VERDICT_RULES]
    body += ["<ul>" + "".join(f'<li><a href="#{_e(f.id)}">{_e(f.id)}</a>: {_e(f.title)} {badge(f.verdict())}</li>'
                              for f in figures) + "</ul>"]
    for fig in figures:
        body += _figure(out, paper, fig)
    return _page(paper.title, body)


VERDICT_RULES = (f'<p class="small">Verdicts are computed, not written: {badge(REPRODUCED)} ours within the '
                 "claim's tolerance of the paper's value (at the stated scale: ours / paper / scale factor), or "
                 f"a statement that holds; {badge(SHAPE_ONLY)} outside the tolerance but the figure's shape (its "
                 f"trend) holds; {badge(NOT_REPRODUCED)} neither, or the run behind the number was not valid; "
                 f"{badge(NOT_ATTEMPTED)} no number (not built, not measured in this mode, or skipped: the note "
                 "says which).</p>")


def index_page(papers: Sequence[tuple[PaperSpec, Sequence[Figure]]], records: Sequence[RunRecord],
               head: dict[str, Any]) -> str:
    body = ["<h1>netstack: the five papers, reproduced here</h1>", *_header(head), "<h2>Papers</h2>",
            "<table><tr><th>paper</th>" + "".join(f"<th>{badge(v)}</th>" for v in VERDICTS) + "<th>figures</th></tr>"]
    for paper, figs in papers:
        body.append(f'<tr><td><a href="{_e(paper.name)}.html">{_e(paper.title)}</a></td>{_counts_cells(counts(figs))}'
                    f'<td class="num">{len(figs)}</td></tr>')
    body += ["</table>", VERDICT_RULES, "<h2>Runs</h2>", *_runs_table(records, links=True)]
    return _page("netstack reproduce", body)


def document(papers: Sequence[tuple[PaperSpec, Sequence[Figure]]], records: Sequence[RunRecord],
             head: dict[str, Any], out: Path) -> dict[str, Any]:
    """The report as one JSON document (``reproduce.json``, ``--json``)."""
    docs: list[dict[str, Any]] = []
    total: Counter[str] = Counter()
    for paper, figs in papers:
        total.update(counts(figs))
        fig_docs = []
        for f in figs:
            d = f.to_dict()
            d["images"] = [{"name": n, "path": resolve_image(out, paper, n)} for n in f.images]
            fig_docs.append(d)
        docs.append({"name": paper.name, "title": paper.title, "summary": paper.summary,
                     "data_sources": list(paper.data_sources), "counts": counts(figs), "figures": fig_docs,
                     "runs": [r.to_dict() for r in records if r.paper == paper.name]})
    return {"schema": SCHEMA, "header": head, "counts": {v: total.get(v, 0) for v in VERDICTS}, "papers": docs}


def write(out: Path, papers: Sequence[tuple[PaperSpec, Sequence[Figure]]], records: Sequence[RunRecord],
          head: dict[str, Any]) -> dict[str, Any]:
    """Write ``index.html``, a page per paper and ``reproduce.json`` into ``out``; the JSON document."""
    out.mkdir(parents=True, exist_ok=True)
    for paper, figs in papers:
        (out / f"{paper.name}.html").write_text(
            paper_page(out, paper, figs, [r for r in records if r.paper == paper.name], head))
    (out / "index.html").write_text(index_page(papers, records, head))
    doc = document(papers, records, head, out)
    (out / "reproduce.json").write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return doc

