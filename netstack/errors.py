"""Exceptions shared across netstack (the wire-format one is headers.HeaderError)."""


class CommandError(Exception):
    """A user-facing failure: the CLI prints it as one clear line and exits with status 2."""
