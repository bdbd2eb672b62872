"""What ``netstack reproduce`` reports: a paper's claims, ours beside each, and a verdict computed
from a stated tolerance (never written by hand).

The model, from the top:

- :class:`PaperSpec`: one paper. Its experiments (the ``netstack bench`` runs that measure it, in
  ``--quick`` and ``--full`` form) and a function that turns those runs' result documents into
  figures.
- :class:`Figure`: one figure, table or section of the paper. It has images (our PNG with the
  paper's series overlaid, where the bench draws one), an optional :class:`Shape` (the trend the
  paper shows: "R below BE", "grows with hosts"), and its claims.
- :class:`Claim`: one number or statement of the paper beside ours.

Verdicts (:func:`verdict`):

- *not attempted*: ours is ``None``. The claim has no experiment, or this run did not measure it;
  ``note`` says which.
- *not reproduced*: the runs behind ours were not valid (a starved live run is not evidence), or
  the number is outside the tolerance and the figure's shape does not hold either.
- *reproduced*: the number is within the tolerance (at the stated scale), or a claim with no
  number (a statement) whose check holds.
- *shape only*: the number is outside the tolerance, but the figure's shape holds.

The tolerance is on ``at_scale = (ours / paper) / scale_factor``: ``scale_factor`` is the ratio
the scale alone predicts (1.0 where our setup is the paper's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REPRODUCED = "reproduced"
SHAPE_ONLY = "shape only"
NOT_REPRODUCED = "not reproduced"
NOT_ATTEMPTED = "not attempted"
VERDICTS = (REPRODUCED, SHAPE_ONLY, NOT_REPRODUCED, NOT_ATTEMPTED)

#: the runtimes a number can come from
RUNTIMES = ("live", "sim", "in process", "computed")


@dataclass(frozen=True)
class Tolerance:
    """Reproduced when ``lo <= at_scale <= hi``. The default is the factor of 2 the issues use for
    "same order" ("where a number differs by more than 2x ... the doc says why")."""

    lo: float = 0.5
    hi: float = 2.0

    def holds(self, at_scale: float) -> bool:
        return self.lo <= at_scale <= self.hi

    def text(self) -> str:
        if self.lo > 0 and math.isclose(self.lo * self.hi, 1.0, rel_tol=1e-9):
            return f"within {self.hi:g}x"
        return f"{self.lo:g}-{self.hi:g}x"

    def to_dict(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "text": self.text()}


#: the default tolerance: a factor of 2 either way
WITHIN_2X = Tolerance()


@dataclass(frozen=True)
class Check:
    """One validity check of a run behind a number (netstack.validity's ``checks``)."""

    name: str
    expected: str
    measured: Any
    ok: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Check:
        return cls(str(d.get("name", "")), str(d.get("expected", "")), d.get("measured"), bool(d.get("ok")))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "expected": self.expected, "measured": self.measured, "ok": self.ok}


