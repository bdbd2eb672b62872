"""``netstack bench onepipe``'s "paper vs ours": every point of the 1Pipe paper's evaluation
figures (Li et al., "1Pipe: Scalable Total Order Communication in Data Center Networks", SIGCOMM
2021, §7: Figs. 8-15, from the authors' data files, :mod:`netstack.onepipe.paperdata`) beside
what this run measured at that point.

One row per paper point: ``figure``, ``series``, ``x`` (the paper's), ``paper``, ``ours`` (or
None, and ``note`` says why: "not built", "not measured in this run", "not measured at this x"),
``ratio`` = ours / paper, ``scale`` (how our setup maps to the paper's at that point, in words),
``scale_factor`` (the ratio the scale alone predicts: 1.0 where the setups are alike; for a rate
we offer below what the paper delivers, our offered rate over the paper's value), ``at_scale`` =
ratio / scale_factor, ``differs_2x`` (at_scale outside [0.5, 2]: docs/onepipe-paper.md says why),
``x_ours`` (the x our number was measured at when it is not the paper's, e.g. loss 0 for the
paper's lossless 1e-8: matched explicitly, never interpolated), ``source`` (which of the bench's
rows), ``runtime`` (sim or live). Our rows are the JSON sections ``netstack bench onepipe`` writes
(``fig8``, ``fig9a``, ``fig9b``, ``reliable``, ``fig10``; ``kv``, the onepipe-kv scenario's
results, when the bench has one), so :func:`compare` also works on saved result files:
``python -m netstack.bench.onepipe.paper RESULT.json...`` (:func:`main`) prints the tables of
several runs, their sections merged. :func:`paper_markdown` writes a table per figure,
:func:`plot_paper` a PNG per figure (the paper dashed, ours solid, same axes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headers.onepipe import OnePipeHeader

from ...ethernet import UDP_HEADERS_BYTES, wire_bytes
from ...onepipe import cpucost, paperdata
from ...onepipe.paperdata import PaperTable
from ..output import format_table
from ..plot import pyplot, save
from .reliable import fig10_defaults
from .sim import FIG9A_PROCS, FIG9B_LOADED_MSGS_PER_S

Row = dict[str, Any]
Figs = dict[str, Any]
#: the netstack package's directory (what :func:`_built` looks in)
PACKAGE_ROOT = Path(__file__).resolve().parents[2]

#: our beacon on the wire: Ethernet, IPv4, UDP and the 24-byte 1Pipe header, plus FCS, preamble and gap
BEACON_WIRE_BYTES = wire_bytes(UDP_HEADERS_BYTES + OnePipeHeader.SIZE)
#: the paper's idle-latency setting (its §7.1: PTP's mean clock skew 0.3 us, T_beacon 3 us): the
#: fig9a row that matches it
PAPER_SKEW_US = 0.3
PAPER_T_BEACON_US = 3.0
KV_PENDING = ("not measured in this run: the transactional KV store (§7.3) is not a section of netstack bench "
              "onepipe")


@dataclass(frozen=True)
class Ours:
    """Our number for one paper point, or why there is none."""

    value: float | None
    reason: str = ""
    x: str | None = None
    source: str = ""
    note: str = ""
    scale_factor: float | None = 1.0
    runtime: str = "sim"


@dataclass(frozen=True)
class Figure:
    """One panel of the paper: its data file, axes, and how our rows answer its points."""

    id: str
    title: str
    file: str
    x_label: str
    y_label: str
    scale: str
    ours: Callable[[str, str, float, Figs], Ours]
    series: tuple[str, ...] = ()
    logx: bool = False
    logy: bool = False
    derived: tuple[tuple[str, str, str], ...] = field(default_factory=tuple)
    #: (our series, the paper's column it answers): the column's points once more, from other runs
    #: of ours (Fig. 9b's R-chip at the paper's Fig. 8a load beside the idle one)
    aliases: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def number(self) -> str:
        return self.id.rstrip("abc")


# ---------------------------------------------------------------------------- our rows
def _num(x: str) -> float | None:
    return paperdata.x_value(x)


def _pick(rows: Iterable[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for r in rows:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def _built(module: str) -> bool:
    """The module's file is in the tree (looked up, not imported: building it must not run it)."""
    path = PACKAGE_ROOT.joinpath(*module.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _absent(figs: Figs, section: str, what: str, module: str | None = None) -> str:
    if section not in figs:
        return f"not measured in this run (section {section} not selected)"
    if module is not None and not _built(module):
        return f"not built ({what})"
    return f"not measured in this run ({what} is not in this run's {section} rows)"


def _at(rows: list[dict[str, Any]], key: str, x: str, **match: Any) -> dict[str, Any] | str:
    """The row with ``key`` == x (numerically) among ``rows`` matching ``match``, or why not."""
    cand = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    if not cand:
        return ""
    xv = _num(x)
    hit = next((r for r in cand if xv is not None and r.get(key) == xv), None)
    if hit is None:
        have = ", ".join(f"{r[key]:g}" for r in sorted(cand, key=lambda r: r[key]))
        return f"not measured at {key} {x} (this run: {have})"
    return hit


def _value(row: dict[str, Any], key: str, scale: float = 1.0) -> float | None:
    v = row.get(key)
    return None if v is None else v / scale


def _rate_factor(row: dict[str, Any], paper: float) -> float:
    """The ratio a rate should show from the offered load alone: we cannot deliver more than we
    offer, so below the paper's delivered rate the expected ratio is offered / paper."""
    offered = row.get("offered_per_proc")
    return 1.0 if not offered or not paper else min(1.0, offered / 1e6 / paper)


# ------------------------------------------------------------------------- Fig. 8a / 8b
#: paper series -> (our fig8 system, the module that builds it (None: always there))
FIG8_SYSTEMS = {"1Pipe/BE": ("1pipe", None), "1Pipe/chip": ("1pipe", None),
                "1Pipe/R": ("1pipe_reliable", None), "HostSeq": ("sequencer", None),
                "SwitchSeq": ("switchseq", "netstack.onepipe.baselines.switchseq"),
                "Token": ("token", "netstack.onepipe.baselines.token"),
                "Lamport": ("lamport", "netstack.onepipe.baselines.lamport")}


def _fig8_row(series: str, x: str, figs: Figs) -> dict[str, Any] | str:
    system, module = FIG8_SYSTEMS[series]
    rows = figs.get("fig8", {}).get("sim", [])
    got = _at(rows, "procs", x, system=system)
    if got == "":
        return _absent(figs, "fig8", f"system {system!r}", module)
    return got


def _has(figs: Figs, system: str) -> bool:
    """Whether this run's Fig. 8 has any row of ``system``."""
    return any(r.get("system") == system for r in figs.get("fig8", {}).get("sim", []))


def _reliable_fallback(x: str, figs: Figs, key: str, scale: float = 1.0, paper: float | None = None) -> Ours | None:
    """Reliable 1Pipe from the ``reliable`` section (same load as fig8) when fig8 has no
    ``1pipe_reliable`` rows; ``paper``: a rate's paper value (its scale factor)."""
    got = _at(figs.get("reliable", {}).get("sim", []), "procs", x, system="reliable")
    if isinstance(got, str):
        return None
    return Ours(_value(got, key, scale), source=f"reliable sim, system 'reliable', {key}",
                note="from the reliable section (fig8's load, 2 random receivers)",
                scale_factor=1.0 if paper is None else _rate_factor(got, paper))


def fig8a_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    got = _fig8_row(series, x, figs)
    if isinstance(got, str) and series == "1Pipe/R" and not _has(figs, "1pipe_reliable"):
        return _reliable_fallback(x, figs, "delivered_per_proc", 1e6, paper) or Ours(None, got)
    if isinstance(got, str):
        return Ours(None, got)
    note = f"offered {got['offered_per_proc'] / 1e6:.3g} M msg/s/proc" if got.get("offered_per_proc") else ""
    if got.get("cpu_model"):
        note += ", CPU model on"
    return Ours(_value(got, "delivered_per_proc", 1e6), source=f"fig8 sim, system {got['system']!r}",
                scale_factor=_rate_factor(got, paper), note=note)


def fig8b_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """1Pipe's series from the fig9a-testbed section's idle runs when this run has them (the
    paper's Fig. 8b 1Pipe/chip and 1Pipe/host values are its Fig. 9a idle ones, point for point:
    both files hold 4.50, 5.67, 7.03, 7.37 and 5.84, 10.23, 14.58, 15.97 at 8, 16, 32, 512), else
    fig8's loaded runs (chip only); the baselines from fig8."""
    if series in ("1Pipe/chip", "1Pipe/host"):
        tb = _testbed("BE-" + series.split("/")[1], x, figs)
        if tb is not None and (tb.value is not None or series == "1Pipe/host"):
            return tb
        if series == "1Pipe/host":
            return Ours(None, _absent(figs, "fig9a-testbed", "the paper's testbed"))
    got = _fig8_row(series, x, figs)
    if isinstance(got, str) and series == "1Pipe/R" and not _has(figs, "1pipe_reliable"):
        return _reliable_fallback(x, figs, "mean_us") or Ours(None, got)
    if isinstance(got, str):
        return Ours(None, got)
    return Ours(_value(got, "mean_us"), source=f"fig8 sim, system {got['system']!r}, mean_us")


# ------------------------------------------------------------------------- Fig. 9a / 9b
def _idle_row(figs: Figs) -> dict[str, Any] | None:
    """Fig. 9a's point at the paper's own setting (idle, T_beacon 3 us, skew 0.3 us)."""
    return _pick(figs.get("fig9a", {}).get("rows", []), t_beacon_us=PAPER_T_BEACON_US, skew_us=PAPER_SKEW_US,
                 switch_beacons="prompt")


#: Fig. 9a's x the bench never runs, matched by hand to the nearest P it does run idle or lightly loaded
FIG9A_AT = {"512": "128"}
LIGHT = "the reliable section's light load (0.2 M msg/s/proc, no CPU model), not idle"


def _light(x: str, figs: Figs, system: str) -> tuple[dict[str, Any] | None, str]:
    """The ``reliable`` section's row of ``system`` ("best effort" / "reliable") at x (or the P
    :data:`FIG9A_AT` matches it to), and why there is none."""
    xo = FIG9A_AT.get(x, x)
    got = _at(figs.get("reliable", {}).get("sim", []), "procs", xo, system=system)
    if isinstance(got, dict):
        return got, ""
    return None, got or _absent(figs, "reliable", system)


def _fig9a_be(x: str, figs: Figs, unordered: bool) -> Ours:
    """Idle best effort: Fig. 9a's own point at P = 32, fig9b's lossless (idle) run for the
    paper's 512, the reliable section's best effort (lightly loaded) at the rest."""
    key = "unordered_mean_us" if unordered else "latency_mean_us"
    idle = _idle_row(figs)
    if idle is not None and idle.get("procs", FIG9A_PROCS) == _num(x):
        return Ours(idle[key], source=f"fig9a sim (idle, T_beacon 3 us, skew 0.3 us), {key}")
    lossless = _pick(figs.get("fig9b", {}).get("sim", []), loss=0.0)
    if x in FIG9A_AT and lossless is not None:
        k = "unordered_mean_us" if unordered else "mean_us"
        return Ours(lossless.get(k), x=str(lossless["procs"]), source=f"fig9b sim, loss 0 (idle), {k}",
                    note=f"ours idle at P = {lossless['procs']}, the bench's largest idle run")
    row, why = _light(x, figs, "best effort")
    if row is None:
        return Ours(None, why)
    k = "unordered_mean_us" if unordered else "mean_us"
    return Ours(row.get(k), x=FIG9A_AT.get(x), source=f"reliable sim, best effort, {k}", note=LIGHT)


def _fig9a_r(x: str, figs: Figs) -> Ours:
    """Reliable 1Pipe lightly loaded (the reliable section: fig8's saturated cores would add
    their queueing, which the paper's idle Fig. 9a has not)."""
    row, why = _light(x, figs, "reliable")
    if row is None:
        return Ours(None, why)
    return Ours(row.get("mean_us"), x=FIG9A_AT.get(x), source="reliable sim, reliable, mean_us", note=LIGHT)


def _fig9a_r_be(x: str, figs: Figs) -> Ours:
    """What reliable adds: the reliable section's pair at one P (same load, same run)."""
    r, why = _light(x, figs, "reliable")
    b, why_b = _light(x, figs, "best effort")
    if r is None or b is None:
        return Ours(None, why or why_b)
    if r.get("mean_us") is None or b.get("mean_us") is None:
        return Ours(None, "no delivery in one of the two runs")
    return Ours(r["mean_us"] - b["mean_us"], x=FIG9A_AT.get(x), source="reliable sim: R mean_us - BE mean_us",
                note=LIGHT)


#: our reliable 1Pipe with its commit barrier in the hosts' beacons only (no prompt COMMIT: the
#: scenario's prompt_commit off), compared with the paper's R-chip - BE-chip as a derived series
COMMIT_IN_BEACONS = "R-chip (commit in beacons)"
#: Fig. 9a's series -> the fig9a-testbed rows' system (netstack/bench/onepipe/testbed.py)
TESTBED_SERIES = {"BE-chip": "BE-chip", "R-chip": "R-chip", "BE-host": "BE-host", "R-host": "R-host",
                  "unorder": "BE-chip", COMMIT_IN_BEACONS: "R-chip, commit in beacons"}


def _testbed(series: str, x: str, figs: Figs) -> Ours | None:
    """Fig. 9a from the model of the paper's testbed (the ``fig9a-testbed`` section: fat tree,
    1/3/5 hops, the calibrated host stack), when this run has it; derived series from one P's rows."""
    rows = figs.get("fig9a-testbed", {}).get("rows", [])
    if not rows:
        return None
    if " - " in series:
        a, b = series.split(" - ")
        oa, ob = _testbed(a, x, figs), _testbed(b, x, figs)
        if oa is None or ob is None or oa.value is None or ob.value is None:
            return Ours(None, (oa and oa.reason) or (ob and ob.reason) or "not measured at this P")
        return Ours(oa.value - ob.value, source=f"fig9a-testbed sim: {a} - {b}", note=oa.note)
    got = _at(rows, "procs", x, system=TESTBED_SERIES[series])
    if not isinstance(got, dict):
        return Ours(None, got or f"not measured in this run (no fig9a-testbed rows of {series})")
    key = "unordered_mean_us" if series == "unorder" else "mean_us"
    return Ours(got.get(key), source=f"fig9a-testbed sim, {got['system']}, {key}",
                note=f"{got.get('hops')} hops, host stack {got.get('nic_ns')} ns each way")


def fig9a_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    tb = _testbed(series, x, figs)
    if tb is not None:
        return tb
    if series in ("BE-chip", "unorder"):
        return _fig9a_be(x, figs, unordered=series == "unorder")
    if series == "R-chip":
        return _fig9a_r(x, figs)
    if series == "BE-chip - unorder":
        be, un = _fig9a_be(x, figs, False), _fig9a_be(x, figs, True)
        if be.value is None or un.value is None:
            return Ours(None, be.reason or un.reason or "no unordered baseline at this P")
        return Ours(be.value - un.value, x=be.x, source=be.source.replace("latency_mean_us", "overhead") +
                    " - unordered", note=be.note)
    if series == "R-chip - BE-chip":
        return _fig9a_r_be(x, figs)
    # the host-delegate series and the ablation: the fig9a-testbed section's only
    return Ours(None, _absent(figs, "fig9a-testbed", "the paper's testbed"))


def _loss_match(x: str) -> tuple[str, str]:
    """The paper's 1e-8 is its lossless point (7.37 us = Fig. 9a's BE-chip at 512): ours at loss 0."""
    return ("0", "the paper's 1e-8 matched to our loss 0") if x == "1e-8" else (x, "")


#: Fig. 9b's series -> our fig9b rows' (system, variant): best effort or reliable 1Pipe, on the switch
#: chip or with host delegates
FIG9B_SYSTEMS = {"BE-chip": ("1pipe", "chip"), "unorder": ("1pipe", "chip"), "BE-chip - unorder": ("1pipe", "chip"),
                 "R-chip": ("1pipe_reliable", "chip"), "BE-host": ("1pipe", "host"),
                 "R-host": ("1pipe_reliable", "host")}
#: our BE-chip and R-chip again, loaded (the fig9b section's rows marked ``loaded``,
#: netstack.bench.onepipe.sim.FIG9B_LOADS: the paper's Fig. 8a throughput as far as our host links
#: carry it, the load the paper's Fig. 9b numbers imply, docs/onepipe-paper.md), answering the
#: paper's BE-chip and R-chip columns beside our idle series
BE_CHIP_LOADED = "BE-chip loaded"
R_CHIP_LOADED = "R-chip loaded"
FIG9B_LOADED = {BE_CHIP_LOADED: "BE-chip", R_CHIP_LOADED: "R-chip"}


def _fig9b_row(system: str, variant: str, x: str, figs: Figs, runtime: str,
               loaded: bool = False) -> tuple[dict[str, Any] | str, str, str]:
    """Our fig9b row of ``system`` at loss x, the x it was measured at, and a note: a row with the
    loss at the receivers (the paper's placement, 1Pipe §7.1) at x itself when the run has them,
    else a link-loss row (older results, the live runs; best effort only), 1e-8 matched to loss 0.
    The idle rows, or with ``loaded`` the rows marked ``loaded`` (the highest such load; older
    results' 10x rows are not marked: they are not the paper's load)."""
    rows = [r for r in figs["fig9b"].get(runtime, [])
            if r.get("system", "1pipe") == system and r.get("variant", "chip") == variant]
    if loaded:
        rows = [r for r in rows if r.get("loaded") is True]
        if not rows:
            return f"not measured in this run (no loaded {runtime} fig9b rows)", x, ""
        top = max(r.get("load", 1.0) for r in rows)
        rows = [r for r in rows if r.get("load", 1.0) == top]
        if not any(r.get("valid", True) for r in rows):
            return f"not measured in this run (its loaded {runtime} fig9b runs were invalid)", x, ""
    else:
        rows = [r for r in rows if r.get("load", 1.0) == 1.0 and not r.get("loaded")]
    rows = [r for r in rows if r.get("valid", True)]
    rx = [r for r in rows if r.get("loss_at") == "receivers"]
    if rx:
        got = _at(rx, "loss", x)
        if isinstance(got, dict) and got.get("rx_seen"):
            return got, x, f"loss at the receivers: {got['rx_dropped']} of {got['rx_seen']} datagrams dropped"
        return got, x, ""
    links = [r for r in rows if r.get("loss_at", "links") == "links"]
    if not links:
        what = ("reliable 1Pipe with the loss at the receivers" if system == "1pipe_reliable" else "best effort") + (
            f", {variant} variant" if variant != "chip" else "")
        return f"not measured in this run (no {runtime} fig9b rows of {what})", x, ""
    xo, note = _loss_match(x)
    return _at(links, "loss", xo), xo, "; ".join(n for n in (note, "loss on the ToR-spine links, not the paper's "
                                                              "placement") if n)


def fig9b_ours(series: str, x: str, paper: float, figs: Figs, runtime: str = "sim") -> Ours:
    if "fig9b" not in figs:
        return Ours(None, _absent(figs, "fig9b", "best effort"))
    if series in ("R-chip - BE-chip", "R-host - BE-host"):
        a, b_ = series.split(" - ")
        r, b = fig9b_ours(a, x, paper, figs, runtime), fig9b_ours(b_, x, paper, figs, runtime)
        if r.value is None or b.value is None:
            return Ours(None, r.reason or b.reason or "no delivery in one of the two runs", runtime=runtime)
        return Ours(r.value - b.value, x=r.x, source=f"{r.source} - {b.source}", runtime=runtime)
    base = FIG9B_LOADED.get(series)
    system, variant = FIG9B_SYSTEMS[base or series]
    got, xo, note = _fig9b_row(system, variant, x, figs, runtime, base is not None)
    if not isinstance(got, dict):
        return Ours(None, got or f"not measured in this run (no {runtime} fig9b rows)", runtime=runtime)
    mean, un = got.get("mean_us"), got.get("unordered_mean_us")
    value = {"BE-chip": mean, "R-chip": mean, BE_CHIP_LOADED: mean, R_CHIP_LOADED: mean, "BE-host": mean,
             "R-host": mean, "unorder": un}.get(
        series, None if mean is None or un is None else mean - un)
    if value is None and series == "unorder":
        return Ours(None, "the live runs have no unordered baseline", runtime=runtime)
    where = "loss at the receivers" if got.get("loss_at") == "receivers" else "loss on the links"
    on = f", {got['variant']} variant" if got.get("variant", "chip") != "chip" else ""
    if got.get("load", 1.0) != 1.0:
        on += (f", {got['offered_per_proc'] / 1e6:.3g} M msg/s a process ({got['load']:.3g}x idle)"
               + (", commit in beacons" if got.get("commit") == "beacons" else ""))
    return Ours(value, x=xo if xo != x else None, source=f"fig9b {runtime}, {where}, {got.get('system', '1pipe')}"
                f"{on}, P={got['procs']}", note=note, runtime=runtime)


# ---------------------------------------------------------------------------- Fig. 10-13
#: Fig. 10's series -> the failure our fig10 rows ran (netstack.onepipe.rscenario's ``fail``)
FIG10_FAILS = {"Host": "process", "ToR Switch": "tor", "Core Link": "core-link", "Core Switch": "core-switch"}
FIG10_NOTES = {"process": "one process per host, the last one killed",
               "tor": "the last process's ToR fails: every process behind it is declared failed",
               "core-link": "the last process's ToR's uplink to spine1 fails (two spines): nobody fails",
               "core-switch": "spine1 fails (two spines): nobody fails"}


def fig10_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """The runs whose controller's core is charged the kernel's cost of a datagram (netstack/bench/
    onepipe/ctlcost.py) when the run has them, the free controller's beside them in the note."""
    fail = FIG10_FAILS[series]
    if "fig10" not in figs:
        return Ours(None, _absent(figs, "fig10", f"a {fail} failure"))
    rows = [fig10_defaults(r) for r in figs["fig10"]["rows"]]  # (older runs' rows lack keys)
    ctl = "kernel" if any(r["controller"] == "kernel" for r in rows) else "free"
    got = _at(rows, "procs", x, fail=fail, controller=ctl)
    if not isinstance(got, dict):
        return Ours(None, got or f"not measured in this run (no fig10 rows with fail={fail})")
    note = f"{FIG10_NOTES[fail]}; the store write not counted (as the paper's figure)"
    if ctl == "kernel":
        free = _at(rows, "procs", x, fail=fail, controller="free")
        free_us = free.get("resume_us") if isinstance(free, dict) else None
        note += (f"; the controller's core {got['ctl_msg_ns'] / 1e3:.2f} us a datagram (the kernel's, measured in the "
                 "run)" + ("" if free_us is None else f"; with a free controller {free_us:.1f}"))
    return Ours(got.get("resume_us"), source=f"fig10 sim, fail={fail}, controller={ctl}, resume_us (failure to "
                "recovered)", note=note)


def fig11_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Our receiving engine holding what the reordering delay makes it hold (reorder.py): its CPU
    per message scaled to the paper's host by the CPU model's factor (``Throughput``), and the
    memory its buffer takes (``Memory (MB)``)."""
    got = figs.get("fig11")
    rows = got.get("rows", []) if isinstance(got, dict) else []
    if not rows:
        return Ours(None, _absent(figs, "fig11", "the reorder measurement"))
    d = _num(x)
    r = _pick(rows, delay_us=int(d)) if d is not None else None
    if r is None:
        return Ours(None, f"not measured at {x} us (measured: {', '.join(str(r['delay_us']) for r in rows)})")
    held = f"{r['held']:.0f} messages held"
    if series.startswith("Throughput"):
        return Ours(r["throughput"], source=f"in process: {r['cpu_ns']:.0f} ns of CPU per message with {held}, "
                                            f"x {r['factor']:.4g} (cpucost.py's factor)",
                    note=f"a receive-only capacity (the factor is calibrated on a process's whole work per message): "
                         f"compare the shape, {r['vs_no_delay']:.2f} of ours at no delay")
    return Ours(r["buffer_mb"], source=f"in process: tracemalloc, {held}, over the engine's own at no delay",
                note="Python objects (header, payload copy, buffer entries) per held message")


#: Fig. 12's series (the paper's host-delegate variants) -> our rows' system (ours host-delegate too)
FIG12_SYSTEMS = {"BE-host": "1pipe", "R-host": "1pipe_reliable"}


def fig12_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Figs. 12a (x: background flows a host, at 1:1) and 12b (x: "N:1", at 10 flows) from the
    ``fig12`` section's rows: the mean latency of our host-delegate variant under the same traffic."""
    got = figs.get("fig12")
    rows = got.get("rows", []) if isinstance(got, dict) else []
    if not rows:
        return Ours(None, _absent(figs, "fig12", "latency beside background flows"))
    system = FIG12_SYSTEMS.get(series)
    if system is None:
        return Ours(None, f"no series of ours for {series}")
    if ":" in x:  # 12b: the oversubscription, at the flows 12b runs with
        from .fig12 import FIG12_RATIO_FLOWS

        hit = _at(rows, "ratio", x.split(":")[0], system=system, flows=FIG12_RATIO_FLOWS)
    else:
        hit = _at(rows, "flows", x, system=system, ratio=1)
    if not isinstance(hit, dict):
        return Ours(None, hit or f"not measured in this run (no fig12 rows of {system})")
    variant = hit.get("variant", "chip")  # (older results: the switch chip only)
    note = ("the host-delegate variant, as the paper's, with the calibrated host stack; one spine (3 hops)"
            if variant == "host" else "ours is the switch-chip variant under the same traffic, not the paper's "
                                      "host-delegate one")
    return Ours(_value(hit, "mean_us"), source=f"fig12 sim, {system}, {variant} variant, {hit['flows']} flows a host, "
                f"{hit['ratio']}:1", note=note)


#: Fig. 13a's switch: 32 ports (the paper's Arista 7060CX-32S)
SWITCH_PORTS = 32


def measure_beacon_cpu(ports: int = SWITCH_PORTS, intervals: int = 200, rounds: int = 3) -> dict[str, Any]:
    """Our switch's beacon work per beacon interval, timed on this machine: a ``ports``-port
    switch hears one beacon on every input (decoded from its bytes, :mod:`headers.onepipe`, and
    given to :class:`netstack.onepipe.barrier.BarrierAggregator`) and sends one on every output
    (the aggregator's due beacons, encoded). The paper's Fig. 13a counts the cores this takes a
    switch CPU or a host (its §7.2 "CPU overhead"); ``factor`` (the host CPU model's, cpucost.py:
    our Python engines to the paper's host) scales our nanoseconds to its Xeon. The process's CPU
    time, median of ``rounds``; a measurement for the benchmark, never asserted by a test."""
    import statistics
    import time

    from headers.onepipe import beacon

    from ...onepipe import cpucost
    from ...onepipe.barrier import BarrierAggregator
    from ...onepipe.params import OnePipeParams

    params = OnePipeParams.paper()
    t = params.t_beacon_ns
    frames = [[beacon(k * t + i, 0).to_bytes() for i in range(ports)] for k in range(1, intervals + 1)]
    per_interval = []
    for _ in range(rounds):
        agg = BarrierAggregator(params)
        for i in range(ports):
            agg.add_input(i, down=True)
            agg.add_output(i, "down", 0)
        start = time.process_time_ns()  # CPU time: a shared machine's other jobs do not count
        for k, received in enumerate(frames, 1):
            now = k * t
            for i, frame in enumerate(received):
                agg.heard(i, OnePipeHeader.from_bytes(frame).be_barrier, now)
            agg.on_timer(now)
            for _out, barrier in agg.due_beacons(now):
                beacon(barrier, 0).to_bytes()
        per_interval.append((time.process_time_ns() - start) / intervals)
    ns = statistics.median(per_interval)
    factor = cpucost.DEFAULT_COSTS.factor
    return {"ports": ports, "intervals": intervals, "ns_per_interval": ns, "factor": factor,
            "paper_ns_per_interval": ns * factor}


def fig13a_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Cores = our scaled work per interval / the interval, for the paper's host (DPDK) series."""
    if "Xeon" not in series:
        return Ours(None, "not built: no switch CPU (Arista) model; ours is the host series, scaled by the CPU model")
    m = figs.get("beacon_cpu")
    if not m:
        return Ours(None, "not measured in this run (no beacon CPU measurement)")
    interval_ns = (_num(x) or 1.0) * 1e3
    return Ours(m["paper_ns_per_interval"] / interval_ns,
                source=f"measured: {m['ns_per_interval'] / 1e3:.1f} us of Python per interval for {m['ports']} ports, "
                       f"x {m['factor']:.4g} (cpucost.py's factor)",
                note="our aggregator and codec timed on this machine, scaled to the paper's host by the CPU model's "
                     "factor (calibrated on 1Pipe's endpoint work, not on beacons)")


def fig13b_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Computed, as the paper's panel is: one beacon frame per interval on a link, over its rate."""
    gbps = float(series.split()[0])
    interval_us = _num(x) or 1.0
    pct = 100 * BEACON_WIRE_BYTES * 8 / (interval_us * 1e-6 * gbps * 1e9)
    return Ours(pct, source=f"computed: one {BEACON_WIRE_BYTES} B beacon frame on the wire per interval",
                note="computed, not a run: ours beacons only on an interval with no other 1Pipe packet, so this "
                     "is its ceiling")


#: Fig. 14a's series -> the onepipe-kv scenario's (mode, dist); FaRM's place is taken by our lock-based 2PC
KV_SERIES = {"1Pipe/Unif": ("onepipe", "uniform"), "1Pipe/YCSB": ("onepipe", "zipf"),
             "FaRM/Unif": ("2pc", "uniform"), "FaRM/YCSB": ("2pc", "zipf")}


def kv_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Fig. 14a from a ``kv`` section's rows (the onepipe-kv scenario's results: ``mode``,
    ``dist``, ``procs``, ``txn_per_s_per_client``) when the bench has one; the other KV panels
    and TPC-C have no counterpart."""
    if not _built("netstack.onepipe.kv"):
        return Ours(None, "not built (netstack.onepipe.kv)")
    if series.startswith("NonTX"):
        return Ours(None, "not built: no non-transactional KV baseline")
    if "kv" not in figs:
        return Ours(None, KV_PENDING)
    mode, dist = KV_SERIES[series]
    rows = [r for r in figs["kv"].get("rows", []) if r.get("writes") is None and r.get("ops", 2) == 2]  # (14a's own)
    got = _at(rows, "procs", x, mode=mode, dist=dist)
    if not isinstance(got, dict):
        return Ours(None, got or f"not measured in this run (no kv rows with mode {mode}, dist {dist})")
    return Ours(_value(got, "txn_per_s_per_client", 1e6), source=f"kv sim, mode {mode}, dist {dist}",
                note="ours: lock-based 2PC in FaRM's place" if mode == "2pc" else "")


#: Fig. 14b's series prefix -> the onepipe-kv mode; the suffix is the transaction class (RO / WO / WR)
KV_LATENCY_MODES = {"1Pipe": "onepipe", "FaRM": "2pc"}


def kv14b_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Fig. 14b from ``kv`` rows of mix=ycsb (``writes``: the write fraction, the paper's x / 100):
    the class's mean latency, zipf rows first (the paper's YCSB)."""
    if not _built("netstack.onepipe.kv"):
        return Ours(None, "not built (netstack.onepipe.kv)")
    if "kv" not in figs:
        return Ours(None, KV_PENDING)
    prefix, cls = series.split("-")
    mode = KV_LATENCY_MODES[prefix]
    pct = _num(x)
    rows = sorted((r for r in figs["kv"].get("rows", []) if r.get("mode") == mode and r.get("writes") is not None),
                  key=lambda r: r.get("dist") != "zipf")
    if not rows:
        return Ours(None, f"not measured in this run (no kv rows of mix=ycsb, mode {mode})")
    got = next((r for r in rows if pct is not None and abs(100 * r["writes"] - pct) < 1e-9), None)
    if got is None:
        have = ", ".join(f"{100 * w:g}" for w in sorted({r["writes"] for r in rows}))
        return Ours(None, f"not measured at {x} % writes (this run: {have})")
    mean = got.get("latency_by_class_ns", {}).get(cls, {}).get("mean")
    return Ours(None if mean is None else mean / 1e3, reason=f"no {cls} transaction completed",
                source=f"kv sim, mode {mode}, dist {got.get('dist')}, P={got.get('procs')}",
                note=f"P={got.get('procs')} clients (the paper: 512)" + ("; ours: lock-based 2PC in FaRM's place"
                                                                          if mode == "2pc" else ""))


