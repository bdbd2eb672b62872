"""The papers' own numbers, kept as data files beside their source: ``docs/data/<paper>-paper/claims.toml``.

A paper whose authors published no figure data still states numbers in its text, tables and
figures. Each such number is one ``[[claim]]`` of the paper's ``claims.toml``, with where the
paper states it, so that the report's "paper" column is traceable and no module hard-codes it::

    [source]
    paper = "Masking Corruption Packet Losses in Datacenter Networks with Link-local Retransmission"
    how = "read off the paper's text and figures by hand"

    [[claim]]
    id = "fig8-effective-loss"          # unique in the file; the paper's module looks claims up by it
    figure = "Fig. 8"                   # the figure, table or section the report groups it under
    text = "effective loss at actual 1e-3 with LinkGuardian"
    value = 1e-8                        # omitted for a statement with no number
    unit = ""
    source = "§4.1, Fig. 8a (read off the plot)"

:func:`load` reads and checks such a file; a malformed one raises :class:`PaperDataError` naming
the file and the claim.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NetstackError
from .claims import Claim

#: the repository's docs/data (the editable install and a source checkout have it; netstack's
#: paper modules read their numbers from here)
DATA_ROOT = Path(__file__).resolve().parents[2] / "docs" / "data"


class PaperDataError(NetstackError):
    """A paper's claims file is missing or malformed."""


@dataclass(frozen=True)
class PaperClaim:
    id: str
    figure: str
    text: str
    value: float | None
    unit: str
    source: str


@dataclass(frozen=True)
class PaperClaims:
    path: Path
    paper: str
    how: str
    claims: dict[str, PaperClaim]

    def __getitem__(self, claim_id: str) -> PaperClaim:
        try:
            return self.claims[claim_id]
        except KeyError:
            raise PaperDataError(f"{self.path}: no claim {claim_id!r}") from None

    def value(self, claim_id: str) -> float:
        v = self[claim_id].value
        if v is None:
            raise PaperDataError(f"{self.path}: claim {claim_id!r} has no value")
        return v


def _claim(path: Path, n: int, raw: Any) -> PaperClaim:
    if not isinstance(raw, dict):
        raise PaperDataError(f"{path}: claim #{n + 1} is not a table")
    where = f"{path}: claim #{n + 1} ({raw.get('id', 'no id')})"
    for key in ("id", "figure", "text", "source"):
        if not isinstance(raw.get(key), str) or not raw[key]:
            raise PaperDataError(f"{where}: {key!r} must be a non-empty string")
    value = raw.get("value")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise PaperDataError(f"{where}: 'value' must be a number")
    unknown = set(raw) - {"id", "figure", "text", "value", "unit", "source"}
    if unknown:
        raise PaperDataError(f"{where}: unknown keys {sorted(unknown)}")
    return PaperClaim(raw["id"], raw["figure"], raw["text"], None if value is None else float(value),
                      str(raw.get("unit", "")), raw["source"])


def load(paper: str, root: Path | None = None) -> PaperClaims:
    """``<root>/<paper>-paper/claims.toml`` (root: :data:`DATA_ROOT`)."""
    path = (root or DATA_ROOT) / f"{paper}-paper" / "claims.toml"
    try:
        doc = tomllib.loads(path.read_text())
    except OSError as exc:
        raise PaperDataError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PaperDataError(f"{path}: not TOML: {exc}") from None
    source = doc.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("paper"), str):
        raise PaperDataError(f"{path}: needs a [source] table with 'paper'")
    raw = doc.get("claim", [])
    if not isinstance(raw, list):
        raise PaperDataError(f"{path}: 'claim' must be an array of tables ([[claim]])")
    claims: dict[str, PaperClaim] = {}
    for n, item in enumerate(raw):
        c = _claim(path, n, item)
        if c.id in claims:
            raise PaperDataError(f"{path}: claim id {c.id!r} twice")
        claims[c.id] = c
    return PaperClaims(path, source["paper"], str(source.get("how", "")), claims)


def claim(pc: PaperClaim, ours: float | None, **kw: Any) -> Claim:
    """A report row for the paper's claim ``pc``: its text, value, unit and source, ours beside
    them; ``kw`` are :class:`netstack.reproduce.claims.Claim`'s other fields (runtime, scale,
    scale_factor, tolerance, validity, check, note, ours_source; ``unit`` and ``source`` override the
    file's)."""
    kw.setdefault("unit", pc.unit)
    kw.setdefault("source", pc.source)
    return Claim(claim=pc.text, paper=pc.value, ours=ours, **kw)
