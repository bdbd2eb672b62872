"""``mypy --strict`` on the wire formats (headers/), the sans-IO engines and what else the registry
lists as typed (netstack.protocols.typed_modules: the generic ones and each protocol's ``typed``;
docs/architecture.md, "Engines are sans-IO"), run as ``python -m netstack.typecheck`` runs it by
hand: the registry is the only list of files, so a protocol is checked by adding its entry."""

from __future__ import annotations

import subprocess
import tomllib

import pytest

from netstack import protocols, typecheck

ROOT = typecheck.ROOT


def test_headers_and_engines_pass_mypy_strict(tmp_path):
    r = subprocess.run(typecheck.mypy_argv(["--cache-dir", str(tmp_path / "cache")]),
                       cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "Success: no issues found" in r.stdout


def test_the_registry_is_the_only_list_of_typed_files():
    """pyproject.toml's ``[tool.mypy]`` holds the settings and names no file (a second list would
    need an edit for every new protocol, and drift); every registered name is a file or a package."""
    section = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "files" not in section and "modules" not in section and "packages" not in section
    assert section["strict"] is True
    paths = typecheck.typed_paths()
    assert len(paths) == len(protocols.typed_modules()) == len(set(paths))
    assert all((ROOT / p).is_file() if p.endswith(".py") else (ROOT / p / "__init__.py").is_file() for p in paths)


def test_a_typed_name_that_does_not_exist_is_named(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "mod.py").write_text("")
    monkeypatch.setattr(protocols, "typed_modules", lambda: ("pkg", "mod", "nosuch.thing"))
    with pytest.raises(LookupError, match=r"typed module nosuch\.thing "):
        typecheck.typed_paths(tmp_path)
    monkeypatch.setattr(protocols, "typed_modules", lambda: ("pkg", "mod"))
    assert typecheck.typed_paths(tmp_path) == ["pkg", "mod.py"]


def test_the_command_prints_the_paths_and_passes_mypys_exit_status_through(monkeypatch, capsys):
    assert typecheck.main(["--paths"]) == 0
    assert capsys.readouterr().out.split() == typecheck.typed_paths()
    seen = []

    def mypy(argv, cwd, check):
        seen.append((argv, cwd))
        return subprocess.CompletedProcess(argv, 1)

    monkeypatch.setattr(subprocess, "run", mypy)
    assert typecheck.main(["--", "--no-incremental"]) == 1
    [(argv, cwd)] = seen
    assert cwd == ROOT and argv == typecheck.mypy_argv(["--no-incremental"])
    assert argv[1:4] == ["-m", "mypy", "--strict"]