#: Fig. 14c's processes (the paper's caption: 512)
PAPER_KV_PROCS = 512


def kv14c_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    """Fig. 14c from ``kv`` rows at the sweep's clients (``KV_OPS_PROCS``) by operations per
    transaction: KV operations per second in all, in G (the paper's at 512 processes: compare the
    shape, 1Pipe flat and FaRM's falling under Zipfian keys)."""
    if series.startswith("NonTX"):
        return Ours(None, "not built: no non-transactional KV baseline")
    if "kv" not in figs:
        return Ours(None, KV_PENDING)
    from .kv import KV_OPS_PROCS

    mode, dist = KV_SERIES[series]
    rows = [r for r in figs["kv"].get("rows", []) if r.get("writes") is None and r.get("procs") == KV_OPS_PROCS
            and "kv_ops_per_s" in r]
    got = _at(rows, "ops", x, mode=mode, dist=dist)
    if not isinstance(got, dict):
        return Ours(None, got or f"not measured in this run (no kv rows by ops per transaction, mode {mode})")
    # a total over the clients: ours has KV_OPS_PROCS of them, the paper's 512 processes
    return Ours(_value(got, "kv_ops_per_s", 1e9), source=f"kv sim, mode {mode}, dist {dist}, {KV_OPS_PROCS} clients",
                scale_factor=KV_OPS_PROCS / PAPER_KV_PROCS,
                note=f"{KV_OPS_PROCS} clients (the paper's 512), one transaction at a time each"
                     + ("; lock-based 2PC in FaRM's place" if mode == "2pc" else ""))


