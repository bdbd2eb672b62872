"""``netstack bench auth --only mac`` runs, prints its table and writes its JSON (no timings asserted)."""

from __future__ import annotations

import json

from netstack.cli import main


def test_mac_part_writes_rows_for_each_size(tmp_path, capsys):
    assert main(["bench", "auth", "--only", "mac", "--min-time", "0.01", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fresh CMAC" in out and "seal" in out
    doc = json.loads(next(tmp_path.glob("bench-auth-*.json")).read_text())
    assert [r["size"] for r in doc["mac"]] == [64, 1500]
    assert all(r["seal"] > 0 and r["open"] > 0 and r["copy"] > 0 for r in doc["mac"])