@dataclass(frozen=True)
class Validity:
    """Whether the runs behind a number are evidence. ``valid=None``: nothing to judge (virtual time
    and in-process measurements cannot be starved; ``note`` says so)."""

    valid: bool | None = None
    checks: tuple[Check, ...] = ()
    note: str = ""

    @classmethod
    def of_run(cls, doc: Mapping[str, Any] | None) -> Validity:
        """From a run document's ``valid`` and ``checks`` (the ``netstack.run/1`` schema); anything
        else (not a mapping, no ``valid``) has nothing to judge."""
        if not isinstance(doc, Mapping) or "valid" not in doc:
            return cls(None, (), "no validity checks recorded")
        raw = doc.get("checks")
        checks = tuple(Check.from_dict(c) for c in raw if isinstance(c, Mapping)) if isinstance(raw, list) else ()
        return cls(bool(doc["valid"]), checks)

    @classmethod
    def of_runs(cls, docs: Sequence[Mapping[str, Any]]) -> Validity:
        """Every run must be valid; the failed checks (all of them when every one held) are kept."""
        parts = [cls.of_run(d) for d in docs]
        judged = [p for p in parts if p.valid is not None]
        if not judged:
            return cls(None, (), "no validity checks recorded")
        ok = all(p.valid for p in judged)
        # an invalid set keeps only the checks that failed (the reasons); a valid one keeps them all
        checks = [c for p in judged for c in p.checks if ok or not c.ok]
        return cls(ok, tuple(checks), f"{len(judged)} run(s)")

    def text(self) -> str:
        if self.valid is None:
            return self.note or "n/a"
        if self.valid:
            held = f"valid ({len(self.checks)} checks held)" if self.checks else "valid"
            return f"{held}; {self.note}" if self.note else held
        failed = [c for c in self.checks if not c.ok]
        return "INVALID: " + "; ".join(f"{c.name}: expected {c.expected}, measured {c.measured}" for c in failed)

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "checks": [c.to_dict() for c in self.checks], "note": self.note,
                "text": self.text()}


#: a virtual-time number: nothing can starve it
VIRTUAL_TIME = Validity(None, (), "virtual time (cannot be starved)")
#: a number measured in one process, with no timing involved (a count, a data structure's state)
IN_PROCESS = Validity(None, (), "in process, no timing")


@dataclass(frozen=True)
class Shape:
    """The trend a figure shows, and whether ours shows it. ``holds=None``: not measured."""

    text: str
    holds: bool | None
    measured: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "holds": self.holds, "measured": self.measured}


@dataclass(frozen=True)
class Claim:
    """One number (or statement) the paper states, and ours.

    ``paper`` is None for a statement with no number ("ECN marks the victim flow"): then ``check``
    says whether ours holds, and ``ours`` is what was measured (a number, or None when the statement
    was not attempted)."""

    claim: str
    paper: float | None
    ours: float | None
    unit: str = ""
    #: where the paper states it: "Fig. 8 (authors' data file total_order)", "§4.1 text", "abstract"
    source: str = ""
    runtime: str = "sim"
    #: how our setup maps to the paper's, in words, and the ratio that scale alone predicts
    scale: str = "paper scale"
    scale_factor: float = 1.0
    tolerance: Tolerance = WITHIN_2X
    validity: Validity = VIRTUAL_TIME
    #: for a statement (paper is None): whether ours holds it
    check: bool | None = None
    #: why there is no number, or what to know about it
    note: str = ""
    #: where ours comes from: the bench section and field
    ours_source: str = ""

    @property
    def ratio(self) -> float | None:
        if self.paper is None or self.ours is None or self.paper == 0:
            return None
        return self.ours / self.paper

    @property
    def at_scale(self) -> float | None:
        r = self.ratio
        if r is None or not self.scale_factor:
            return None
        return r / self.scale_factor


def verdict(claim: Claim, shape: Shape | None) -> tuple[str, str]:
    """(verdict, why), computed from the claim, its tolerance and its figure's shape."""
    if claim.ours is None and claim.check is None:
        return NOT_ATTEMPTED, claim.note or "not measured"
    if claim.validity.valid is False:
        return NOT_REPRODUCED, "the run was not valid: " + claim.validity.text()
    if claim.paper is None:
        if claim.check is None:
            return NOT_ATTEMPTED, claim.note or "no check for this statement"
        return (REPRODUCED, "the statement holds") if claim.check else (NOT_REPRODUCED, "the statement does not hold")
    at = claim.at_scale
    if at is None:
        return NOT_ATTEMPTED, "no ratio: the paper's value is 0"
    if claim.tolerance.holds(at):
        return REPRODUCED, f"{at:.3g} at scale, {claim.tolerance.text()}"
    why = f"{at:.3g} at scale, outside the tolerance ({claim.tolerance.text()})"
    if shape is not None and shape.holds:
        return SHAPE_ONLY, why + "; the figure's shape holds"
    if shape is not None and shape.holds is False:
        return NOT_REPRODUCED, why + "; the figure's shape does not hold either"
    return NOT_REPRODUCED, why


