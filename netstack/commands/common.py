"""What the command modules share: the pieces of the command-line contract (docs/testbed.md "The
command-line contract"). Not a command: ``netstack.cli`` registers only ``COMMAND_MODULES``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import CommandError

#: what a live/sim choice is called on every command that has one (``--mode``)
MODES = ("live", "sim")


def add_json(p: argparse.ArgumentParser, what: str = "the result") -> None:
    """``--json``: stdout is then exactly one JSON document (progress stays on stderr)."""
    p.add_argument("--json", action="store_true", help=f"print {what} as one JSON document")


def print_json(doc: Any) -> None:
    # default=str: a path or another plain value a library put in its answer must not end the
    # command after its work is done
    print(json.dumps(doc, indent=2, default=str), flush=True)


def acts_on_testbed(*parsers: argparse.ArgumentParser) -> None:
    """Mark commands that work on a running testbed: ``netstack.cli`` refuses a prefix whose run
    state outlived its namespaces before the command starts (:func:`refuse_stale`)."""
    for p in parsers:
        p.set_defaults(acts_on_testbed=True)


def refuse_stale(prefix: str | None) -> None:
    """CommandError (exit 2) when ``prefix``'s run state names namespaces that are gone."""
    if not prefix:
        return
    from ..runtime import stale_reason

    why = stale_reason(prefix)
    if why is not None:
        raise CommandError(why)


class DeprecatedRuntime(argparse.Action):
    """``--runtime live|sim`` on a subcommand: the old spelling of ``--mode``. Its dest is
    ``mode_alias``, never ``runtime``: that is the global ``--runtime auto|netns|compose``, which
    the CLI exports to NETSTACK_RUNTIME (a 'live' there made every later state lookup fail).
    :func:`apply_mode_alias` turns it into ``mode`` once parsing is done."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"netstack: '{option_string} {values}' is deprecated here: use '--mode {values}'", file=sys.stderr)
        setattr(namespace, self.dest, values)


def apply_mode_alias(args: argparse.Namespace) -> None:
    """The deprecated ``--runtime live|sim`` as ``mode``; with a ``--mode`` that says otherwise,
    a usage error (which one was meant cannot be guessed: one of them may start a live run)."""
    alias = getattr(args, "mode_alias", None)
    if alias is None:
        return
    if "mode" in getattr(args, "given_options", ()) and args.mode != alias:
        raise CommandError(f"--mode {args.mode} and --runtime {alias} (its deprecated spelling) disagree: "
                           "give --mode only")
    args.mode = alias


def add_mode(p: argparse.ArgumentParser, default: str | None, help_text: str) -> None:
    """``--mode live|sim`` (dest ``mode``) and its deprecated alias ``--runtime live|sim``."""
    p.add_argument("--mode", choices=MODES, default=default, help=help_text)
    p.add_argument("--runtime", dest="mode_alias", choices=MODES, default=None, action=DeprecatedRuntime,
                   help="deprecated spelling of --mode")


def finish(doc: Mapping[str, Any], ok_code: int = 0, *inner: Mapping[str, Any] | None) -> int:
    """A command's exit code after printing a run's result document: ``ok_code``, or 3 with
    ``INVALID RUN: <reasons>`` when the document (or, when it says nothing, one of ``inner``:
    the part a command prints) carries ``"valid": false`` (netstack.validity)."""
    from .. import validity

    judged = next((d for d in (doc, *inner) if d is not None and "valid" in d), doc)
    return validity.finish(judged, ok_code)


@contextlib.contextmanager
def stdout_to_stderr(active: bool) -> Iterator[None]:
    """With ``--json`` a library's tables go to stderr, so stdout is only the JSON document."""
    if not active:
        yield
        return
    with contextlib.redirect_stdout(sys.stderr):
        yield
