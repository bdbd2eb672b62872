"""Exceptions shared across netstack (the wire-format one is headers.HeaderError).

**One base for every failure netstack explains itself**: :class:`NetstackError`. A protocol's
control error (``LGControlError``, ``DTAError``, ``OnePipeControlError``, ``TcdControlError``,
``TransferError``), the runtime's (``RuntimeErrorNS``), a daemon's refusal on its control socket
(``netstack.io.control.ControlError``), a bad topology, fault, capture or key file, a bad
configuration value (:class:`ConfigError`) and a command's own usage error (:class:`CommandError`)
all derive from it, so that ``netstack.cli.main`` turns any of them into one line,
``netstack CMD: error: <message>``, and the exit code the class names (``exit_code``: 2, usage /
configuration / no such testbed; :class:`NotFound`: 1), with no per-command translation
(docs/testbed.md "The command-line contract"; docs/architecture.md "Errors and control verbs").

The name is not ``ControlError``: that is ``netstack.io.control.ControlError``, what a daemon's
handler raises to refuse a request (sent back as ``{"ok": false}``) and what the client raises
with the daemon's message. It is one kind of NetstackError.

The classes keep their older bases too (``RuntimeError``, ``ValueError``): code that catches those
still catches them. A command catches an error itself only to add something (a hint, exit 1), or
to turn a builtin one (``OSError``, ``ValueError``) into a :class:`CommandError`.
"""

from __future__ import annotations


class NetstackError(Exception):
    """A failure whose message says what went wrong and what to do: the CLI prints it as one line
    and exits with ``exit_code``, never with a traceback."""

    #: the CLI's exit status for it (netstack.validity: EXIT_USAGE 2, EXIT_FAILED 1)
    exit_code: int = 2


class NotFound(NetstackError):
    """Something asked for is not there, where the contract says exit 1 (not a usage error: a
    name the topology does not know, or no testbed at all, is exit 2)."""

    exit_code = 1


class ConfigError(NetstackError, ValueError):
    """A configuration value is missing, malformed or inconsistent (a switch's, a protocol's).

    ``field`` names the field (``"port p1: xoff_bytes"``), ``problem`` says what is wrong.
    """

    def __init__(self, field_name: str, problem: str) -> None:
        self.field = field_name
        self.problem = problem
        super().__init__(f"{field_name}: {problem}")


class CommandError(NetstackError):
    """A command's own usage error (options that do not go together, a missing prerequisite): the
    CLI prints it as one clear line and exits with status 2."""
