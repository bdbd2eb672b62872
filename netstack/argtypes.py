"""argparse types the commands and the daemons share: whole numbers and numbers in a range.

(Here, not in netstack/commands: the daemons may not import the command modules.)"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def positive_int(what: str = "it") -> Callable[[str], int]:
    """A whole number >= 1; ``what`` names it in the error ("the count must be at least 1")."""
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at least 1")
        return value
    return convert


def positive_float(what: str = "it") -> Callable[[str], float]:
    """A number > 0; ``what`` names it in the error ("the time must be positive")."""
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be positive (> 0)")
        return value
    return convert


def non_negative_float(what: str = "it", most: float | None = None) -> Callable[[str], float]:
    """A finite number >= 0 (and <= ``most`` when given); ``what`` names it in the error."""
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not 0 <= value < float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: {what} cannot be negative (or infinite)")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at most {most:g}")
        return value
    return convert
