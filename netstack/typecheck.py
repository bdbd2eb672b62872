"""``python -m netstack.typecheck``: ``mypy --strict`` over what the registry lists as typed.

The typed modules are one list, the registry's (:func:`netstack.protocols.typed_modules`: its
``GENERIC_TYPED`` and every protocol's ``typed``), so that a protocol, or an example under
netstack/examples/, is type-checked by adding its registry entry and nothing else.
pyproject.toml's ``[tool.mypy]`` holds the settings only (strict, the overrides for untyped
libraries) and names no file. tests/test_typing.py runs the same check on every test run, with
the argument list :func:`mypy_argv` builds.

By hand (mypy runs in the source tree whatever the current directory, and reads its
pyproject.toml)::

    .venv/bin/python -m netstack.typecheck                  # mypy --strict; its exit status
    .venv/bin/python -m netstack.typecheck --paths          # the paths it checks, one a line
    .venv/bin/python -m netstack.typecheck -- --no-incremental   # more arguments for mypy

This module imports nothing of the project but the registry, which imports nothing itself.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from netstack import protocols

#: the source tree: the registry's module names are paths under it, and mypy runs in it
ROOT = Path(__file__).resolve().parent.parent


def typed_paths(root: Path = ROOT) -> list[str]:
    """The registry's typed modules as the paths mypy takes, relative to ``root``: a module's
    file, a package's directory. A name that is neither is a ``LookupError`` naming it."""
    out = []
    for module in protocols.typed_modules():
        path = module.replace(".", "/")
        if (root / f"{path}.py").is_file():
            out.append(f"{path}.py")
        elif (root / path / "__init__.py").is_file():
            out.append(path)
        else:
            raise LookupError(f"typed module {module} (netstack.protocols) is neither a file nor a package "
                              f"under {root}")
    return out


def mypy_argv(extra: Sequence[str] = ()) -> list[str]:
    """The command that checks the registry's typed modules, to run in :data:`ROOT`: this
    interpreter's mypy, ``--strict``, then ``extra``, then :func:`typed_paths`."""
    return [sys.executable, "-m", "mypy", "--strict", *extra, *typed_paths()]


def main(argv: Sequence[str] | None = None) -> int:
    """Run mypy (its output as it comes, its exit status returned), or print the paths only; a
    registered module that does not exist is one line and exit status 2."""
    parser = argparse.ArgumentParser(
        prog="python -m netstack.typecheck",
        description="mypy --strict over the registry's typed modules (netstack.protocols.typed_modules); "
                    "the settings are pyproject.toml's [tool.mypy].",
        epilog="Arguments after -- go to mypy, before the paths.")
    parser.add_argument("--paths", action="store_true", help="print the paths mypy would check, one a line, "
                                                             "and exit")
    given = list(sys.argv[1:] if argv is None else argv)
    cut = given.index("--") if "--" in given else len(given)
    args, extra = parser.parse_args(given[:cut]), given[cut + 1:]
    try:
        if args.paths:
            print("\n".join(typed_paths()))
            return 0
        command = mypy_argv(extra)
    except LookupError as exc:
        parser.exit(2, f"{parser.prog}: error: {exc.args[0]}\n")
    return subprocess.run(command, cwd=ROOT, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
