"""``netstack bench linkguardian``: LinkGuardian Figs. 8, 9 and 10, scaled (docs/architecture.md
"Time and scale").

Four sections, run in this order (``--only`` selects among them by substring):

``fig8`` (virtual time, no root needed)
    Effective loss and effective link speed for off / LG / LG_NB (§4.1, Fig. 8). Every point is
    a run of the ``lg-stress`` scenario on ``netstack.sim``: LinkGuardian Fig. 7's testbed (two real
    software switches, software FCS, the switch's seeded corruption model on sw1 -> sw2, the
    LinkGuardian features as the daemons attach them), the sending switch's packet generator
    keeping the protected link busy with MTU frames (the paper's "stress test"). Runs are
    independent and go to ``--workers`` processes.
    *Effective loss* where it is measurable: actual 1e-2 and 5e-2, >= 1e6 frames each,
    explicit N = 1 copy so that ``actual^2`` is 1e-4 / 2.5e-3 (Eq. 2's N would aim at 1e-8,
    which no run of 1e6 frames can see). Each effective loss comes with an exact
    (Clopper-Pearson) 95 % confidence interval and is compared with ``actual^(N+1)``.
    *Effective link speed*: runs at 0, 1e-3, 1e-2 and 5e-2 with the paper's configuration (N
    from Eq. 2, target 1e-8; the 100G settings scaled), relative to the unprotected lossless
    run. Plus a sensitivity run at 1e-3 with a longer link delay.

``live-check`` (root: namespaces, the switch daemons, nft corruption)
    One point of Fig. 8 both ways: the ``lg-stream`` scenario (tens of thousands of sequenced
    UDP datagrams h1 -> h2) on ``netstack/topo/examples/lg-testbed.toml`` (nft corrupting 1e-2 of
    sw1 -> sw2, LG with N = 1), once live through the switch daemons and once in virtual time
    with the same file and seed. Agreement: the two 95 % intervals of the effective loss and of
    the reordered share overlap, and ``actual^2`` lies inside the live one.

``fig9`` (root)
    Real kernel TCP throughput over time (tcp-send samples every 0.5 s); corruption starts
    after 15 % of the run, LG is enabled at 45 %; once with backpressure, once without
    (the receiver's reorder drops and pauses are reported).

``fig10`` (root)
    FCT percentiles of single-packet (143 B) TCP request/response flows: lossless,
    corrupting without LG, LG, LG_NB; LG's 99.9th percentile over lossless's.

Every live section brings the default topology up under a fresh unique prefix and tears it
down in a ``finally`` (each section has clean counters). Output: JSON (``write_results``),
a Markdown table per figure printed and written to ``<results>/bench-linkguardian-latest.md``,
PNG plots beside it; progress on stderr. Timings belong here, never in tests.

Modules: ``params`` (the paper's numbers, the scale, the sizes), ``scaling``, ``fig8``,
``livecheck``, ``testbed`` (the live sections' topology and counters), ``fig9``, ``fig10``,
``tables``, ``plots`` and ``report`` (the Markdown); :func:`main` here runs the sections.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..output import Progress, loadavg, write_results
from ..proc import sigterm_unwinds
from .fig8 import run_fig8
from .fig9 import run_fig9
from .fig10 import run_fig10
from .livecheck import run_live_check
from .params import (
    DEFAULT_SCALE,
    FIG9_RUNS,
    FIG10_PHASES,
    LIVE_SECTIONS,
    LIVE_SEED,
    LOSS_RATES,
    QUICK,
    SECTIONS,
    TARGET_LOSS,
    Sizes,
    estimate_seconds,
    parse_sizes,
    sizes_from_args,
)
from .report import build_report
from .scaling import scaling, scaling_lines

__all__ = ["main", "SECTIONS", "LIVE_SECTIONS", "DEFAULT_SCALE", "LOSS_RATES", "LIVE_SEED", "FIG9_RUNS",
           "FIG10_PHASES", "QUICK", "Sizes", "parse_sizes", "sizes_from_args"]


def _guarded(section: str, errors: dict[str, str], say: Progress, fn: Callable[..., Any], *args: Any) -> Any:
    """Run a live section; a failure (a daemon or tool dying, someone else's 'netstack down --all')
    is reported and recorded, and the other sections' results are still written."""
    try:
        return fn(*args)
    except Exception as exc:
        errors[section] = f"{type(exc).__name__}: {exc}"
        say(f"{section}: FAILED ({errors[section]}); its testbed was torn down, going on")
        return None


def _selected(only: list[str] | None, runtime: str | None = None) -> list[str]:
    return [s for s in SECTIONS if (not only or any(o in s for o in only))
            and (runtime is None or (runtime == "live") == (s in LIVE_SECTIONS))]


def _refusal(sections: list[str]) -> str | None:
    """Why the selected sections cannot run here (none selected; live ones without root), or None."""
    if not sections:
        return (f"no section matches --only/--runtime (sections: {', '.join(SECTIONS)}; fig8 is virtual time, "
                f"{', '.join(LIVE_SECTIONS)} live)")
    live = [s for s in sections if s in LIVE_SECTIONS]
    if live and os.geteuid() != 0:
        return (f"netstack bench linkguardian: {', '.join(live)} need root (namespaces, veths, nft); "
                "run as root or use --only fig8 (virtual time)")
    return None


def _run_sections(sections: list[str], prefix: str, sizes: Sizes, frame_sizes: list[int], scale: float,
                  say: Progress, workers: int | None, errors: dict[str, str]) -> tuple[Any, Any, Any, Any]:
    """(fig8, live-check, fig9, fig10) results, None for a section not selected or failed. Only
    the live sections are guarded; a failure of Fig. 8 (virtual time) propagates."""
    f8 = run_fig8(sizes, frame_sizes, scale, say, workers) if "fig8" in sections else None
    lc = f9 = f10 = None
    if "live-check" in sections:
        lc = _guarded("live-check", errors, say, run_live_check, prefix, sizes, scale, say)
    if "fig9" in sections:
        f9 = _guarded("fig9", errors, say, run_fig9, prefix, sizes, say)
    if "fig10" in sections:
        f10 = _guarded("fig10", errors, say, run_fig10, prefix, sizes, say)
    return f8, lc, f9, f10


def verdicts(rep: Any) -> dict[str, Any]:
    """The run's validity (its live rows the machine starved: listed, not counted) and its
    correctness cross-checks (``cross_checks``: their failure makes the benchmark exit 1; a missed
    performance goal is reported, never an error). netstack/bench/summary.py reads both."""
    checks = [{"name": r["row"], "expected": "a valid live run", "measured": "; ".join(r["reasons"]), "ok": False}
              for r in rep.invalid]
    cross = [{"what": t["what"], "ok": bool(t["met"])} for t in rep.targets
             if t.get("kind") == "check" and t["met"] is not None]
    return {"valid": not rep.invalid, "checks": checks, "invalid_rows": rep.invalid, "cross_checks": cross}


def main(args: argparse.Namespace) -> int:
    try:
        sizes = sizes_from_args(args)
        frame_sizes = parse_sizes(getattr(args, "sizes", None))
    except ValueError as exc:
        print(f"netstack bench linkguardian: {exc}", file=sys.stderr)
        return 2
    sections = _selected(getattr(args, "only", None), getattr(args, "runtime", None))
    refusal = _refusal(sections)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    scale = float(getattr(args, "scale", None) or DEFAULT_SCALE)
    results_dir = Path(getattr(args, "results_dir", "results"))
    prefix = f"blg{secrets.token_hex(3)}"
    say = Progress()
    sc = scaling(scale, frame_sizes[0])
    est = estimate_seconds(sizes, sections, frame_sizes)
    say(f"netstack bench linkguardian: sections {', '.join(sections)}; sizes {asdict(sizes)}; frames {frame_sizes} B")
    for line in scaling_lines(sc):
        say(f"scale: {line}")
    say("estimated wall time: " + ", ".join(f"{k} ~{v / 60:.1f} min" for k, v in est.items())
        + f"; total ~{sum(est.values()) / 60:.1f} min")

    payload: dict[str, Any] = {"sections": sections, "sizes": asdict(sizes), "frame_sizes": frame_sizes,
                               "prefix": prefix, "scaling": sc, "estimate_s": est, "target_loss": TARGET_LOSS}
    payload["loadavg_before"] = loadavg()
    started = time.monotonic()
    errors: dict[str, str] = {}
    with sigterm_unwinds():
        f8, lc, f9, f10 = _run_sections(sections, prefix, sizes, frame_sizes, scale, say,
                                        getattr(args, "workers", None), errors)
    payload["wall_s"] = time.monotonic() - started
    payload["loadavg_after"] = loadavg()

    rep = build_report(sc, f8, lc, f9, f10, errors, payload["wall_s"], results_dir)
    payload.update(fig8=f8, live_check=lc, fig9=f9, fig10=f10, targets=rep.targets, tables=rep.tables,
                   plots=rep.plots, errors=errors, **verdicts(rep))
    path = write_results(results_dir, "bench-linkguardian", payload)
    md_text = "\n".join(rep.md)
    (results_dir / "bench-linkguardian-latest.md").write_text(md_text)
    print(md_text)
    print(f"wrote {path}, {results_dir / 'bench-linkguardian-latest.md'} and {len(rep.plots)} plot(s)")
    return 1 if errors else 0
