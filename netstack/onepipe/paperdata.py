"""The 1Pipe paper's figure data (Li et al., "1Pipe: Scalable Total Order Communication in Data
Center Networks", SIGCOMM 2021, §7), as the authors keep it for gnuplot: one text file per figure
in their paper repository, copied byte for byte to ``docs/data/onepipe-paper/`` (SOURCE.md there
names the repository, the commit, each file's figure, columns and units).

The format is gnuplot's: a header line of column names (separated by tabs or spaces, a name with
a space in double quotes), then one line per x value: the x label (a number, or a label such as
``1:1``), then one number per remaining column. Tabs and runs of spaces (and the odd non-breaking
space in the authors' files) separate fields; blank lines and ``#`` comments are skipped. An
error-bar figure (Fig. 9a, Fig. 10) repeats ``min`` and ``max`` after each series: a repeated
name is qualified by the last unrepeated column before it (``BE-chip min``).

:func:`parse` turns any text into a :class:`PaperTable` or raises :class:`PaperDataError` saying
which line and why; it never fails otherwise.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import NetstackError

#: the copies of the authors' files (docs/data/onepipe-paper/SOURCE.md)
DATA_DIR = Path(__file__).resolve().parents[2] / "docs" / "data" / "onepipe-paper"
#: where they come from (SOURCE.md says the same)
SOURCE_REPO = "https://github.com/bojieli/1Pipe-paper"
SOURCE_COMMIT = "dce626abe9a089c05a4420ac6228a31e4cc1e203"

#: a quoted name, or a run of non-space characters (Python's ``\\s`` includes U+00A0)
_TOKEN = re.compile(r'"([^"]*)"|(\S+)')


class PaperDataError(NetstackError, ValueError):
    """A figure data file that is not in the format above (which file and line, and why)."""


@dataclass(frozen=True)
class PaperSeries:
    """One column of a figure: its value at each x label, in the file's order."""

    name: str
    xs: tuple[str, ...]
    ys: tuple[float, ...]

    def at(self, x: str) -> float | None:
        """The value at x label ``x`` exactly (no interpolation), or None."""
        return self.ys[self.xs.index(x)] if x in self.xs else None

    def points(self) -> list[tuple[str, float]]:
        return list(zip(self.xs, self.ys, strict=True))


@dataclass(frozen=True)
class PaperTable:
    """One data file: the x column's name, the x labels, and every other column as a series."""

    name: str
    x_name: str
    xs: tuple[str, ...]
    series: dict[str, PaperSeries]

    def __getitem__(self, name: str) -> PaperSeries:
        try:
            return self.series[name]
        except KeyError:
            raise PaperDataError(f"{self.name}: no column {name!r} (columns: {', '.join(self.series)})") from None


def x_value(label: str) -> float | None:
    """An x label as a number (``"1e-5"`` -> 1e-05), or None for a label that is not one (``"1:1"``)."""
    try:
        v = float(label)
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _header(line: str, where: str) -> list[str]:
    names = [bare or quoted for quoted, bare in _TOKEN.findall(line)]
    if any('"' in bare for _, bare in _TOKEN.findall(line)):
        raise PaperDataError(f"{where}: an unmatched double quote in the header")
    if len(names) < 2:
        raise PaperDataError(f"{where}: the header names {len(names)} column(s); an x column and at least one "
                             "series are needed")
    if any(not n.strip() for n in names):
        raise PaperDataError(f"{where}: an empty column name in the header")
    counts = Counter(names)
    out: list[str] = []
    last = names[0]
    for n in names:
        if counts[n] > 1:
            out.append(f"{last} {n}")
        else:
            out.append(n)
            last = n
    dup = sorted(n for n, c in Counter(out).items() if c > 1)
    if dup:
        raise PaperDataError(f"{where}: column name(s) {', '.join(map(repr, dup))} appear more than once")
    return out


def _number(tok: str, where: str, column: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise PaperDataError(f"{where}: column {column!r}: {tok!r} is not a number") from None
    if not math.isfinite(v):
        raise PaperDataError(f"{where}: column {column!r}: {tok!r} is not a finite number")
    return v


def parse(text: str, name: str = "<text>") -> PaperTable:
    """``text`` (one figure's data file) as a :class:`PaperTable`; :class:`PaperDataError` if it
    is not one (no header, a row with too few or too many fields, a field that is not a number, an
    x label twice)."""
    columns: list[str] | None = None
    xs: list[str] = []
    rows: list[list[float]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{lineno}"
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if columns is None:
            columns = _header(line, where)
            continue
        fields = line.split()
        if len(fields) != len(columns):
            raise PaperDataError(f"{where}: {len(fields)} fields, the header names {len(columns)}")
        if fields[0] in xs:
            raise PaperDataError(f"{where}: x {fields[0]!r} appears twice")
        xs.append(fields[0])
        rows.append([_number(t, where, c) for t, c in zip(fields[1:], columns[1:], strict=True)])
    if columns is None:
        raise PaperDataError(f"{name}: no header line")
    if not rows:
        raise PaperDataError(f"{name}: a header and no data rows")
    series = {c: PaperSeries(c, tuple(xs), tuple(r[i] for r in rows)) for i, c in enumerate(columns[1:])}
    return PaperTable(name, columns[0], tuple(xs), series)


def load(name: str, root: Path | None = None) -> PaperTable:
    """The data file ``name`` (``"total_order"``) from ``root`` (default :data:`DATA_DIR`)."""
    path = (root or DATA_DIR) / name
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise PaperDataError(f"{path}: no such paper data file (docs/data/onepipe-paper/SOURCE.md lists them)") \
            from None
    except UnicodeDecodeError as exc:
        raise PaperDataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return parse(text, name)


__all__ = ["DATA_DIR", "SOURCE_COMMIT", "SOURCE_REPO", "PaperDataError", "PaperSeries", "PaperTable", "load",
           "parse", "x_value"]
