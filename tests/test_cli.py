"""The command line: help, the headers benchmark's JSON, dissect, clear errors."""

import json

import pytest

from headers import dta
from netstack.cli import main


def test_help_lists_commands(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for word in ("LinkGuardian", "1Pipe", "TCD", "DTA", "T/C-SACK", "bench", "dissect"):
        assert word in out


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage" in capsys.readouterr().out


def test_bench_headers_writes_json(tmp_path, capsys):
    rc = main(["bench", "headers", "--min-time", "0.01", "--only", "roce.AETH", "--only", "LGData",
               "--results-dir", str(tmp_path)])
    assert rc == 0
    data = json.loads((tmp_path / "bench-headers-latest.json").read_text())
    names = {r["header"] for r in data["results"]}
    assert names == {"roce.AETH", "linkguardian.LGData"}
    for r in data["results"]:
        assert r["codec_encode_per_s"] > 0 and r["scapy_build_per_s"] > 0
    assert "| header" in capsys.readouterr().out


def test_bench_rejects_bad_arguments(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "headers", "--min-time", "-1"])
    assert exc.value.code == 2
    assert "must be > 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "nosuch"])


def test_dissect(capsys):
    frame = dta.build_report_frame(b"\x02" * 6, b"\x04" * 6, b"\x0a\0\0\1", b"\x0a\0\0\x64", dta.DTABase(1, 5),
                                   dta.KeyWrite(2, 1234, (7,)))
    assert main(["dissect", frame.hex()]) == 0
    out = capsys.readouterr().out
    assert "KeyWrite(redundancy=2, key=0x4d2, data=(7,))" in out and "###[ Ethernet ]###" in out
    assert main(["dissect", "--no-scapy", frame[:30].hex()]) == 1
    assert "malformed" in capsys.readouterr().out
    assert main(["dissect", "nothex"]) == 2
    assert "not valid hex" in capsys.readouterr().err
    assert main(["dissect", "--fcs", "--no-scapy", frame.hex()]) == 1
    assert "BAD" in capsys.readouterr().out
