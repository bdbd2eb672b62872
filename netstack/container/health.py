"""The containers' health check: ``python -m netstack.container.health NODE [--joining-ok]``.

The same check as ``netstack node health`` (:func:`netstack.container.node.health`), without the
command line's start-up: ``netstack`` built its whole parser then, importing every command module
(it imports only the command's own now), which made each check cost about 0.35 s of CPU, and
still imports more than the check needs. Every container runs one every 5 s (2 s under
Swarm): on a 2-core machine the eight containers of the onepipe topology spent a quarter of it on
health checks, in bursts that held the switch daemons up past 1Pipe's input timeout. This one
imports only what the check needs. Exit 0 healthy, 1 not (the reason on stderr), 2 usage."""

from __future__ import annotations

import sys


def check(node: str | None, joining_ok: bool = False) -> int:
    """Run the check, say why on stdout (healthy) or stderr (not); the exit status."""
    from .node import health

    try:
        ok, why = health(node, joining_ok=joining_ok)
    except (OSError, ValueError, KeyError) as exc:
        ok, why = False, f"{type(exc).__name__}: {exc}"
    print(why, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    rest = [a for a in args if a != "--joining-ok"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        print("usage: python -m netstack.container.health [NODE] [--joining-ok]", file=sys.stderr)
        return 2
    return check(rest[0] if rest else None, "--joining-ok" in args)


if __name__ == "__main__":
    sys.exit(main())
