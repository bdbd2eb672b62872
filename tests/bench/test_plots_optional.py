"""matplotlib is optional (the ``plots`` extra): every plot goes through netstack.bench.plot.pyplot,
which says once that there are no plots, and every caller then writes its numbers without them."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

import pytest

from netstack.bench import plot
from netstack.bench import tcd as bench_tcd

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_matplotlib(monkeypatch):
    """``import matplotlib`` raises ImportError, as where it is not installed."""
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    plot._say_no_plots.cache_clear()
    yield
    plot._say_no_plots.cache_clear()


def _functions_calling_pyplot():
    for path in (ROOT / "netstack").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and fn.name != "pyplot" and any(
                    isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id == "pyplot"
                    for c in ast.walk(fn)):
                yield path, fn


def test_only_the_plot_module_imports_matplotlib():
    importers = []
    for path in [*(ROOT / "netstack").rglob("*.py"), *(ROOT / "daemons").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "matplotlib" or n.startswith("matplotlib.") for n in names):
                importers.append(str(path.relative_to(ROOT)))
    assert sorted(set(importers)) == ["netstack/bench/plot.py"]


def test_every_caller_of_pyplot_handles_none():
    callers = list(_functions_calling_pyplot())
    assert len(callers) >= 10  # (the check would pass vacuously on none)
    missing = [f"{p.relative_to(ROOT)}:{fn.name}" for p, fn in callers if "plt is None" not in ast.unparse(fn)]
    assert missing == []


def test_without_matplotlib_pyplot_is_none_and_says_so_once(no_matplotlib, capsys):
    assert plot.pyplot() is None and plot.pyplot() is None
    err = capsys.readouterr().err
    assert err.count(plot.NO_MATPLOTLIB) == 1 and "netstack[plots]" in err


def test_a_benchmark_without_matplotlib_writes_its_numbers_and_no_plots(no_matplotlib, tmp_path, capsys):
    # its FCT section alone (~6 s of CPU; with the scenarios ~18): it draws a plot of its own
    # (tcdfct.plot_fct), and tests/bench/test_tcd_bench_smoke.py runs every section with plots
    args = argparse.Namespace(results_dir=str(tmp_path), only=["fct"], workers=1, quick=True, live=False,
                              runtime=None)
    assert bench_tcd.main(args) == 0
    doc = json.loads((tmp_path / "bench-tcd-latest.json").read_text())
    assert doc["sections"] == ["fct"] and doc["errors"] == {} and doc["fct"]["rows"]
    assert list(tmp_path.glob("*.png")) == []
    assert plot.NO_MATPLOTLIB in capsys.readouterr().err
