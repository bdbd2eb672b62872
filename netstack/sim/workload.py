"""Flow-size distributions for the host models: a fixed size, or an empirical CDF from a file.

LinkGuardian Fig. 2 plots the flow sizes of datacenter workloads measured from 2008
to 2019, and §4.3 draws its single-packet flows (143 B) from the most frequent size of one of
them. Simulated workloads draw from such distributions. netstack ships three as CDF files
(``netstack/sim/workloads/*.cdf``), usable by name:

- ``websearch``: the web-search workload measured for DCTCP (Alizadeh et al., SIGCOMM 2010),
  in the form the pFabric and HPCC simulations use;
- ``fb-hadoop``: Facebook's Hadoop cluster (Roy et al., "Inside the Social Network's
  (Datacenter) Network", SIGCOMM 2015), as HPCC uses it;
- ``google-rpc``: Google's RPC sizes (all RPCs, 2008) as used by the Homa paper (Montazeri et
  al., SIGCOMM 2018), sampled to every few points.

A CDF file has one point per line, ``SIZE_BYTES CUMULATIVE`` (cumulative probability in [0, 1],
or in percent when the last point says 100), sizes and probabilities non-decreasing, the last
probability 1 (100 %). ``#`` starts a comment. Sampling interpolates linearly between points,
as the generators of those papers do; a first point with probability above 0 is an atom at
its size.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import random
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

#: shipped CDF files, by name
WORKLOADS_DIR = Path(__file__).resolve().parent / "workloads"
#: the largest flow a distribution may describe (1 TB): a larger one is a unit mistake
MAX_FLOW_BYTES = 10**12


class WorkloadError(ValueError):
    """A flow-size specification or CDF file that cannot be used: the message says where and why."""


class FlowSizes(Protocol):
    """A flow-size distribution: ``sample(rng)`` draws one size in bytes (>= 1)."""

    name: str

    def sample(self, rng: random.Random) -> int: ...

    def mean(self) -> float: ...


@dataclass(frozen=True)
class Fixed:
    """Every flow has ``size`` bytes (LinkGuardian §4.3: 143 B and 24,387 B flows)."""

    size: int

    def __post_init__(self) -> None:
        if not 1 <= self.size <= MAX_FLOW_BYTES:
            raise WorkloadError(f"flow size must be 1..{MAX_FLOW_BYTES} bytes, got {self.size}")

    @property
    def name(self) -> str:
        return str(self.size)

    def sample(self, rng: random.Random) -> int:
        return self.size

    def mean(self) -> float:
        return float(self.size)


class EmpiricalCDF:
    """A piecewise-linear CDF through ``points`` ((size, cumulative probability), checked)."""

    def __init__(self, points: list[tuple[float, float]], name: str = "cdf") -> None:
        self.name = name
        _check_points(points, name)
        self.sizes = [float(s) for s, _ in points]
        self.probs = [float(p) for _, p in points]

    @classmethod
    def from_file(cls, path: str | Path, name: str | None = None) -> EmpiricalCDF:
        path = Path(path)
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise WorkloadError(f"{path}: cannot read: {exc}") from None
        return cls.from_text(text, path, name)

    @classmethod
    def from_text(cls, text: str, path: str | Path, name: str | None = None) -> EmpiricalCDF:
        """A CDF file's text (``path`` names it in errors, its stem is the default name)."""
        path = Path(path)
        points: list[tuple[float, float]] = []
        for lineno, line in enumerate(text.splitlines(), 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2:
                raise WorkloadError(f"{path}:{lineno}: want 'SIZE_BYTES CUMULATIVE', got {line!r}")
            try:
                size, prob = float(parts[0]), float(parts[1])
            except ValueError:
                raise WorkloadError(f"{path}:{lineno}: {line!r} is not two numbers") from None
            points.append((size, prob))
        if points and points[-1][1] == 100.0:
            points = [(s, p / 100.0) for s, p in points]  # a file in percent
        return cls(points, name or path.stem)

    def sample(self, rng: random.Random) -> int:
        u = rng.random()
        probs, sizes = self.probs, self.sizes
        i = bisect.bisect_left(probs, u)
        if i == 0:
            return max(1, round(sizes[0]))
        p0, p1 = probs[i - 1], probs[i]
        s0, s1 = sizes[i - 1], sizes[i]
        x = s1 if p1 == p0 else s0 + (s1 - s0) * (u - p0) / (p1 - p0)
        return max(1, round(x))

    def mean(self) -> float:
        """The mean size in bytes: the atom at the first point, then each segment's midpoint."""
        total = self.probs[0] * self.sizes[0]
        for i in range(1, len(self.sizes)):
            total += (self.probs[i] - self.probs[i - 1]) * (self.sizes[i] + self.sizes[i - 1]) / 2
        return max(1.0, total)


def _check_points(points: list[tuple[float, float]], where: str) -> None:
    if len(points) < 1:
        raise WorkloadError(f"{where}: no points")
    prev_s, prev_p = -1.0, -1.0
    for i, (s, p) in enumerate(points, 1):
        if not (0 <= s <= MAX_FLOW_BYTES):
            raise WorkloadError(f"{where}: point {i}: size {s:g} is outside 0..{MAX_FLOW_BYTES} bytes")
        if not (0.0 <= p <= 1.0):
            raise WorkloadError(f"{where}: point {i}: probability {p:g} is outside [0, 1] (or 0..100 %)")
        if s < prev_s or p < prev_p:
            raise WorkloadError(f"{where}: point {i}: sizes and probabilities must not decrease")
        prev_s, prev_p = s, p
    if points[-1][1] != 1.0:
        raise WorkloadError(f"{where}: the last point's probability is {points[-1][1]:g}, not 1 (100 %)")


def shipped() -> dict[str, Path]:
    """The CDF files netstack ships, by name."""
    return {p.stem: p for p in sorted(WORKLOADS_DIR.glob("*.cdf"))}


def flow_sizes(spec: str | int) -> FlowSizes:
    """A distribution from ``spec``: a whole number of bytes (``143``), a shipped workload's name
    (``websearch``), or the path of a CDF file."""
    if isinstance(spec, int) and not isinstance(spec, bool):
        return Fixed(spec)
    text = str(spec).strip()
    if text.isdigit():
        return Fixed(int(text))
    files = shipped()
    if text in files:
        return EmpiricalCDF.from_file(files[text])
    carried = _CARRIED.get()
    if text in carried:  # sent with the run: the file is on the machine that started it
        return EmpiricalCDF.from_text(carried[text], text)
    path = Path(text)
    if path.is_file():
        return EmpiricalCDF.from_file(path)
    raise WorkloadError(f"flow size {spec!r}: not a number of bytes, a shipped workload "
                        f"({', '.join(files)}) or a CDF file")


#: CDF files' texts by path, sent with a run (:func:`carrying`): what :func:`flow_sizes` reads
#: first. A context variable, so that runs on a Dask worker's threads do not see each other's
_CARRIED: contextvars.ContextVar[Mapping[str, str]] = contextvars.ContextVar(
    "netstack_carried_files", default=types.MappingProxyType({}))


@contextlib.contextmanager
def carrying(files: Mapping[str, str]) -> Iterator[None]:
    """While it lasts, :func:`flow_sizes` finds the files of ``files`` (path -> text) without the
    file system: a sweep's worker on another machine (``RunSpec.files``) has no copy of them."""
    token = _CARRIED.set({**_CARRIED.get(), **files})
    try:
        yield
    finally:
        _CARRIED.reset(token)


__all__ = ["MAX_FLOW_BYTES", "EmpiricalCDF", "Fixed", "FlowSizes", "WorkloadError", "carrying", "flow_sizes",
           "shipped"]
