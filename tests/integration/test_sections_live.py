"""A topology file's protocol tables on the live testbed (netstack/topo/sections.py): ``netstack
up`` turns 1Pipe on in every switch for ``[onepipe]`` and records ``[tcsack]``, which a transfer
then takes its rate and N from; a bad table stops ``up`` before anything is built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from netstack.onepipe import control as onepipe_control
from netstack.topo import netns
from netstack.topo.model import loads_topology
from tests.topologies import H1, H2, LINE_LINKS, SW1, SW2, header

from .conftest import running

pytestmark = pytest.mark.netns

CLI = [sys.executable, "-m", "netstack.cli"]
LINE = header("sections") + H1 + H2 + SW1 + SW2 + LINE_LINKS
TABLES = '[onepipe]\nt_beacon = "2ms"\n\n[tcsack]\nrate = "20Mbit"\nn = 8\n'


@pytest.fixture(scope="module")
def declared(tmp_path_factory):
    yield from running(loads_topology(LINE + "\n" + TABLES), tmp_path_factory, "s")


def test_up_turns_1pipe_on_in_every_switch_and_records_the_tables(declared):
    assert declared.sections == {"onepipe": {"t_beacon_ns": 2_000_000, "timeout_beacons": 10, "controller": False},
                                 "tcsack": {"rate_bps": 20_000_000, "n": 8}}
    status = onepipe_control.status(declared.prefix)
    assert set(status) == {"sw1", "sw2"} and all(s is not None for s in status.values())
    assert status["sw1"]["params"]["t_beacon_ns"] == 2_000_000


def test_a_transfer_takes_the_tables_settings_unless_a_flag_overrides_them(declared):
    r = subprocess.run([*CLI, "tcsack", "transfer", "--bytes", "200KB", "--payload", "1000", "--json",
                        "--prefix", declared.prefix], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 3), r.stderr[-2000:]  # 3: a run the machine starved (it says so)
    out = json.loads(r.stdout)
    assert out["ok"] and out["receiver"]["bytes"] == 200_000
    assert out["params"] == {"rate_bps": 20_000_000, "t_ns": 2_000_000, "n": 8, "payload": 1000,
                             "from": {"rate_bps": "topology", "t_ns": "default", "n": "topology", "payload": "flag"}}


def test_a_bad_table_stops_up_before_anything_is_built(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(LINE + '\n[onepipe]\ntimeout_beacons = 1\n')
    prefix = "sx" + uuid.uuid4().hex[:5]
    env = {**os.environ, "NETSTACK_RUN_DIR": str(tmp_path / "run")}
    r = subprocess.run([*CLI, "up", str(path), "--prefix", prefix], capture_output=True, text=True, timeout=60, env=env)
    try:
        assert r.returncode == 2 and "onepipe.timeout_beacons: must be a whole number of at least 2" in r.stderr
        assert prefix not in netns.list_running()
    finally:
        subprocess.run([*CLI, "down", "--prefix", prefix], capture_output=True, timeout=60, env=env)
