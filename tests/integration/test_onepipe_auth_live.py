"""Authenticated 1Pipe on the shipped ``onepipe`` topology with a key file (docs/onepipe.md
"Authenticated beacons and barriers"): real processes seal and open every datagram, the switch
daemons open, stamp and re-seal, the controller daemon uses the controller key; runs pass
``netstack onepipe check``, and frames injected from a host's namespace (unsealed, forged, a
member's genuine beacon sent twice) are refused at its ToR and counted per reason."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from netstack import runtime
from netstack.auth.keys import generate
from netstack.onepipe.check import check_logs
from netstack.onepipe.control import enable_all
from netstack.onepipe.runner import run
from netstack.topo.model import load_topology_spec, loads_topology

from .conftest import running

pytestmark = pytest.mark.netns
ROOT = Path(__file__).resolve().parents[2]


def keyed_onepipe(directory: Path) -> Any:
    """The shipped onepipe topology with ``keys`` naming a fresh key file beside it."""
    keys = directory / "lab.keys"
    generate(keys)
    text = Path(load_topology_spec("onepipe").source).read_text()
    assert 'prefix = "op"\n' in text
    path = directory / "onepipe.toml"
    path.write_text(text.replace('prefix = "op"\n', f'prefix = "op"\nkeys = "{keys.name}"\n', 1))
    return loads_topology(path.read_text(), str(path))


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    yield from running(keyed_onepipe(tmp_path_factory.mktemp("keys")), tmp_path_factory, "k")


def _onepipe(prefix: str) -> dict[str, Any]:
    st = runtime.status(prefix)
    return {sw: st["daemons"][sw]["protocols"]["onepipe"] for sw in ("tor1", "tor2", "spine1")}


def _controller(prefix: str, timeout: float = 15.0) -> dict[str, Any]:
    from netstack.io.control import request

    state = runtime.load_state(prefix)
    deadline = time.monotonic() + timeout
    while True:
        for d in state.daemons:
            if d.kind == "onepipe-controller":
                try:
                    st = request(d.control, "status", timeout=2.0)
                except (OSError, ValueError):
                    continue
                if st.get("role") == "leader":
                    return dict(st)
        assert time.monotonic() < deadline, "no controller leads"
        time.sleep(0.2)


def _refused(auth: dict[str, int]) -> int:
    return sum(auth[r] for r in ("truncated", "unknown_key", "forged", "stale_era", "replayed"))


def test_a_run_with_keys_seals_every_hop_and_keeps_the_total_order(fabric, tmp_path):
    prefix = fabric.prefix
    out = tmp_path / "run"
    summary = run(prefix, procs=8, seconds=2.0, out=out, rate=60, fanout=3)
    assert summary["authenticated"] is True
    verdict = check_logs([out])
    assert verdict.ok, verdict.summary()
    assert summary["delivered"] > 0.9 * summary["messages_sent"]
    for name, p in summary["processes"].items():
        a = p["counters"]["auth"]
        assert a["tor"]["ok"] > 0 and a["tor"]["sealed"] > 0, name
        assert a["refused"] == 0, (name, a)
    st = _onepipe(prefix)
    for sw, s in st.items():
        assert s["auth"]["domain"] == prefix, sw
        for port, p in s["ports"].items():
            if port == "p-ctl":
                continue  # nothing 1Pipe goes to the controller's port in best effort
            assert p["auth"]["ok"] > 0 and p["auth"]["sealed"] > 0, (sw, port, p["auth"])
            assert _refused(p["auth"]) == 0, (sw, port, p["auth"])


def test_a_reliable_run_with_keys_talks_to_the_controller_with_the_controller_key(fabric, tmp_path):
    prefix = fabric.prefix
    before = _controller(prefix)["auth"]
    assert before is not None
    out = tmp_path / "reliable"
    summary = run(prefix, procs=4, seconds=1.5, out=out, rate=40, fanout=2, reliable=True)
    verdict = check_logs([out])
    assert verdict.ok, verdict.summary()
    assert summary["delivered"] > 0
    for name, p in summary["processes"].items():
        a = p["counters"]["auth"]
        assert a["controller"]["ok"] >= 1 and a["controller"]["sealed"] >= 1 and a["refused"] == 0, (name, a)
    after = _controller(prefix)["auth"]
    assert after["ok"] >= before["ok"] + 4 and after["sealed"] > before["sealed"]
    assert after["refused"] == before["refused"]


INJECT = """
import json, os, socket, sys, time
from headers.onepipe import OnePipeHeader, OnePipeOpcode, ts_from_ns
from netstack.auth.frame import era_now
from netstack.auth.keys import load
from netstack.onepipe.auth import HostAuth
keys, prefix = sys.argv[1], sys.argv[2]
me, bcast = ("10.0.0.1", 40150), ("10.0.0.255", 40100)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
s.bind(me)
now = time.monotonic_ns() + 10 ** 9  # a barrier far ahead: what a forger wants the ToR to take
hdr = OnePipeHeader(ts_from_ns(now), ts_from_ns(now), ts_from_ns(now), 0, OnePipeOpcode.BEACON).to_bytes()
s.sendto(hdr, bcast)  # unsealed
s.sendto(hdr + bytes([1]) + os.urandom(16), bcast)  # a made-up trailer with key id 1
s.sendto(hdr + bytes([1]) + os.urandom(16), bcast)
member = HostAuth.from_ring(load(keys), prefix, me, era_now(time.time()), time.time())
low = OnePipeHeader(1, 1, 0, 0, OnePipeOpcode.BEACON).to_bytes()  # a genuine beacon ...
sealed = member.seal(bcast, low)
s.sendto(sealed, bcast)
s.sendto(sealed, bcast)  # ... replayed
print("sent")
"""


def test_frames_injected_from_a_host_are_refused_at_its_tor_and_counted(fabric):
    prefix = fabric.prefix
    enable_all(prefix)
    keys = Path(runtime.topology_of(runtime.load_state(prefix)).keys_path() or "")
    r = subprocess.run(["ip", "netns", "exec", fabric.namespaces["h1"], sys.executable, "-c", INJECT, str(keys),
                        prefix], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.stdout.strip() == "sent", r.stderr
    deadline = time.monotonic() + 10
    while True:
        port = _onepipe(prefix)["tor1"]["ports"]["p-h1"]
        a = port["auth"]
        if (a["forged"] >= 2 and a["truncated"] >= 1 and a["replayed"] >= 1) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert (a["truncated"], a["forged"], a["replayed"], a["ok"]) == (1, 2, 1, 1), a
    # the forged barriers (a second ahead) made no input and set nothing: the one input there is
    # the member's, at its genuine barrier, far below the switch's clock (the machine's monotonic one)
    inputs = port["inputs"]
    assert list(inputs) == ["10.0.0.1:40150"], inputs
    assert inputs["10.0.0.1:40150"]["r"] < time.monotonic_ns(), inputs
