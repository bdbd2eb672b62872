"""``mypy --strict`` on the wire formats (headers/), the sans-IO engines and what else the registry
lists as typed (netstack.protocols.typed_modules: the generic ones and each protocol's ``typed``;
docs/architecture.md, "Engines are sans-IO")."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from netstack import protocols

ROOT = Path(__file__).resolve().parent.parent


def typed_paths() -> list[str]:
    """The registry's typed modules as the paths mypy takes: a module's file, a package's directory."""
    out = []
    for module in protocols.typed_modules():
        path = module.replace(".", "/")
        if (ROOT / f"{path}.py").is_file():
            out.append(f"{path}.py")
        elif (ROOT / path / "__init__.py").is_file():
            out.append(path)
        else:
            raise AssertionError(f"typed module {module} is neither a file nor a package")
    return out


def test_headers_and_engines_pass_mypy_strict(tmp_path):
    # the files on the command line replace [tool.mypy] files; the rest of that section still applies
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), *typed_paths()],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "Success: no issues found" in r.stdout


def test_a_plain_mypy_run_checks_what_the_registry_lists():
    """``mypy`` by hand reads pyproject.toml's ``[tool.mypy] files``: the same list, so that it checks
    what this test checks (the registry is where a module is added; mirror it there)."""
    files = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]["files"]
    assert sorted(files) == sorted(typed_paths())
