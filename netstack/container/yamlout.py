"""A small, deterministic YAML writer for the compose files netstack generates.

Compose files are plain mappings, lists and scalars; a writer of our own keeps the output
stable byte for byte (the shipped docker-compose.yml is compared with a fresh one in a test)
and costs no dependency. Strings that YAML could read as something else are double-quoted
(JSON's quoting is valid YAML); multi-line strings become literal blocks.
"""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = re.compile(r"\A[A-Za-z_/][A-Za-z0-9_./=-]*\Z")
#: words YAML 1.1 (PyYAML, docker-compose v1) reads as booleans or null
_SPECIAL = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def scalar(value: Any) -> str:
    if isinstance(value, list | dict) and not value:
        return "[]" if isinstance(value, list) else "{}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    if value is None:
        return "null"
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _SPECIAL:
        return text
    return quote(text)


def quote(text: str) -> str:
    """A YAML double-quoted scalar in printable ASCII (escapes for everything else; YAML's
    \\U takes a code point beyond the BMP whole, where JSON would write a surrogate pair)."""
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif o <= 0xFF:
            out.append(f"\\x{o:02x}")
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    out.append('"')
    return "".join(out)


def dump(data: Any, indent: int = 0) -> str:
    return "".join(_lines(data, indent))


def _inline(value: Any) -> str | None:
    """How ``value`` is written after "key: " or "- " on one line, or None if it takes lines."""
    if isinstance(value, list | dict):
        return None if value else ("[]" if isinstance(value, list) else "{}")
    if _multiline(value):
        return None
    return scalar(value)


def _lines(data: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(data, dict) and data:
        for key, value in data.items():
            k = scalar(key)
            one = _inline(value)
            if one is not None:
                out.append(f"{pad}{k}: {one}\n")
            elif isinstance(value, str):
                out += _block(f"{pad}{k}: ", pad + "  ", value)
            elif isinstance(value, list) and all(not isinstance(v, list | dict) and _inline(v) for v in value):
                out.append(f"{pad}{k}: [{', '.join(scalar(v) for v in value)}]\n")  # a flow list of scalars
            else:
                out.append(f"{pad}{k}:\n")
                out += _lines(value, indent + 2)
        return out
    if isinstance(data, list) and data:
        for item in data:
            one = _inline(item)
            if one is not None:
                out.append(f"{pad}- {one}\n")
            elif isinstance(item, str):
                out += _block(f"{pad}- ", pad + "  ", item)
            else:
                inner = _lines(item, indent + 2)
                out.append(f"{pad}- {inner[0].lstrip()}")
                out += inner[1:]
        return out
    one = _inline(data)
    return [pad + (one if one is not None else scalar(data)) + "\n"]


def _multiline(value: Any) -> bool:
    """A string written as a literal block: several lines of printable text (anything else is
    quoted, escapes and all)."""
    return (isinstance(value, str) and "\n" in value
            and all(ch.isprintable() or ch in "\n\t" for ch in value) and "\ufeff" not in value)


def _block(head: str, pad: str, text: str) -> list[str]:
    lines = text.split("\n")
    # chomping: "+" keeps every trailing newline, "-" none; an explicit indentation indicator
    # when the text starts with a space (the first line would otherwise set the indentation)
    chomp = "+" if text.endswith("\n") else "-"
    if chomp == "+":
        lines = lines[:-1]
    indicator = "2" if text[:1] == " " else ""
    return [f"{head}|{indicator}{chomp}\n", *(f"{pad}{line}\n" if line else "\n" for line in lines)]
