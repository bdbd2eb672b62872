"""ethcount on the live testbed (root): the example's topology file brought up under a unique
prefix, frames sent from h1's namespace on a raw socket, counted by sw1's daemon, read back over
its control socket and through the command line; torn down even on failure.

Run it alone, under the lock every live run of the project takes::

    flock /tmp/netstack-live.lock .venv/bin/python -m pytest netstack/examples/ethcount/tests/test_ethcount_live.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from netstack import runtime
from netstack.cli import main
from netstack.examples.ethcount import control
from netstack.topo.model import Topology, load_topology

pytestmark = pytest.mark.netns

TOPOLOGY = Path(__file__).resolve().parent.parent / "ethcount.toml"
#: sends frames from a namespace: argv = interface, dst MAC, src MAC, then EtherType:count pairs
#: (probes numbered from 0, interleaved in the order given)
SEND = """
import socket, sys
from netstack.examples.ethcount.header import probe_frame
ifname, dst, src = sys.argv[1], bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
for pair in sys.argv[4:]:
    ethertype, count = (int(x, 0) for x in pair.split(":"))
    for seq in range(count):
        s.send(probe_frame(dst, src, seq, ethertype))
"""


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Topology]]:
    """The example's topology up under a unique prefix: (prefix, h1's namespace, the topology)."""
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    os.environ.setdefault("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    topo = load_topology(TOPOLOGY)
    prefix = "ec" + uuid.uuid4().hex[:6]  # unique: other live runs may be up under other prefixes
    state = runtime.up(topo, prefix, apply_impairments=False)
    try:
        yield prefix, state.namespaces["h1"], topo
    finally:
        runtime.down(prefix)


def send_from_h1(h1_netns: str, topo: Topology, *pairs: str) -> None:
    """Send ``ethertype:count`` frames from h1's eth0 to h2's MAC, on a raw socket in h1's namespace."""
    h1, h2 = topo.link("h1-sw1").a, topo.link("sw1-h2").b
    argv = ["ip", "netns", "exec", h1_netns, sys.executable, "-c", SEND, h1.ifname,
            h2.mac.replace(":", ""), h1.mac.replace(":", ""), *pairs]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def counts_once(prefix: str, port: str, direction: str, frames: int, timeout_s: float = 10.0) -> dict[str, Any]:
    """sw1's counts of ``port`` once ``direction`` has reached ``frames`` (the daemon forwards in its
    own time), or as they are after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        ports = control.status(prefix)["sw1"]["ports"]
        if ports[port][direction]["frames"] >= frames or time.monotonic() > deadline:
            return dict(ports)
        time.sleep(0.1)


def test_frames_sent_from_h1_are_counted_at_sw1(testbed: tuple[str, str, Topology]) -> None:
    prefix, h1_netns, topo = testbed
    send_from_h1(h1_netns, topo, "0x88b5:200", "0x88b6:150", "0x88b5:100")
    ports = counts_once(prefix, "p-h2", "egress", 300)
    # declared in the file: p-h1 counts what it receives from h1, p-h2 also what it sends to h2
    assert ports["p-h1"]["ingress"]["frames"] == 300 and ports["p-h1"]["egress_counted"] is False
    assert ports["p-h1"]["ingress"]["bytes"] == 300 * 60
    assert ports["p-h2"]["egress"]["frames"] == 300 and ports["p-h2"]["ingress"]["frames"] == 0
    # the daemon's own status reports it too (netstack status: protocols.ethcount)
    daemon = runtime.control(prefix, "sw1", "status")
    assert daemon["protocols"]["ethcount"]["ports"]["p-h1"]["ingress"]["frames"] == 300


def test_enable_and_disable_by_hand(testbed: tuple[str, str, Topology], capsys: pytest.CaptureFixture[str]) -> None:
    prefix, h1_netns, topo = testbed
    assert main(["ethcount", "enable", "sw1", "p-h1", "--ethertype", "0x88b6", "--prefix", prefix, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ingress"]["frames"] == 0  # a fresh counter
    send_from_h1(h1_netns, topo, "0x88b6:40", "0x88b5:10")
    ports = counts_once(prefix, "p-h1", "ingress", 40)
    assert ports["p-h1"]["ethertype"] == "0x88b6" and ports["p-h1"]["ingress"]["frames"] == 40
    assert main(["ethcount", "disable", "sw1", "p-h1", "--prefix", prefix, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ingress"]["frames"] == 40
    assert "p-h1" not in control.status(prefix)["sw1"]["ports"]
    assert main(["ethcount", "status", "--prefix", prefix]) == 0
    assert "p-h2" in capsys.readouterr().out
