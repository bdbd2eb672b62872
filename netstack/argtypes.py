"""argparse types the commands, the daemons and the host tools share: every option's converter.

A converter takes the option's text and returns the value, or raises argparse.ArgumentTypeError
with a message that quotes the text and says what is wanted (argparse prints it as a usage error,
exit 2). Those that depend on what the option means are factories (``positive_int("the count")``,
``int_between(0, 7, "a priority class")``); the others are used as they are (``type=probability``).
Rates, sizes and delays take the topology file's syntax (netstack.topo.model), imported only when an
option is converted so that ``--help`` stays light.

(Here, not in netstack/commands: the daemons may not import the command modules.)"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")



def _number(text: str) -> float:
    """``text`` as a float, or the argparse error every number converter gives."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _whole(text: str) -> int:
    """``text`` as an int, or the argparse error every whole-number converter gives."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(what: str = "it") -> Callable[[str], int]:
    """A whole number >= 1; ``what`` names it in the error ("the count must be at least 1")."""
    def convert(text: str) -> int:
        value = _whole(text)
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at least 1")
        return value
    return convert


def positive_float(what: str = "it") -> Callable[[str], float]:
    """A finite number > 0; ``what`` names it in the error ("the time must be positive")."""
    def convert(text: str) -> float:
        value = _number(text)
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be positive (> 0)")
        if math.isinf(value):  # "inf" parses, and would make a time or rate endless
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be finite")
        return value
    return convert


def non_negative_float(what: str = "it", most: float | None = None) -> Callable[[str], float]:
    """A finite number >= 0 (and <= ``most`` when given); ``what`` names it in the error."""
    def convert(text: str) -> float:
        value = _number(text)
        if not 0 <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: {what} cannot be negative (or infinite)")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at most {most:g}")
        return value
    return convert


def finite_float(text: str) -> float:
    """Any finite number, negative ones included (a clock step)."""
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def probability(text: str) -> float:
    """A number in [0, 1] (a fraction of frames)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability in [0, 1]")
    return value


def int_between(lo: int, hi: int, what: str = "it", *, refusal: str | None = None) -> Callable[[str], int]:
    """A whole number in ``lo``..``hi``; ``what`` names it ("a priority class must be 0 to 7"),
    or ``refusal`` is the whole message after the quoted text, for values that must be refused in
    the words used elsewhere (see :func:`tcp_port_between`)."""
    tail = refusal if refusal is not None else f": {what} must be {lo} to {hi}"

    def convert(text: str) -> int:
        value = _whole(text)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{text!r}{tail}")
        return value
    return convert


def tcp_port_between(lo: int, hi: int) -> Callable[[str], int]:
    """A TCP port in ``lo``..``hi``, refused in the words the topology loader uses for the same
    value ("'80' is not a TCP port in 1024..65000"), so the file and the flag read alike."""
    return int_between(lo, hi, refusal=f" is not a TCP port in {lo}..{hi}")


def uint32(text: str) -> int:
    """A 32-bit unsigned integer, in decimal or with a 0x / 0o / 0b prefix (a DTA key or value)."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError(f"{text!r} is not a 32-bit unsigned integer")
    return value


def int_list(what: str = "whole numbers", example: str = "1,2") -> Callable[[str], list[int]]:
    """Comma-separated whole numbers (empty items skipped); the error names ``what`` and shows
    ``example`` ("not a list of classes such as 0 or 0,3")."""
    def convert(text: str) -> list[int]:
        try:
            return [int(c) for c in text.split(",") if c.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a list of {what} such as {example}") from None
    return convert


def pair(convert: Callable[[str], T], what: str) -> Callable[[str], tuple[T, T]]:
    """Two values ``A,B``, each through ``convert``; ``what`` says what two are wanted
    ("give two probabilities, P_GB,P_BG")."""
    def both(text: str) -> tuple[T, T]:
        parts = text.split(",")
        if len(parts) != 2:
            raise argparse.ArgumentTypeError(f"{text!r}: give {what}")
        return convert(parts[0]), convert(parts[1])
    return both


def name_value(what: str = "a field") -> Callable[[str], tuple[str, Any]]:
    """``NAME=VALUE`` with a number or true/false as the value (a parameter override): ``(name,
    value)``; ``what`` says what the name is ("a DcqcnParams field")."""
    def convert(text: str) -> tuple[str, Any]:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE ({what})")
        low = value.strip().lower()
        if low in ("true", "false"):
            return name.strip(), low == "true"
        for number in (int, float):
            try:
                return name.strip(), number(value)
            except ValueError:
                continue
        raise argparse.ArgumentTypeError(f"{text!r}: {value!r} is not a number")
    return convert


def _quantity(kind: str, text: str, bare_int: bool) -> int:
    from .topo import model

    parse: Callable[[Any], int] = getattr(model, f"parse_{kind}")
    try:
        # a bare number is bits/s or bytes; a delay always has its unit (only "0" has none)
        return parse(int(text) if bare_int and text.strip().isdigit() else text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def rate_bps(text: str) -> int:
    """A rate in bit/s: ``"80Mbit"``, ``"1Gbit"`` or a bare number of bit/s (at least 1)."""
    return _quantity("rate", text, bare_int=True)


def size_bytes(text: str) -> int:
    """A size in bytes: ``"4MB"``, ``"256KiB"`` or a bare number of bytes (at least 1)."""
    return _quantity("size", text, bare_int=True)


def delay_ns(text: str) -> int:
    """A time in nanoseconds, above 0: ``"50ms"``, ``"20us"`` (the topology file's delay syntax)."""
    value = _quantity("delay", text, bare_int=False)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be above 0")
    return value


__all__ = ["delay_ns", "finite_float", "int_between", "int_list", "name_value", "non_negative_float", "pair",
           "positive_float", "positive_int", "probability", "rate_bps", "size_bytes", "tcp_port_between", "uint32"]