def tpcc_ours(series: str, x: str, paper: float, figs: Figs) -> Ours:
    return Ours(None, "not built: no TPC-C (independent transactions, §7.3) on netstack's 1Pipe")


# ------------------------------------------------------------------------------ figures
SIM = "sim, time scale 1"
NONE = "nothing measured (the notes say why)"
FIGURES: tuple[Figure, ...] = (
    Figure("8a", "Fig. 8a: throughput of total-order broadcast", "total_order", "processes",
           "M msg/s per process", f"{SIM}; the paper broadcasts to all processes (CPU-bound, ~5 M msg/s each), ours "
           "scatters to 2 random ones: without a CPU model what we offer; with it (cpucost.py) a core's capacity, best "
           "effort's modelled one calibrated to the paper's 5.16 M msg/s, the rest from our measured costs",
           fig8a_ours, logx=True, logy=True),
    Figure("8b", "Fig. 8b: latency of total-order broadcast", "total_order_lat", "processes", "latency (us)",
           f"{SIM}; 1Pipe/chip and 1Pipe/host: the fig9a-testbed section's idle runs (the paper's fat tree, 1, 3, 5 "
           "hops, the calibrated host stack: the paper's values here are its Fig. 9a idle ones); the baselines: "
           "fig8's load, 3 hops at every P, cores saturated (the CPU model)",
           fig8b_ours, logx=True, logy=True),
    Figure("9a", "Fig. 9a: delivery latency, idle", "reorder_testbed", "processes", "latency (us)",
           f"{SIM}; T_beacon 3 us, skew 0.3 us, idle; the fig9a-testbed section: the paper's fat tree (4 ToRs x 8 "
           "hosts, 2 pods, 2 cores), processes packed (1, 3, 5, 5 hops at 8, 16, 32, 512, as the paper's), every "
           "host's stack calibrated on the paper's unordered latency at 1 hop (2.2 us; the other P predicted); "
           "without that section (older results): 3 hops at every P, no host stack, the -host series not built",
           fig9a_ours,
           series=("BE-chip", "BE-host", "R-chip", "R-host", "unorder"), logx=True,
           derived=(("BE-chip - unorder", "BE-chip", "unorder"), ("R-chip - BE-chip", "R-chip", "BE-chip"),
                    ("BE-host - BE-chip", "BE-host", "BE-chip"), ("R-host - BE-host", "R-host", "BE-host"),
                    (f"{COMMIT_IN_BEACONS} - BE-chip", "R-chip", "BE-chip"))),
    Figure("9b", "Fig. 9b: latency vs loss", "loss_latency", "loss probability", "mean latency (us)",
           f"{SIM}; 512 processes on the paper's testbed (fig9a-testbed's: fat tree, 5 hops, the calibrated host "
           "stack), idle (0.04 M msg/s each), every datagram a process's library receives but the controller's "
           "dropped with the probability (the paper's placement, its §7.1), best effort and reliable, switch chip and "
           "host delegates; the bench's link-loss rows (128 processes, ToR-spine links) are in its own fig9b table; "
           f"'{R_CHIP_LOADED}': R-chip again, loaded (commit in beacons), "
           f"{FIG9B_LOADED_MSGS_PER_S / 1e6:.3g} M msg/s a process: the paper's Fig. 8a reliable "
           f"throughput ({cpucost.PAPER_R_MSGS_PER_S / 1e6:g} M), the load the paper's own Fig. 9b numbers imply "
           "(docs/onepipe-paper.md), capped at what our host links carry",
           fig9b_ours, logx=True, derived=(("BE-chip - unorder", "BE-chip", "unorder"),
                                           ("R-chip - BE-chip", "R-chip", "BE-chip"),
                                           ("R-host - BE-host", "R-host", "BE-host")),
           aliases=((R_CHIP_LOADED, "R-chip"),)),  # (best effort is not run loaded: sim.FIG9B_LOADED_SYSTEMS)
    Figure("10", "Fig. 10: recovery time of reliable 1Pipe", "failure_recovery", "hosts", "recovery time (us)",
           f"{SIM}; detection 10 T_beacon = 30 us as the paper's; 4 ToRs x 8 hosts, two spines, processes "
           "dealt across the ToRs (the paper's testbed: 1 hop at <= 8 hosts, its Figs. 8-9); the controller's core "
           "charged the kernel's cost of each datagram it sends or receives, measured in the run (a free "
           "controller's value in each note)", fig10_ours,
           series=("Host", "ToR Switch", "Core Link", "Core Switch"), logx=True),
    Figure("11", "Fig. 11: reorder overhead on a host", "reorder_receiver", "delivery latency (us)",
           "M msg/s per process; MB", "in process: our best-effort receiving engine fed 6.1 M msg/s (the paper's "
           "rate at no delay) from 32 senders, the barrier that far behind; CPU scaled by the host CPU model's factor",
           fig11_ours),
    Figure("12a", "Fig. 12a: latency with background TCP flows", "background_flow_lat", "background flows per host",
           "latency (us)", f"{SIM}; 32 processes (one a host) at Fig. 9a's idle load beside that many backlogged "
           "NewReno flows a host to other ToRs' hosts; the host-delegate variant with the calibrated host stack, one "
           "spine", fig12_ours),
    Figure("12b", "Fig. 12b: latency vs oversubscription", "oversubscription_lat", "oversubscription",
           "latency (us)", f"{SIM}; as Fig. 12a at 10 flows a host, the ToR uplinks at 8 x 100 / ratio Gbit/s",
           fig12_ours),
    Figure("13a", "Fig. 13a: beacon CPU overhead (32-port switch)", "beacon_cpu_overhead", "beacon interval (us)",
           "CPU cores", "a 32-port switch's beacons through our aggregator and codec, timed, scaled to the paper's "
           "host by the CPU model's factor", fig13a_ours, logx=True, logy=True),
    Figure("13b", "Fig. 13b: beacon bandwidth overhead", "beacon_network_overhead", "beacon interval (us)",
           "% of the link", "the same link speeds and intervals", fig13b_ours, logx=True, logy=True),
    Figure("14a", "Fig. 14a: transactional KV store, throughput", "kv_scalability", "processes",
           "M txn/s per process", "sim (onepipe-kv), time scale 1; lock-based 2PC in FaRM's place", kv_ours,
           logx=True),
    Figure("14b", "Fig. 14b: KV transaction latency, YCSB, 512 processes", "kv_latency_ycsb", "write ops (%)",
           "latency (us)", "sim (onepipe-kv, mix=ycsb), time scale 1; lock-based 2PC in FaRM's place", kv14b_ours,
           logx=True, logy=True),
    Figure("14c", "Fig. 14c: KV throughput vs ops per transaction", "multishard", "KV ops per transaction",
           "G KV op/s", "sim (onepipe-kv), time scale 1; 16 clients (the paper's 512), 2-64 operations a "
           "transaction; lock-based 2PC in FaRM's place", kv14c_ours, logx=True),
    Figure("15a", "Fig. 15a: TPC-C New-Order + Payment", "tpcc-combined", "processes", "M txn/s", NONE, tpcc_ours,
           logx=True),
)


