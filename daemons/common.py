"""What every daemon's entry point shares: the standard options, logging, the event loop."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any


def daemon_parser(prog: str, doc: str | None, what: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, required=True, help=f"{what} config JSON (written by netstack up)")
    parser.add_argument("--control", type=Path, required=True, help="Unix control socket path")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    parser.add_argument("--no-uvloop", action="store_true", help="use asyncio's own loop (debugging)")
    return parser


def run_daemon(args: argparse.Namespace, amain: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], *,
               uvloop_ok: bool = True) -> int:
    """Logging, then ``amain(args)`` on uvloop (asyncio's own loop with ``--no-uvloop``, or for a
    daemon that says ``uvloop_ok=False``)."""
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.no_uvloop or not uvloop_ok:
        return asyncio.run(amain(args))
    import uvloop

    # uvloop.run, not uvloop.install: the global policy breaks pyroute2 (docs/architecture.md "The live runtime")
    return uvloop.run(amain(args))


async def serve_metrics(status: Callable[[dict[str, Any]], Any], labels: dict[str, str]) -> asyncio.Server | None:
    """Serve the daemon's ``status`` answer as Prometheus metrics where ``netstack up`` said
    (netstack.io.metrics; nothing when the topology asks for no metrics)."""
    from netstack.io.metrics import serve_from_env

    log = logging.getLogger("metrics")
    return await serve_from_env(lambda: status({}), labels, say=log.info)
