"""What every section's checks share: the list the problems go into (a field's path and what is
wrong with it), the checks of one field (a table, no unknown key, an integer in range, a value
a parser takes) and the patterns names must match."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..values import show

# Every validation regex is anchored with \A...\Z and used with fullmatch: "$" would also
# match before a trailing newline, and "h1\n" would pass as a node name.
NODE_NAME_RE = re.compile(r"\A[A-Za-z][A-Za-z0-9_]*\Z")
PREFIX_RE = re.compile(r"\A[a-z][a-z0-9]*\Z")
LINK_NAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
IFNAME_RE = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.-]*\Z")
MAC_RE = re.compile(r"\A[0-9a-f]{2}(:[0-9a-f]{2}){5}\Z")


class Errors:
    """The problems found so far, each ``(path, problem)``, in the order the checks found them."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, problem: str) -> None:
        self.items.append((path, problem))

    def __bool__(self) -> bool:
        return bool(self.items)


def unknown_keys(errors: Errors, path: str, table: Mapping[str, Any], allowed: set[str]) -> None:
    for key in table:
        if key not in allowed:
            where = f"{path}.{key}" if path else key
            errors.add(where, f"unknown key (allowed: {', '.join(sorted(allowed))})")


def as_table(errors: Errors, path: str, value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict):
        errors.add(path, f"must be a table, not {type(value).__name__}")
        return None
    return value


def int_field(errors: Errors, path: str, value: Any, lo: int, hi: int) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        errors.add(path, f"{show(value)} is not an integer")
        return None
    if not lo <= value <= hi:
        errors.add(path, f"{show(value)} is out of range [{lo}, {hi}]")
        return None
    return value


def parsed(errors: Errors, path: str, value: Any, parser: Any) -> Any:
    try:
        return parser(value)
    except (ValueError, OverflowError) as exc:  # the parsers bound their values; OverflowError is a safety net
        errors.add(path, str(exc))
        return None