def _row(fig: Figure, series: str, x: str, paper: float, ours: Ours) -> Row:
    ratio = ours.value / paper if ours.value is not None and paper else None
    at_scale = ratio / ours.scale_factor if ratio is not None and ours.scale_factor else None
    note = ours.note if ours.value is not None else ours.reason
    if paper == 0:
        note = (note + "; " if note else "") + "the paper's 0 (no such component at this scale): no ratio"
    return {"figure": fig.id, "series": series, "x": x, "x_ours": ours.x, "paper": paper, "ours": ours.value,
            "ratio": ratio, "scale": fig.scale, "scale_factor": ours.scale_factor if ours.value is not None else None,
            "at_scale": at_scale, "differs_2x": at_scale is not None and not 0.5 <= at_scale <= 2.0,
            "runtime": ours.runtime, "source": ours.source, "note": note}


def figure_rows(fig: Figure, table: PaperTable, figs: Figs) -> list[Row]:
    """Every point of ``fig`` (its series, its aliases, then the derived differences) with ours
    beside it."""
    rows: list[Row] = []
    for name in fig.series or tuple(table.series):
        for x, y in table[name].points():
            rows.append(_row(fig, name, x, y, fig.ours(name, x, y, figs)))
    for name, column in fig.aliases:
        for x, y in table[column].points():
            rows.append(_row(fig, name, x, y, fig.ours(name, x, y, figs)))
    for name, a, b in fig.derived:
        for x in table.xs:
            pa, pb = table[a].at(x), table[b].at(x)
            if pa is not None and pb is not None:
                rows.append(_row(fig, name, x, pa - pb, fig.ours(name, x, pa - pb, figs)))
    for r in list(rows):  # the live runs answer the same points where they ran
        live = _live_ours(fig.id, r["series"], r["x"], r["paper"], figs)
        if live is not None and live.value is not None:
            rows.append(_row(fig, r["series"], r["x"], r["paper"], live) | {"scale": LIVE_SCALE})
    return rows