@dataclass(frozen=True)
class Figure:
    """One figure, table or section of a paper, with our images and its claims."""

    id: str
    title: str
    claims: tuple[Claim, ...] = ()
    shape: Shape | None = None
    #: our images, the paper's series overlaid where known: file names the benches wrote (looked up in
    #: each of the paper's experiment directories), or ``<experiment id>/<file>``
    images: tuple[str, ...] = ()
    #: where the paper's series came from (a data file of the authors', the text)
    paper_source: str = ""
    note: str = ""

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for c in self.claims:
            v, why = verdict(c, self.shape)
            out.append({
                "figure": self.id, "claim": c.claim, "paper": c.paper, "ours": c.ours, "unit": c.unit,
                "ratio": c.ratio, "at_scale": c.at_scale, "scale": c.scale, "scale_factor": c.scale_factor,
                "tolerance": c.tolerance.to_dict(), "runtime": c.runtime, "validity": c.validity.to_dict(),
                "check": c.check, "source": c.source, "ours_source": c.ours_source, "note": c.note,
                "verdict": v, "why": why,
            })
        return out

    def verdict(self) -> str:
        """The figure's own verdict: the shape's if it has one, else the worst of its claims'."""
        verdicts = [r["verdict"] for r in self.rows()]
        attempted = [v for v in verdicts if v != NOT_ATTEMPTED]
        if not attempted:
            return NOT_ATTEMPTED
        for v in (NOT_REPRODUCED, SHAPE_ONLY):
            if v in attempted:
                return v
        return REPRODUCED

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "shape": self.shape.to_dict() if self.shape else None,
                "images": list(self.images), "paper_source": self.paper_source, "note": self.note,
                "verdict": self.verdict(), "claims": self.rows()}


@dataclass(frozen=True)
class Experiment:
    """One ``netstack bench`` run a paper's figures read: ``netstack bench NAME ARGS...`` with
    ``--results-dir`` set by the runner. ``needs_root``: it builds namespaces (skipped, with the
    reason in the report, when not root). ``minutes``: what it took here, for the plan."""

    bench: str
    quick: tuple[str, ...] = ()
    full: tuple[str, ...] = ()
    needs_root: bool = False
    quick_minutes: float = 1.0
    full_minutes: float = 5.0
    #: what it measures, in a few words (the report's list of runs)
    what: str = ""
    #: the bench accepts --workers (its virtual-time sweeps go to processes)
    workers: bool = False
    #: the name its result document goes by in ``figures``' results, and its directory's name
    #: (default: the bench's name; set it when a paper runs one bench twice, e.g. sim and live)
    key: str = ""

    @property
    def id(self) -> str:
        return self.key or self.bench

    def args(self, mode: str) -> tuple[str, ...]:
        return self.quick if mode == "quick" else self.full

    def minutes(self, mode: str) -> float:
        return self.quick_minutes if mode == "quick" else self.full_minutes


#: an experiment's result document by its id (``Experiment.id``: the bench's name unless ``key`` is
#: set); None: it did not run, or wrote nothing
Results = Mapping[str, Mapping[str, Any] | None]


@dataclass(frozen=True)
class PaperSpec:
    """One paper: its name on the command line, its title, its experiments and how to read them."""

    name: str
    title: str
    experiments: tuple[Experiment, ...]
    #: results -> figures; must not raise on a missing or partial document (a claim then has ours=None
    #: and a note)
    figures: Callable[[Results], list[Figure]]
    #: one paragraph: what the paper claims and what netstack measures of it
    summary: str = ""
    #: the paper's own data files and where they came from (repo paths), if any
    data_sources: tuple[str, ...] = field(default_factory=tuple)
