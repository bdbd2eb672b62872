"""``netstack reproduce onepipe``: 1Pipe's evaluation (Li et al., "1Pipe: Scalable Total Order
Communication in Data Center Networks", SIGCOMM 2021, §7) through ``netstack bench onepipe``.

The bench already sets every point of the paper's Figs. 8-15 (the authors' own data files,
docs/data/onepipe-paper/) beside ours (its JSON's ``paper.rows``: netstack/bench/onepipe/paper.py).
This module turns those rows into claims, one per point, and adds each figure's shape: the trend
the paper's text draws from it (§7.2: "1Pipe/R has 25% lower throughput than 1Pipe/BE", the
sequencer's latency "soars when [its] throughput saturates", "R adds one RTT", latency rises past
a loss rate of 1e-5, recovery "increases proportionally with system scale").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..reproduce import read
from ..reproduce.claims import (
    IN_PROCESS,
    VIRTUAL_TIME,
    Claim,
    Experiment,
    Figure,
    PaperSpec,
    Results,
    Shape,
    Validity,
)

BENCH = "onepipe"
LIVE = "onepipe-live"
#: the bench's ablation: reliable with the commit barrier in beacons only (netstack/bench/onepipe/paper.py)
COMMIT_IN_BEACONS = "R-chip (commit in beacons)"
SOURCE = "the authors' data file docs/data/onepipe-paper/{file} (bojieli/1Pipe-paper, gnuplot/{file})"

Rows = list[dict[str, Any]]
Series = dict[float, float]


def _x(x: Any) -> float | None:
    try:
        v = float(str(x).split(":")[0])
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def series(rows: Rows, name: str, key: str = "ours", runtime: str = "sim") -> Series:
    """x -> value of one series (ours or the paper's), the points that have one."""
    out: Series = {}
    for r in rows:
        if r.get("series") != name or r.get("runtime", "sim") != runtime:
            continue
        x, v = _x(r.get("x")), r.get(key)
        if x is not None and isinstance(v, int | float) and not isinstance(v, bool):
            out[x] = float(v)
    return out


def _fmt(s: Series) -> str:
    return ", ".join(f"{x:g}: {v:.3g}" for x, v in sorted(s.items())) or "none"


# ---------------------------------------------------------------------------------------- shapes
def _r_below_be(rows: Rows) -> Shape:
    """Fig. 8a (§7.2): reliable below best effort at the largest P both were measured at."""
    be, r = series(rows, "1Pipe/BE"), series(rows, "1Pipe/R")
    text = "1Pipe/R's throughput below 1Pipe/BE's (the paper: 25% lower, R/BE 0.76 at 512)"
    common = sorted(set(be) & set(r))
    if not common:
        return Shape(text, None, "not measured")
    p = common[-1]
    return Shape(text, r[p] < be[p], f"R/BE {r[p] / be[p]:.3f} at P={p:g}")


def _crossover(rows: Rows) -> Shape:
    """Fig. 8b: the host sequencer's latency crosses above 1Pipe's as P grows."""
    text = "HostSeq's latency crosses above 1Pipe/chip's as processes grow (the paper: between 8 and 16)"
    seq, pipe = series(rows, "HostSeq"), series(rows, "1Pipe/chip")
    common = sorted(set(seq) & set(pipe))
    if len(common) < 2:
        return Shape(text, None, "not measured")
    above = [p for p in common if seq[p] > pipe[p]]
    holds = bool(above) and seq[common[0]] <= pipe[common[0]] * 1.5 and seq[common[-1]] > pipe[common[-1]]
    return Shape(text, holds, f"HostSeq above 1Pipe/chip from P={above[0]:g}" if above else "never above")


def _r_be_rtt(rows: Rows) -> Shape:
    """Fig. 9a (§7.2): R adds about one round trip over BE at every P. The paper's reliable 1Pipe
    carries the commit barrier in beacons, aggregated as the BE barrier is (§4); ours also sends a
    prompt COMMIT once a scattering settles, which saves part of that round trip, so the shape is
    judged on the bench's "commit in beacons" runs, and the prompt one is shown beside them."""
    text = "R-chip above BE-chip by about one RTT at every P (the paper: +5.2-10.5 us), within 2x, with the " \
           "commit barrier carried in beacons as the paper's"
    paper = series(rows, "R-chip - BE-chip", "paper")
    measured, holds = [], None
    for name, judged in ((f"{COMMIT_IN_BEACONS} - BE-chip", True), ("R-chip - BE-chip", False)):
        ours = series(rows, name)
        ratios = {p: ours[p] / paper[p] for p in sorted(set(ours) & set(paper)) if paper[p]}
        if not ratios:
            continue
        if judged:
            holds = all(0.5 <= q <= 2.0 for q in ratios.values())
        label = "commit in beacons" if judged else "prompt COMMIT"
        measured.append(f"{label}: " + ", ".join(f"P={p:g} {q:.2f}" for p, q in ratios.items()))
    return Shape(text, holds, "ours / the paper's difference, " + "; ".join(measured) if measured else "not measured")


def _onset(s: Series, rise: float = 1.10) -> float | None:
    """The smallest loss rate whose latency is ``rise`` x the lowest loss rate's."""
    if not s:
        return None
    base = s[min(s)]
    return next((x for x in sorted(s) if x > min(s) and s[x] > base * rise), None)


#: Fig. 9b's series again from the loaded runs (netstack/bench/onepipe/paper.py FIG9B_LOADED, the
#: same names: tests/reproduce/test_onepipe.py holds them equal)
FIG9B_LOADED = {"BE-chip": "BE-chip loaded", "R-chip": "R-chip loaded"}


def _rise_past(rows: Rows) -> Shape:
    """Fig. 9b (§7.2): latency rises once loss passes 1e-5, for BE and R. Each is judged on its
    loaded series when the run has one (at least 3 points: the load the paper's own Fig. 9b
    numbers imply, docs/onepipe-paper.md), else on the idle one; the one not judged is said too."""
    text = ("latency rises (>10%) from about the same loss rate as the paper's (within a decade), BE-chip and "
            "R-chip (their loaded series when measured)")
    measured, holds = [], True
    for name in ("BE-chip", "R-chip"):
        loaded = FIG9B_LOADED[name]
        pts = len(series(rows, loaded))
        judged = loaded if pts >= 3 else name
        for each in (judged, *(x for x in (name, loaded) if x != judged)):
            ours = series(rows, each)
            if len(ours) < 3:
                if each == judged:
                    return Shape(text, None, "not measured")
                if ours:
                    measured.append(f"{each}: {len(ours)} point(s), too few (not judged)")
                continue
            mine, theirs = _onset(ours), _onset(series(rows, each, "paper"))
            measured.append(f"{each}: ours from {mine if mine is not None else 'never'}, the paper's from {theirs}"
                            + ("" if each == judged else " (not judged)"))
            if each == judged:
                holds = holds and mine is not None and theirs is not None and abs(math.log10(mine / theirs)) <= 1.0
    return Shape(text, holds, "; ".join(measured))


def _grows(name: str, text: str, least: float) -> Callable[[Rows], Shape]:
    """The series grows with x by at least ``least`` x from its first point to its last."""
    def shape(rows: Rows) -> Shape:
        s = series(rows, name)
        if len(s) < 2:
            return Shape(text, None, "not measured")
        lo, hi = s[min(s)], s[max(s)]
        growth = hi / lo if lo else math.inf
        return Shape(text, growth >= least, f"{name} x{growth:.2f} from {min(s):g} to {max(s):g}")
    return shape


def _direction(name: str, text: str) -> Callable[[Rows], Shape]:
    """Ours moves the paper's way from the first x to the last (a change under 10% counts as flat)."""
    def sign(s: Series) -> int:
        a, b = s[min(s)], s[max(s)]
        return 0 if a and abs(b / a - 1) < 0.10 else (1 if b > a else -1)

    def shape(rows: Rows) -> Shape:
        ours, paper = series(rows, name), series(rows, name, "paper")
        if len(ours) < 2 or len(paper) < 2:
            return Shape(text, None, "not measured")
        words = {1: "rises", 0: "flat", -1: "falls"}
        return Shape(text, sign(ours) == sign(paper),
                     f"{name}: ours {words[sign(ours)]} ({_fmt(ours)}), the paper's {words[sign(paper)]}")
    return shape


def _gap_grows(a: str, b: str, text: str) -> Callable[[Rows], Shape]:
    """``a`` over ``b`` grows from the smallest x to the largest, and ``a`` is above at the largest."""
    def shape(rows: Rows) -> Shape:
        sa, sb = series(rows, a), series(rows, b)
        common = sorted(p for p in set(sa) & set(sb) if sb[p])
        if len(common) < 2:
            return Shape(text, None, "not measured")
        gap = {p: sa[p] / sb[p] for p in common}
        return Shape(text, gap[common[-1]] > gap[common[0]] and gap[common[-1]] > 1.0,
                     f"{a} / {b}: " + ", ".join(f"{p:g}: {g:.2f}x" for p, g in gap.items()))
    return shape


SHAPES: Mapping[str, Callable[[Rows], Shape]] = {
    "8a": _r_below_be,
    "8b": _crossover,
    "9a": _r_be_rtt,
    "9b": _rise_past,
    "10": _grows("ToR Switch", "a ToR failure's recovery grows with hosts (the paper: 55 -> 458 us, x8.3)", 2.0),
    "11": _direction("Throughput", "throughput falls as the reordering delay grows (the paper: to 0.70 at 125 us)"),
    "12a": _direction("BE-host", "latency rises with background flows"),
    "12b": _direction("BE-host", "latency rises with oversubscription"),
    "13b": _direction("100 Gbps", "beacon bandwidth falls as the interval grows"),
    "14a": _gap_grows("1Pipe/YCSB", "FaRM/YCSB", "1Pipe's lead over the 2PC baseline (FaRM's) grows with processes "
                      "under YCSB (the paper: 2.1x at 1 to 19x at 512)"),
}


# ---------------------------------------------------------------------------------------- claims
def _validity(row: Mapping[str, Any], live_runs: Sequence[Mapping[str, Any]]) -> Validity:
    """A live row's number comes from the valid live runs only (the bench leaves the others out of
    every row: netstack/bench/onepipe/paper.py), so those are the runs behind it."""
    if row.get("runtime") == "live":
        valid = [r for r in live_runs if r.get("valid") is True]
        if not valid:
            return Validity.of_runs(live_runs) if live_runs else Validity(None, (), "the live runs kept no checks")
        v = Validity.of_runs(valid)
        left = len(live_runs) - len(valid)
        note = f"{len(valid)} valid run(s)" + (f"; {left} invalid left out" if left else "")
        return Validity(v.valid, v.checks, note)
    return IN_PROCESS if str(row.get("source", "")).startswith(("in process", "computed")) else VIRTUAL_TIME


def _runtime(row: Mapping[str, Any]) -> str:
    src = str(row.get("source", ""))
    if row.get("runtime") == "live":
        return "live"
    return "in process" if src.startswith("in process") else "computed" if src.startswith("computed") else "sim"


def _claim(row: Mapping[str, Any], file: str, live_runs: Sequence[Mapping[str, Any]]) -> Claim:
    x = row.get("x")
    at = f" (ours at {row['x_ours']})" if row.get("x_ours") not in (None, x) else ""
    factor = row.get("scale_factor")
    paper = row.get("paper")
    ours = row.get("ours")
    return Claim(claim=f"{row.get('series')} at {x}{at}",
                 paper=float(paper) if isinstance(paper, int | float) else None,
                 ours=float(ours) if isinstance(ours, int | float) else None,
                 source=SOURCE.format(file=file), runtime=_runtime(row), scale=str(row.get("scale", "")),
                 scale_factor=float(factor) if isinstance(factor, int | float) and factor else 1.0,
                 validity=_validity(row, live_runs), note=str(row.get("note") or ""),
                 ours_source=str(row.get("source") or ""))


def _live_runs(doc: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    return [r for r in read.rows(read.get(doc, "runs")) if r.get("mode") == "live"]


def _paper_section(results: Results) -> tuple[Rows, dict[str, Any], list[str], list[Mapping[str, Any]]]:
    """The rows of both runs (sim and live), the figures' summary, the plots, the live runs."""
    rows: Rows = []
    summary: dict[str, Any] = {}
    plots: list[str] = []
    live: list[Mapping[str, Any]] = []
    for key in (BENCH, LIVE):
        doc = results.get(key)
        paper = doc.get("paper") if isinstance(doc, Mapping) else None
        if not isinstance(paper, Mapping):
            continue
        got = read.rows(paper.get("rows"))
        # the sim run's rows first; the live run adds only its live rows
        rows += got if key == BENCH else [r for r in got if r.get("runtime") == "live"]
        if isinstance(paper.get("summary"), Mapping):
            summary = {**paper["summary"], **summary}
        listed = paper.get("plots") if key == BENCH else None
        plots += [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
        live += _live_runs(doc)
    return rows, summary, plots, live


def figures(results: Results) -> list[Figure]:
    from ..bench.onepipe import paper as bench_paper  # the figures' list and titles, without a run

    rows, summary, plots, live = _paper_section(results)
    out = []
    for fig in bench_paper.FIGURES:
        mine = [r for r in rows if r.get("figure") == fig.id]
        number = "".join(ch for ch in fig.id if ch.isdigit())
        claims = tuple(_claim(r, fig.file, live) for r in mine)
        if not claims:
            why = ("bench onepipe did not run or wrote no paper rows" if not rows
                   else "no rows for this figure in this run")
            claims = (Claim(claim=f"{fig.title} (every point)", paper=None, ours=None,
                            source=SOURCE.format(file=fig.file), note=f"not attempted: {why}"),)
        shape = SHAPES[fig.id](mine) if fig.id in SHAPES and mine else None
        title = read.get(summary, fig.id, "title")
        out.append(Figure(fig.id, title if isinstance(title, str) else fig.title, claims, shape,
                          images=tuple(p for p in plots if p.endswith(f"-fig{number}.png")),
                          paper_source=SOURCE.format(file=fig.file), note=fig.scale))
    return out


PAPER = PaperSpec(
    name="onepipe",
    title="1Pipe: Scalable Total Order Communication in Data Center Networks (SIGCOMM 2021)",
    experiments=(
        # --quick: points of at most 64 processes (the 512-process runs cost 10-50 s each), virtual
        # runs half as long (--duration 1.5 of the default 3)
        Experiment(BENCH, quick=("--mode", "sim", "--quick", "--duration", "1.5"), full=("--mode", "sim"),
                   workers=True, quick_minutes=3.0, full_minutes=24.0,
                   what="every section in virtual time (Figs. 8-14), the paper's points beside ours"),
        Experiment(BENCH, key=LIVE, quick=("--mode", "live", "--duration", "1"), full=("--mode", "live"),
                   needs_root=True, quick_minutes=1.5, full_minutes=3.0,
                   what="the live sections: Fig. 8b's latency and Fig. 9b's loss on the shipped topology (1000x)"),
    ),
    figures=figures,
    summary="Total order for scatterings through switch-aggregated barriers. Every point of the paper's Figs. 8-15 "
            "(the authors' data files) beside ours: virtual time at the paper's scale (100 Gbit/s, T_beacon 3 us), "
            "a model of its testbed with a host stack calibrated on one number (its 1-hop unordered latency), and "
            "live runs on the shipped topology at 1000x. docs/onepipe-paper.md explains each gap.",
    data_sources=("the authors' figure data, bojieli/1Pipe-paper gnuplot/* at commit "
                  "dce626abe9a089c05a4420ac6228a31e4cc1e203, copied to docs/data/onepipe-paper/ (SOURCE.md)",),
)