LIVE_SCALE = "live, 1000x (T_beacon 3 ms), latencies / 1000; the shipped onepipe topology (2 ToRs, a spine)"


def _live_ours(fig_id: str, series: str, x: str, paper: float, figs: Figs) -> Ours | None:
    """The live rows' number for a paper point (valid runs only), if this run has one."""
    if fig_id == "9b" and series in ("BE-chip", "BE-chip - unorder"):
        return fig9b_ours(series, x, paper, figs, runtime="live")
    if fig_id == "8b" and series == "1Pipe/chip":
        got = _at([r for r in figs.get("fig8", {}).get("live", []) if r.get("valid", True)], "procs", x)
        if isinstance(got, dict):
            return Ours(got.get("mean_us"), source=f"fig8 live, P={got['procs']}, mean_us", runtime="live")
    return None


def compare(figs: Figs, root: Any = None) -> dict[str, Any]:
    """The ``paper`` section of the JSON: the source, every figure's rows, a summary per figure."""
    rows: list[Row] = []
    for fig in FIGURES:
        rows += figure_rows(fig, paperdata.load(fig.file, root), figs)
    summary = {}
    for fig in FIGURES:  # the paper's points: an alias repeats them (ours from other runs)
        aliases = {name for name, _ in fig.aliases}
        mine = [r for r in rows if r["figure"] == fig.id and r["series"] not in aliases]
        summary[fig.id] = {"title": fig.title, "file": fig.file, "points": len(mine),
                           "with_ours": sum(r["ours"] is not None for r in mine),
                           "differs_2x": sum(r["differs_2x"] for r in mine)}
    return {"source": {"repository": paperdata.SOURCE_REPO, "commit": paperdata.SOURCE_COMMIT,
                       "files": "docs/data/onepipe-paper/"},
            "rows": rows, "summary": summary, "beacon_cpu": figs.get("beacon_cpu")}


