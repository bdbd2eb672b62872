"""What ``netstack bench linkguardian`` writes besides its JSON: the Markdown report (printed and
written to ``<results>/bench-linkguardian-latest.md``), with a table and a PNG plot per figure
and the issue's targets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...validity import Validity
from .params import FIG9_INTERVAL_S, LIVE_COPIES, LIVE_CORRUPT
from .plots import plot_fig8, plot_fig9, plot_fig10
from .scaling import scaling_lines
from .tables import fig8_tables, fig9_table, fig10_table, live_table, targets_table


@dataclass
class Report:
    """The Markdown lines, tables, plots and targets of one run, filled section by section in
    the order the Markdown shows them (the JSON keeps that order too)."""

    results_dir: Path
    md: list[str]
    tables: dict[str, str] = field(default_factory=dict)
    plots: dict[str, str] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    #: live runs the machine starved (netstack.validity): listed, left out of ratios and verdicts
    invalid: list[dict[str, Any]] = field(default_factory=list)

    def plot(self, name: str, title: str, fn: Callable[[dict[str, Any], Path], bool],
             data: dict[str, Any]) -> list[str]:
        """Write ``<results>/bench-linkguardian-<name>.png``; the Markdown lines that show it."""
        p = self.results_dir / f"bench-linkguardian-{name}.png"
        if not fn(data, p):
            return []
        self.plots[name] = str(p)
        return [f"![{title}]({p.name})", ""]


def build_report(sc: dict[str, Any], f8: dict[str, Any] | None, lc: dict[str, Any] | None,
                 f9: dict[str, Any] | None, f10: dict[str, Any] | None, errors: dict[str, str], wall_s: float,
                 results_dir: Path) -> Report:
    """The report of the sections that ran (None: not selected, or failed as ``errors`` says)."""
    rep = Report(results_dir, [
        "# netstack bench linkguardian", "",
        "LinkGuardian §4.1-§4.3, Figs. 8, 9 and 10, scaled (docs/architecture.md \"Time and scale\").", "",
        "## Scaling", "", *[f"- {line}" for line in scaling_lines(sc)], ""])
    results_dir.mkdir(parents=True, exist_ok=True)
    if f8 is not None:
        _fig8_section(rep, f8)
    if lc is not None:
        _live_check_section(rep, lc)
    if f9 is not None:
        _fig9_section(rep, f9)
    if f10 is not None:
        _fig10_section(rep, f10)
    rep.tables["targets"] = targets_table(rep.targets) if rep.targets else ""
    if rep.targets:
        rep.md += ["## Targets", "", rep.tables["targets"], ""]
    if rep.invalid:
        rep.md += ["## Invalid runs (not counted)", "",
                   "Live runs the machine did not run as planned (netstack.validity: a process waited for the "
                   "CPU longer than the protocol's timers tolerate, or fewer packets than planned). They are left "
                   "out of every ratio, verdict and plot above.", "",
                   *[f"- {r['row']}: {'; '.join(r['reasons'])}" for r in rep.invalid], ""]
    for section, err in errors.items():
        rep.md += [f"**{section} failed:** {err}", ""]
    rep.md += [f"Wall time {wall_s / 60:.1f} min.", ""]
    return rep


def _fig8_section(rep: Report, f8: dict[str, Any]) -> None:
    loss_t, speed_t = fig8_tables(f8)
    rep.tables["fig8_loss"], rep.tables["fig8_speed"] = loss_t, speed_t
    rep.targets += f8["targets"]
    image = rep.plot("fig8", "Fig. 8", plot_fig8, f8)
    rep.md += ["## Fig. 8: effective loss and effective link speed (virtual time)", "", f8["note"], "",
               "Effective loss (>= the issue's frames per point; 95 % Clopper-Pearson intervals):", "", loss_t, "",
               "Effective link speed (closed-loop line-rate offering, N from Eq. 2, target 1e-8; 'vs lossless' is "
               "relative to the unprotected run without corruption at the same delay):", "", speed_t, "",
               *image]


def _live_check_section(rep: Report, lc: dict[str, Any]) -> None:
    rep.tables["live_check"] = live_table(lc)
    valid = lc["live"].get("valid", True)
    rep.targets.append({"kind": "check",
                        "what": f"Live cross-check: effective loss at {LIVE_CORRUPT:g}, N={LIVE_COPIES}, and "
                                "reordering agree with virtual time on the same topology file and seed (95 % "
                                "intervals overlap; actual^(N+1) inside the live one)",
                        "value": ("yes" if lc["agrees"] else "no") if valid else "-", "target": "yes",
                        "met": bool(lc["agrees"]) if valid else None})
    if not valid:
        rep.invalid.append({"row": "live cross-check (live run)", "reasons": Validity.of(lc["live"]).reasons})
    rep.md += ["## Fig. 8 live cross-check (real testbed)", "",
               f"{lc['datagrams']:,} sequenced UDP datagrams ({lc['udp_payload_bytes']} B payload, "
               f"{lc['rate_pps']}/s) h1 -> sw1 = sw2 -> h2 through the switch daemons; {lc['backend']} corrupts "
               f"{lc['nominal_loss']:g} of the frames sw1 sends to sw2; LinkGuardian blocking, N={lc['copies']}; the "
               "same topology file (netstack/topo/examples/lg-testbed.toml), scenario (lg-stream) and seed in "
               "virtual time beside it.", "",
               rep.tables["live_check"], ""]


def _fig9_section(rep: Report, f9: dict[str, Any]) -> None:
    rep.tables["fig9"] = fig9_table(f9)
    valid = [r for r in f9["runs"] if r.get("valid", True)]
    rep.invalid += [{"row": f"fig9 run (backpressure {'on' if r['backpressure'] else 'off'}, recirculation "
                            f"{r['recirc_factor']}x link)", "reasons": Validity.of(r).reasons}
                    for r in f9["runs"] if not r.get("valid", True)]
    image = rep.plot("fig9", "Fig. 9", plot_fig9, {**f9, "runs": valid}) if valid else []
    tl = f9["timeline"]
    rep.md += ["## Fig. 9: kernel TCP throughput over time (live)", "",
               f"Default topology, TCP h1 -> h2 for {tl['seconds']:g} s (tcp-send samples every "
               f"{FIG9_INTERVAL_S:g} s); nft corruption {f9['corrupt']:g} on sw1 -> sw2 from {tl['corrupt_at_s']:g} s, "
               f"LinkGuardian (blocking, Eq. 2 N) from {tl['lg_at_s']:g} s. Phase means leave out the first sample and "
               "samples straddling an event.", "", f9["why_this_rate"], "", f9["why_reno"], "", rep.tables["fig9"], "",
               *image]


def _fig10_section(rep: Report, f10: dict[str, Any]) -> None:
    rep.tables["fig10"] = fig10_table(f10)
    rep.targets += f10["targets"]
    rep.invalid += [{"row": f"fig10 phase {p['phase']}", "reasons": Validity.of(p).reasons}
                    for p in f10["phases"] if not p.get("valid", True)]
    valid = [p for p in f10["phases"] if p.get("valid", True)]
    image = rep.plot("fig10", "Fig. 10", plot_fig10, {**f10, "phases": valid}) if valid else []
    rep.md += ["## Fig. 10: FCT of single-packet TCP flows (live)", "",
               f"{f10['flows']:,} request/response exchanges of {f10['size_bytes']} B per phase on one TCP connection "
               "(rr-client / rr-server, TCP_NODELAY), h1 -> h2; the request crosses the corrupting direction.", "",
               f10["why_this_rate"], "", rep.tables["fig10"], "", *image]
