"""Exceptions shared across netstack (the wire-format one is headers.HeaderError)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is missing, malformed or inconsistent (a switch's, a protocol's).

    ``field`` names the field (``"port p1: xoff_bytes"``), ``problem`` says what is wrong.
    """

    def __init__(self, field_name: str, problem: str) -> None:
        self.field = field_name
        self.problem = problem
        super().__init__(f"{field_name}: {problem}")


class CommandError(Exception):
    """A user-facing failure: the CLI prints it as one clear line and exits with status 2."""
