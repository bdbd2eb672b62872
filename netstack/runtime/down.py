"""``netstack down``: a run's daemons stopped and everything of its prefix removed, and every
netstack topology of this machine removed (``down --all``), including what a crash left behind."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Collection

from .. import protocols
from ..topo import netns
from .daemons import _stop
from .state import daemons_in_file, run_dir, run_root, state_path


def down(prefix: str) -> list[str]:
    """Stop the daemons and remove everything of ``prefix``. Idempotent. (Namespace runs only:
    a container deployment is stopped with docker-compose down / docker stack rm.)"""
    rdir = run_dir(prefix)
    _stop(daemons_in_file(state_path(prefix)))  # whichever version wrote the file
    removed = netns.teardown(prefix)  # also kills anything else still inside the namespaces
    shutil.rmtree(rdir, ignore_errors=True)
    cleanup_protocols(prefix)
    return removed


def cleanup_protocols(prefix: str) -> None:
    """What a daemon that died without its clean stop left outside the run directory (a DTA
    collector killed with SIGKILL keeps its shared-memory regions): each control plug-in's
    ``after_down(prefix)``."""
    for name in protocols.control_modules():
        try:
            module = protocols.load(name)
        except ModuleNotFoundError:
            continue
        hook = getattr(module, "after_down", None)
        if hook is not None:
            with contextlib.suppress(OSError):
                hook(prefix)


def down_all(*, prefixes: Collection[str] | None = None) -> list[str]:
    """Remove every netstack topology, including what a crashed run left behind; with
    ``prefixes``, only the topologies of those prefixes (found the same way: the tests recover
    their own crashed runs so, never touching another user's testbed)."""
    if isinstance(prefixes, str):  # a str is a Collection of one-letter prefixes: never meant
        raise TypeError("prefixes: a collection of prefixes, not one string")
    found = set(netns.list_running())
    root = run_root()
    if root.is_dir():
        found |= {p.name for p in root.iterdir() if p.is_dir()}
    if prefixes is not None:
        found &= set(prefixes)
    removed: list[str] = []
    for prefix in sorted(found):
        with contextlib.suppress(ValueError):
            removed += down(prefix)
    removed += netns.teardown_all(prefixes=prefixes)
    return removed
