"""Run validity: did a live run happen as planned, on a machine that gave it the CPU?

netstack is a lab instrument, and a number from a run the machine starved is not a result. Every
live experiment (demo, benchmarks, ``onepipe run``, ``tcd run``, ``tcsack transfer``, ``dta
report``, ``sim --mode live``) therefore declares checks:

- its preconditions and achieved-vs-planned figures: packets sent vs planned, a rate within a
  tolerance, the scenario's key event (TCD: P2 was paused);
- scheduling delay: every daemon and traffic tool measures its own (:mod:`netstack.looplag`),
  and the run's lag must stay within what its protocol timers tolerate.

The result JSON carries ``"valid": true|false`` and ``"checks": [{"name", "expected",
"measured", "ok"}]``. An invalid run prints ``INVALID RUN: <reasons>`` as its last line and exits
:data:`EXIT_INVALID`; benchmarks keep invalid rows out of ratios and plots and list them.

The exit codes every command uses (docs/testbed.md "The command-line contract"):
0 ok, 1 not found or a failed check, 2 usage / configuration / no such testbed, 3 invalid run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

EXIT_OK = 0
#: something asked for was not found, or a correctness check failed
EXIT_FAILED = 1
#: bad usage, a bad configuration, or no such testbed (argparse also exits 2)
EXIT_USAGE = 2
#: the run did not happen as planned (starved, fewer packets than planned, key event missing)
EXIT_INVALID = 3

#: default scheduling-delay limits of a live run: the 99th percentile and the largest single delay
DEFAULT_P99_MS = 20.0
DEFAULT_MAX_MS = 250.0


@dataclass(frozen=True)
class Check:
    """One check of a run: what was expected, what was measured, and whether it held."""

    name: str
    expected: str
    measured: Any
    ok: bool

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expected": self.expected, "measured": self.measured, "ok": self.ok}

    def reason(self) -> str:
        return f"{self.name}: expected {self.expected}, measured {_fmt(self.measured)}"


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


class Validity:
    """The checks of one run, in the order they were made."""

    def __init__(self, checks: Iterable[Check] = ()) -> None:
        self.checks: list[Check] = list(checks)

    # ------------------------------------------------------------------ making checks
    def add(self, name: str, ok: bool, expected: str, measured: Any) -> bool:
        self.checks.append(Check(name, expected, measured, bool(ok)))
        return bool(ok)

    def at_least(self, name: str, measured: float, minimum: float, note: str = "") -> bool:
        return self.add(name, measured >= minimum, f">= {_fmt(minimum)}{note}", measured)

    def at_most(self, name: str, measured: float, maximum: float, note: str = "") -> bool:
        return self.add(name, measured <= maximum, f"<= {_fmt(maximum)}{note}", measured)

    def planned(self, name: str, achieved: float, planned: float, share: float = 0.95) -> bool:
        """``achieved`` reached at least ``share`` of ``planned`` (packets sent, messages delivered)."""
        return self.add(name, achieved >= share * planned,
                        f">= {share:.0%} of {_fmt(planned)} planned", achieved)

    def near(self, name: str, measured: float, target: float, rel_tol: float) -> bool:
        """``measured`` within ``rel_tol`` of ``target`` (a rate, a duration)."""
        ok = abs(measured - target) <= rel_tol * abs(target)
        return self.add(name, ok, f"{_fmt(target)} +/- {rel_tol:.0%}", measured)

    def happened(self, name: str, ok: bool, measured: Any, expected: str = "yes") -> bool:
        """The scenario's key event took place (TCD: P2 was paused)."""
        return self.add(name, ok, expected, measured)

    def not_starved(self, lags: Mapping[str, Mapping[str, Any] | None], *, p99_ms: float = DEFAULT_P99_MS,
                    max_ms: float = DEFAULT_MAX_MS) -> bool:
        """Every process's scheduling delay (:func:`netstack.looplag.summary` by process name)
        within the limits; a process that reported nothing is named, not counted as starved."""
        worst_p99 = max(((n, s["p99_ms"]) for n, s in lags.items() if s and s.get("samples")),
                        key=lambda x: x[1], default=(None, 0.0))
        worst_max = max(((n, s["max_ms"]) for n, s in lags.items() if s and s.get("samples")),
                        key=lambda x: x[1], default=(None, 0.0))
        silent = sorted(n for n, s in lags.items() if not s or not s.get("samples"))
        measured = {"worst_p99_ms": worst_p99[1], "worst_p99_at": worst_p99[0],
                    "worst_max_ms": worst_max[1], "worst_max_at": worst_max[0],
                    "processes": len(lags) - len(silent)}
        if silent:
            measured["unmeasured"] = silent
        ok = worst_p99[1] <= p99_ms and worst_max[1] <= max_ms
        return self.add("scheduling delay", ok, f"p99 <= {p99_ms:g} ms and max <= {max_ms:g} ms in every process",
                        measured)

    def extend(self, other: Validity) -> None:
        self.checks.extend(other.checks)

    # ------------------------------------------------------------------ the verdict
    @property
    def valid(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def reasons(self) -> list[str]:
        return [c.reason() for c in self.checks if not c.ok]

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "checks": [c.to_dict() for c in self.checks]}

    def annotate(self, doc: dict[str, Any]) -> dict[str, Any]:
        """``doc`` with ``valid`` and ``checks`` set (returned for chaining)."""
        doc.update(self.to_dict())
        return doc

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Validity:
        """The checks a result document carries (none: a valid, unchecked run). A ``checks`` that
        is not a list of checks (a tool's own counters of that name) carries none."""
        checks = doc.get("checks")
        if not isinstance(checks, list):
            return cls()
        return cls(Check(c["name"], c["expected"], c["measured"], c["ok"]) for c in checks
                   if isinstance(c, Mapping) and {"name", "expected", "measured", "ok"} <= c.keys())


def verdict_line(doc: Mapping[str, Any], names: bool = False) -> str:
    """A run's verdict in one line for a human summary: ``VALID (N checks passed)`` (``names``:
    ``VALID (N checks: a, b)``), ``INVALID: <reasons>``, or ``validity: not checked``."""
    if "valid" not in doc:
        return "validity: not checked"
    v = Validity.of(doc)
    if doc["valid"]:
        if names:
            return f"VALID ({len(v.checks)} checks: {', '.join(c.name for c in v.checks)})"
        return f"VALID ({len(v.checks)} checks passed)"
    return "INVALID: " + "; ".join(v.reasons or ["the run says it is invalid"])


def invalid_line(reasons: Iterable[str]) -> str:
    return "INVALID RUN: " + "; ".join(reasons)


def finish(doc: Mapping[str, Any], ok_code: int = EXIT_OK, stream: TextIO | None = None) -> int:
    """A finished run's exit code: ``ok_code`` when ``doc`` is valid, else print ``INVALID RUN:
    <reasons>`` as the last line (stderr, after stdout is flushed) and return :data:`EXIT_INVALID`."""
    if doc.get("valid", True):
        return ok_code
    reasons = Validity.of(doc).reasons or ["the run says it is invalid"]
    sys.stdout.flush()
    print(invalid_line(reasons), file=stream or sys.stderr, flush=True)
    return EXIT_INVALID


__all__ = ["DEFAULT_MAX_MS", "DEFAULT_P99_MS", "EXIT_FAILED", "EXIT_INVALID", "EXIT_OK", "EXIT_USAGE", "Check",
           "Validity", "finish", "invalid_line",
           "verdict_line"]
