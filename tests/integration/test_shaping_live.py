"""Link shaping and link faults on the live testbed: ``netstack impair --delay/--jitter/--duplicate/
--reorder`` (netem where the kernel has it, else the sending switch's model), and the same faults
declared per link in a topology file (``[links.impairment]`` shaping, ``state = "down"``,
``[links.flap]``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid

import pytest

from netstack import runtime
from netstack.topo.model import loads_topology
from tests.topologies import H1, H2, H3, SW1, SW2, header, link

from .conftest import sh, udp_stream

pytestmark = pytest.mark.netns

CLI = [sys.executable, "-m", "netstack.cli"]


def _cli(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=timeout, check=False)


def _reachable(state, node: str, ip: str, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if sh(state, node, "ping", "-c", "1", "-W", "1", ip).returncode == 0:
            return True
    return False


def _min_rtt_ms(state) -> float:
    r = sh(state, "h1", "ping", "-c", "5", "-i", "0.2", "-W", "2", "10.0.0.2")
    assert r.returncode == 0, r.stdout + r.stderr
    return float(re.search(r"= ([\d.]+)/", r.stdout).group(1))


def test_impair_delays_jitters_duplicates_and_clears(testbed):
    prefix = testbed.prefix
    base = _min_rtt_ms(testbed)
    r = _cli("impair", "sw1-sw2", "--delay", "30", "--direction", "sw1:sw2", "--prefix", prefix)
    assert r.returncode == 0, r.stderr
    assert "30ms" in r.stdout and ("[netem]" in r.stdout or "[switch (no netem here)]" in r.stdout), r.stdout
    try:
        assert _min_rtt_ms(testbed) >= 30.0
        r = _cli("impair", "sw1-sw2", "--delay", "10", "--jitter", "8", "--direction", "sw1:sw2", "--prefix", prefix)
        assert r.returncode == 0, r.stderr
        res = udp_stream(testbed, 1000, 2000, size=200)
        assert res["lost"] == 0 and res["duplicates"] == 0
        assert res["reordered"] > 0  # +- 8 ms at 0.5 ms spacing: frames overtake each other
        r = _cli("impair", "sw1-sw2", "--duplicate", "0.3", "--direction", "sw1:sw2", "--prefix", prefix)
        assert r.returncode == 0, r.stderr
        res = udp_stream(testbed, 1000, 2000, size=200)
        assert res["lost"] == 0 and 150 < res["duplicates"] < 450, res
        st = _cli("status", "--prefix", prefix)
        assert "dup 30%" in st.stdout, st.stdout
    finally:
        r = _cli("impair", "sw1-sw2", "--clear", "--prefix", prefix)
        assert r.returncode == 0, r.stderr
    assert _min_rtt_ms(testbed) < base + 10


@pytest.mark.parametrize(("argv", "said"), [
    (["--delay", "-1"], "cannot be negative"),
    (["--jitter", "1e10"], "above the limit of an hour"),
    (["--reorder", "0.2"], "reorder needs a delay"),
    (["--delay", "5", "--backend", "nft"], "nft cannot delay"),
    (["--duplicate", "0.1", "--direction", "h2:sw2"], None),  # a host sends: netem or nothing
])
def test_bad_shaping_is_refused_clearly(testbed, argv, said):
    from netstack.topo.impair import netem_available

    r = _cli("impair", "sw2-h2" if "h2:sw2" in argv else "sw1-sw2", *argv, "--prefix", testbed.prefix)
    if said is None:
        if netem_available():
            _cli("impair", "sw2-h2", "--clear", "--prefix", testbed.prefix)
            pytest.skip("this kernel has netem: a host end can be shaped")
        said = "need netem"
    assert r.returncode == 2 and said in r.stderr, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr


TOPOLOGY = header("shaped", rate="100Mbit", delay="10us") + H1 + H2 + H3 + SW1 + SW2 + (
    link("h1", "sw1")
    + link("sw1", "sw2", extra='[links.impairment]\ndelay = "25ms"\ndirection = "both"\n'
                               '[links.flap]\ndown = "200ms"\nup = "300ms"\ncount = 2\nstart = "1500ms"\n')
    + link("sw2", "h2") + link("sw2", "h3", extra='state = "down"\n'))


def test_a_topology_declares_shaping_a_down_link_and_a_flap(tmp_path_factory):
    prefix = "y" + uuid.uuid4().hex[:6]
    os.environ.setdefault("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    state = runtime.up(loads_topology(TOPOLOGY), prefix)
    try:
        flapper = next(d for d in state.daemons if d.kind == "linkflap")
        assert flapper.name == "flap-sw1-sw2"
        # the declared shaping: 25 ms each way on sw1-sw2 (netem, or the switches' model here)
        r = sh(state, "h1", "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.0.0.2")
        assert r.returncode == 0, r.stdout
        assert float(re.search(r"= ([\d.]+)/", r.stdout).group(1)) >= 50.0
        # the declared-down link: h3 unreachable until 'netstack link ... up'
        assert sh(state, "h1", "ping", "-c", "1", "-W", "1", "10.0.0.3").returncode != 0
        st = runtime.status(prefix)
        assert st["daemons"]["sw2"]["ports"]["p-h3"]["carrier"] is False
        r = _cli("link", "sw2-h3", "up", "--prefix", prefix)
        assert r.returncode == 0, r.stderr
        assert "sw2/p-h3 carrier up" in r.stdout
        # h3 answers now. Not one fixed ping: sw1-sw2's declared flap (from 1.5 s after 'up') may
        # be taking that link down for 200 ms right now on a slow machine, and the ARP request
        # lost in it is only repeated a second later; reachable within a few seconds is the claim
        assert _reachable(state, "h1", "10.0.0.3", within_s=10.0)
        # the declared flap: 2 x 200 ms down after 1.5 s, then the link stays up
        deadline = time.monotonic() + 20
        while flapper.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not flapper.alive()
        ports = runtime.status(prefix)["daemons"]
        assert ports["sw1"]["ports"]["p-sw2"]["link_down"] == 2 and ports["sw1"]["ports"]["p-sw2"]["carrier"]
        assert ports["sw2"]["ports"]["p-sw1"]["link_down"] == 2
        assert "flapped 2 times" in (runtime.run_dir(prefix) / "flap-sw1-sw2.log").read_text()
        st = _cli("status", "--prefix", prefix)
        assert "links that lost carrier: " in st.stdout and "sw1/p-sw2 carrier up (link_down 2" in st.stdout
        assert "25ms" in st.stdout  # the declared shaping, in the impairments table
    finally:
        runtime.down(prefix)
