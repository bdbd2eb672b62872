"""The collector daemon's config file: anything malformed is one clear line and an exit, never a
traceback (the daemon is started by ``netstack up``; a bad file must say what is wrong)."""

from __future__ import annotations

import json

import pytest

from daemons.collector import DAEMON_ACK_EVERY, build_parser, load_config

GOOD = {"name": "c1", "ifname": "eth0", "mac": "02:00:00:00:00:64", "ip": "10.0.0.100", "memory_dir": "/tmp/m"}


def test_a_good_config_loads(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"collector": GOOD}))
    assert load_config(p) == GOOD


@pytest.mark.parametrize("doc,said", [
    ({"collector": ["c1"]}, "collector must be an object, not list"),  # was AttributeError
    ({"collector": "c1"}, "collector must be an object, not str"),
    ([1, 2], "bad config"),
    ({}, "bad config"),
    ({"collector": {**GOOD, "ip": 7}}, "collector.ip must be a string"),
    ({"collector": {**GOOD, "mac": "zz"}}, "bad config"),
])
def test_a_malformed_config_is_one_clear_exit(tmp_path, doc, said):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(SystemExit) as e:
        load_config(p)
    assert said in str(e.value) and str(p) in str(e.value)


def test_an_unreadable_or_non_json_config_is_one_clear_exit(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{not json")
    with pytest.raises(SystemExit, match="bad config"):
        load_config(p)
    with pytest.raises(SystemExit, match="bad config"):
        load_config(tmp_path / "missing.json")


def test_ack_every_is_an_option_with_a_default_and_help(capsys):
    base = ["--config", "c.json", "--control", "c.sock"]
    assert build_parser().parse_args(base).ack_every == DAEMON_ACK_EVERY >= 1
    assert build_parser().parse_args([*base, "--ack-every", "1"]).ack_every == 1
    for bad in ("0", "-3", "x"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*base, "--ack-every", bad])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    assert "--ack-every N" in capsys.readouterr().out
