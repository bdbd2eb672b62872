"""The command line: help, the headers benchmark's JSON, dissect, clear errors."""

import contextlib
import io
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert "must be positive (> 0)" in capsys.readouterr().err
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


# --------------------------------------------------------------------------- dissect: hostile input
# (docs/security.md, "Topology files, the CLI and the control socket", finding 4: a frame
# shorter than an Ethernet header used to crash Scapy)

_REPORT = dta.build_report_frame(b"\x02" * 6, b"\x04" * 6, b"\x0a\0\0\1", b"\x0a\0\0\x64", dta.DTABase(1, 5),
                                 dta.KeyWrite(2, 1234, (7,)))


def _dissect(argv: list[str]) -> tuple[int, str, str]:
    """``netstack dissect ARGV`` in this process: (status, stdout, stderr). Any exception escapes."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(["dissect", *argv])
        except SystemExit as exc:  # argparse's own usage errors
            status = exc.code if isinstance(exc.code, int) else 2
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("n", [0, 1, 5, 12, 13])
def test_dissect_frame_too_short_for_ethernet(n):
    status, _, err = _dissect([_REPORT[:n].hex()])
    assert status == 2
    assert err == f"netstack dissect: error: frame 0 is {n} bytes, too short for an Ethernet header (14 bytes)\n"


def test_dissect_short_frame_after_fcs():
    from headers.fcs import append_fcs

    status, out, err = _dissect(["--fcs", append_fcs(_REPORT[:6]).hex()])
    assert status == 2 and "software FCS: ok" in out
    assert err == ("netstack dissect: error: frame 0 is 6 bytes after its FCS, too short for an Ethernet header "
                   "(14 bytes)\n")


def test_dissect_short_frame_without_scapy_keeps_its_message():
    """The fast codecs already reported a short frame clearly: that output stays as it was."""
    status, out, err = _dissect(["--no-scapy", _REPORT[:5].hex()])
    assert status == 1 and err == ""
    assert out == "frame 0: 5 bytes\n  malformed: Ethernet: truncated: need 14 bytes, have 5 at byte 0\n"


def test_dissect_short_frame_in_a_pcap(tmp_path):
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    wrpcap(str(tmp_path / "runt.pcap"), [Raw(_REPORT[:9])])
    status, _, err = _dissect(["--pcap", str(tmp_path / "runt.pcap")])
    assert status == 2 and "frame 0 is 9 bytes, too short for an Ethernet header" in err


def test_dissect_short_frame_from_the_shell_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "netstack.cli", "dissect", "0011223344"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stderr == "netstack dissect: error: frame 0 is 5 bytes, too short for an Ethernet header (14 bytes)\n"


_FRAMES = st.one_of(
    st.binary(max_size=80),
    st.integers(0, len(_REPORT)).map(lambda n: _REPORT[:n]),
    st.tuples(st.integers(0, len(_REPORT)), st.binary(max_size=40)).map(lambda t: _REPORT[:t[0]] + t[1]),
)


@settings(max_examples=150)
@given(frame=_FRAMES, fcs=st.booleans(), no_scapy=st.booleans())
def test_dissect_fuzz_arbitrary_frames(frame, fcs, no_scapy):
    """Any bytes: a clean exit (0 ok, 1 malformed frame, 2 one-line error), never a traceback."""
    argv = [*(["--fcs"] if fcs else []), *(["--no-scapy"] if no_scapy else []), frame.hex()]
    status, _, err = _dissect(argv)
    assert status in (0, 1, 2)
    if status == 2:
        assert err.startswith("netstack dissect: error: ") and err.count("\n") == 1
    else:
        assert err == ""


@settings(max_examples=150)
@given(text=st.text(max_size=60).filter(lambda t: t.strip() != "-"))
def test_dissect_fuzz_arbitrary_text(text):
    status, _, err = _dissect(["--no-scapy", "--", text])
    assert status in (0, 1, 2)
    assert "Traceback" not in err


def test_dissect_binary_on_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe00"), encoding="utf-8", errors="strict"))
    status, _, err = _dissect(["-"])
    assert (status, err) == (2, "netstack dissect: error: the frame is not valid hex\n")


def test_dissect_scapy_failure_is_one_line(monkeypatch):
    from scapy.packet import Packet

    def broken(self, dump=False, indent=3, lvl="", label_lvl=""):
        raise IndexError("boom")

    monkeypatch.setattr(Packet, "show", broken)
    status, _, err = _dissect([_REPORT.hex()])
    assert (status, err) == (2, "netstack dissect: error: frame 0: Scapy cannot dissect it: IndexError: boom\n")