# ------------------------------------------------------------------------ tables and plots
def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _r(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _series_label(r: dict[str, Any]) -> str:
    return str(r["series"]) + (" (live)" if r.get("runtime") == "live" else "")


def paper_table(rows: list[dict[str, Any]]) -> str:
    """One row per paper point; a series with no number of ours at all, for one reason, is one
    line (its x values, the paper's values in order, the reason); the JSON has a row per point."""
    out: list[list[object]] = []
    for series in dict.fromkeys(_series_label(r) for r in rows):
        pts = [r for r in rows if _series_label(r) == series]
        if all(r["ours"] is None for r in pts) and len(pts) > 1 and len({r["note"] for r in pts}) == 1:
            out.append([series, ", ".join(r["x"] for r in pts), ", ".join(_g(r["paper"]) for r in pts), "-", "-",
                        "-", "-", pts[0]["note"]])
            continue
        for r in pts:
            x = r["x"] + (f" (ours at {r['x_ours']})" if r.get("x_ours") else "")
            flag = " **>2x**" if r["differs_2x"] else ""
            out.append([series, x, _g(r["paper"]), _g(r["ours"]), _r(r["ratio"]), _g(r["scale_factor"]),
                        _r(r["at_scale"]) + flag, r["note"]])
    return format_table(["series", "x", "paper", "ours", "ours/paper", "scale factor", "at scale", "note"], out)


def paper_markdown(section: dict[str, Any]) -> list[str]:
    """The "paper vs ours" section of bench-onepipe-latest.md: a table per figure."""
    src = section["source"]
    md = ["## Paper vs ours: the authors' data beside this run", "",
          f"The paper's numbers: {src['repository']} at {src['commit'][:12]} (`gnuplot/<file>`, copied to "
          f"{src['files']}). ours/paper is the ratio; the scale factor is the ratio our setup alone predicts "
          "(1: alike; a rate we offer below the paper's: offered / paper); 'at scale' = ratio / scale factor, "
          "**>2x** where it is outside 0.5-2 (docs/onepipe-paper.md says why).", ""]
    for fig in FIGURES:
        rows = [r for r in section["rows"] if r["figure"] == fig.id]
        s = section["summary"][fig.id]
        md += [f"### {fig.title} (`{fig.file}`; {fig.y_label})", "",
               f"Ours: {fig.scale}. {s['with_ours']} of {s['points']} points measured, {s['differs_2x']} outside 2x "
               "at scale.", "", paper_table(rows), ""]
    return md


def _positions(xs: list[str]) -> tuple[list[float], bool]:
    """Numeric x where every label is a number, else the labels' indices (categorical)."""
    nums = [paperdata.x_value(x) for x in xs]
    if all(v is not None for v in nums):
        return [float(v) for v in nums if v is not None], True
    return [float(i) for i in range(len(xs))], False


def _panel(ax: Any, fig: Figure, rows: list[dict[str, Any]]) -> None:
    xs = list(dict.fromkeys(r["x"] for r in rows))
    pos, numeric = _positions(xs)
    at = dict(zip(xs, pos, strict=True))
    aliases = dict(fig.aliases)  # drawn in their column's colour, dotted, without the paper's line again
    order = [s for s in dict.fromkeys(r["series"] for r in rows) if s not in aliases]
    for series in [*order, *(a for a in aliases if a in {r["series"] for r in rows})]:
        pts = [r for r in rows if r["series"] == series and r["runtime"] == "sim"]
        base = aliases.get(series)
        c = f"C{order.index(base or series) % 10}" if (base or series) in order else "C0"
        if base is None:
            ax.plot([at[r["x"]] for r in pts], [r["paper"] for r in pts], "o--", color=c, alpha=0.6, ms=4,
                    label=f"paper {series}")
        ours = [r for r in pts if r["ours"] is not None]
        if ours:
            ax.plot([at[r["x"]] for r in ours], [r["ours"] for r in ours], "s-" if base is None else "^:", color=c,
                    ms=4, label=f"ours {series}")
        live = [r for r in rows if r["series"] == series and r["runtime"] == "live" and r["ours"] is not None]
        if live:
            ax.plot([at[r["x"]] for r in live], [r["ours"] for r in live], "D", color=c, ms=6,
                    label=f"ours {series} (live, 1000x)")
    if numeric and fig.logx and all(p > 0 for p in pos):
        ax.set_xscale("log")
    if not numeric:
        ax.set_xticks(pos, xs)
    if fig.logy:
        ax.set_yscale("log")
    ax.set_xlabel(fig.x_label)
    ax.set_ylabel(fig.y_label)
    ax.set_title(fig.title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, ncol=2)


def plot_paper(section: dict[str, Any], results_dir: Path, name: str) -> list[str]:
    """One PNG per paper figure (its panels side by side): the paper's series dashed, ours solid
    in the same colour on the same axes. The file names written (none without matplotlib)."""
    plt = pyplot()
    if plt is None:
        return []
    written = []
    for number in dict.fromkeys(f.number for f in FIGURES):
        figs = [f for f in FIGURES if f.number == number]
        fig, axes = plt.subplots(1, len(figs), figsize=(5.5 * len(figs), 4.2), squeeze=False)
        for ax, f in zip(axes[0], figs, strict=True):
            _panel(ax, f, [r for r in section["rows"] if r["figure"] == f.id])
        out = f"{name}-paper-fig{number}.png"
        save(plt, fig, results_dir / out, dpi=100)
        written.append(out)
    return written


SECTIONS = ("fig8", "fig9a", "fig9a-testbed", "fig9b", "reliable", "fig10", "fig11", "fig12", "kv")


def merge(docs: Iterable[Any]) -> Figs:
    """The figure sections of several ``bench-onepipe`` result documents, a later one's section
    replacing an earlier one's (runs of different ``--only`` sections, compared as one). A list
    of onepipe-kv results (``python -m netstack.onepipe.kv.sweep --json``) is the ``kv`` section."""
    figs: Figs = {}
    for doc in docs:
        if isinstance(doc, list):
            figs["kv"] = {"rows": [r for r in doc if isinstance(r, dict) and "mode" in r]}
        elif isinstance(doc, dict):
            figs.update({k: doc[k] for k in SECTIONS if doc.get(k)})
            if (doc.get("paper") or {}).get("beacon_cpu"):
                figs["beacon_cpu"] = doc["paper"]["beacon_cpu"]
    return figs


def main(argv: list[str] | None = None) -> int:
    """``python -m netstack.bench.onepipe.paper RESULT.json...``: the paper-vs-ours tables of saved
    runs (their sections merged, a later file's replacing an earlier one's); ``--plots DIR``: the
    overlay PNGs too."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m netstack.bench.onepipe.paper", description=main.__doc__)
    ap.add_argument("results", nargs="+", type=Path,
                    help="bench-onepipe-*.json files (and onepipe-kv sweep results: a JSON list)")
    ap.add_argument("--plots", type=Path, help="write bench-onepipe-paper-figN.png here")
    args = ap.parse_args(argv)
    section = compare(merge(json.loads(p.read_text()) for p in args.results))
    print("\n".join(paper_markdown(section)))
    if args.plots:
        args.plots.mkdir(parents=True, exist_ok=True)
        print(f"plots: {', '.join(plot_paper(section, args.plots, 'bench-onepipe')) or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

__all__ = ["BEACON_WIRE_BYTES", "FIGURES", "Figure", "Ours", "compare", "figure_rows", "main", "merge",
           "paper_markdown", "paper_table", "plot_paper"]
