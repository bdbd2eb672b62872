"""``mypy --strict`` on the wire formats (headers/) and the sans-IO engines: the files listed
under ``[tool.mypy]`` in pyproject.toml (docs/architecture.md, "Engines are sans-IO")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_headers_and_engines_pass_mypy_strict(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "Success: no issues found" in r.stdout
