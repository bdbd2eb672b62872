"""``netstack onepipe``: help, and clear one-line errors for bad arguments (no testbed needed)."""

from __future__ import annotations

import pytest

from netstack.cli import main


def test_help_lists_the_actions(capsys):
    with pytest.raises(SystemExit) as e:
        main(["onepipe", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for action in ("enable", "disable", "status", "run", "check"):
        assert action in out
    assert "netstack onepipe check" in out


@pytest.mark.parametrize("argv,said", [
    (["onepipe", "enable", "--t-beacon-ms", "0", "--prefix", "nosuchprefix"], "invalid parameters: t_beacon_ns"),
    (["onepipe", "enable", "--timeout-beacons", "1", "--prefix", "nosuchprefix"], "timeout_beacons"),
    (["onepipe", "run", "--procs", "4", "--seconds", "0", "--out", "/tmp/x", "--prefix", "nosuchprefix"],
     "--seconds and --rate must be positive"),
    (["onepipe", "run", "--procs", "4", "--seconds", "1", "--out", "/tmp/x", "--prefix", "nosuchprefix"],
     "no topology is running under prefix 'nosuchprefix'"),
    (["onepipe", "status", "--prefix", "nosuchprefix"], "no topology is running"),
])
def test_bad_arguments_are_one_line_errors(argv, said, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and err.count("\n") == 1, err


def test_check_of_a_missing_log_is_bad_input(tmp_path, capsys):
    assert main(["onepipe", "check", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_run_places_processes_and_refuses_bad_loss_specs():
    from netstack.onepipe.control import OnePipeControlError
    from netstack.onepipe.runner import parse_loss, place

    assert place(["h1", "h2"], 5) == {"h1": ["p1", "p3", "p5"], "h2": ["p2", "p4"]}
    with pytest.raises(OnePipeControlError, match="at least 1"):
        place(["h1"], 0)
    with pytest.raises(OnePipeControlError, match="more than 99 ports"):
        place(["h1"], 100)
    links = {"tor1-spine1": {}}
    assert parse_loss("tor1-spine1:0.01", links) == ("tor1-spine1", 0.01)
    for bad, msg in (("spine:0.1", "no link 'spine'"), ("tor1-spine1:lots", "not a probability"),
                     ("tor1-spine1:1.5", r"in \[0, 1\)"), ("0.1", "no link ''")):
        with pytest.raises(OnePipeControlError, match=msg):
            parse_loss(bad, links)


def test_enable_scales_the_ack_timeout_with_t_beacon(capsys):
    """A T_beacon above the default ACK timeout (60 ms) used to fail on a parameter the user never
    set; now only the testbed is missing."""
    assert main(["onepipe", "enable", "--t-beacon-ms", "100", "--prefix", "nosuchprefix"]) == 2
    err = capsys.readouterr().err
    assert "no topology is running" in err and "ack_timeout" not in err
