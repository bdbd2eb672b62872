"""``netstack bench headers``: every case has a struct baseline, and the JSON carries its rate and
the decode/struct ratio (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

from netstack.bench.headers import all_cases
from netstack.cli import main


def test_every_case_has_a_struct_baseline_of_the_same_bytes() -> None:
    cases = all_cases()
    assert cases
    for case in cases:
        out = case.baseline()
        assert isinstance(out, tuple) and out, case.name
        case.decode()  # the decoder accepts the same bytes


def test_json_has_struct_rate_and_ratio(tmp_path: Path) -> None:
    assert main(["bench", "headers", "--min-time", "0.01", "--only", "LGData", "--only", "roce.RETH",
                 "--results-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "bench-headers-latest.json").read_text())
    assert {r["header"] for r in data["results"]} == {"linkguardian.LGData", "roce.RETH"}
    for r in data["results"]:
        assert r["struct_unpack_per_s"] > 0 and r["codec_decode_per_s"] > 0
        assert r["decode_vs_struct"] == r["struct_unpack_per_s"] / r["codec_decode_per_s"]
        assert {"codec_encode_per_s", "scapy_build_per_s", "scapy_dissect_per_s", "encode_speedup",
                "decode_speedup"} <= set(r)
