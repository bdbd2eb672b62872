"""Authenticated DTA reports on the live testbed: the default topology with a key file
(``[topology] keys``). ``netstack dta report`` seals h1's reports with h1's key, sw2's translator
opens them and they land in c1's memory; a report forged in h2's namespace, a captured genuine
frame replayed and an unauthenticated report are refused, counted per reason in ``netstack dta
status --json``, and leave c1's memory unchanged. Reports from h2 under h1's address or one no
node has never reach the translator: sw2's edge port drops them (BCP 38).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headers.auth import AuthTrailer
from headers.dta import DTABase, KeyWrite, encode_report
from headers.inet import build_udp_frame, ip_bytes, parse_udp_frame
from headers.registry import UdpPort
from netstack import runtime
from netstack.auth.keys import generate
from netstack.cli import build_parser
from netstack.dta import CollectorQuery, control
from netstack.topo.model import load_topology

from .conftest import in_node, running

pytestmark = pytest.mark.netns

DEFAULT_TOML = Path(__file__).resolve().parents[2] / "netstack" / "topo" / "default.toml"

SNIFF = """
import select, socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))  # ETH_P_ALL: outgoing too
s.bind(("eth0", 0))
print("ready", flush=True)
deadline = time.time() + 20
while time.time() < deadline:
    if not select.select([s], [], [], 0.2)[0]:
        continue
    data, addr = s.recvfrom(65535)
    if (addr[2] == socket.PACKET_OUTGOING and len(data) > 42 and data[12:14] == b"\\x08\\x00" and data[23] == 17
            and data[36:38] == b"\\x9c\\x68"):
        print(data.hex(), flush=True)
        break
"""

SEND_RAW = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind(("eth0", 0))
for frame in sys.argv[1:]:
    s.send(bytes.fromhex(frame))
"""


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    d = tmp_path_factory.mktemp("keyed")
    generate(d / "keys.json")
    text = DEFAULT_TOML.read_text()
    assert "\nprefix = " in text
    (d / "topology.toml").write_text(text.replace("\nprefix = ", '\nkeys = "keys.json"\nprefix = ', 1))
    topology = load_topology(str(d / "topology.toml"))
    assert topology.keys_path() == d / "keys.json"
    yield from running(topology, tmp_path_factory, "a")


@pytest.fixture(scope="module")
def dta(keyed):
    prefix = keyed.prefix
    info = control.enable_translator(prefix, "sw2", "c1")
    q = CollectorQuery.open(info["memory_dir"])
    try:
        yield {"state": keyed, "prefix": prefix, "info": info, "q": q}
    finally:
        q.close()
        control.disable_translator(prefix, "sw2")


def cli(capsys, *argv: str) -> str:
    capsys.readouterr()
    args = build_parser().parse_args(list(argv))
    assert args.func(args) == 0
    return capsys.readouterr().out


def status(capsys, prefix: str) -> dict:
    return json.loads(cli(capsys, "dta", "status", "--json", "--prefix", prefix))["translator"]["counters"]


def until(cond, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def memory(q: CollectorQuery) -> dict[str, bytes]:
    return {name: r.read(0, r.size) for name, r in q.memory.regions.items()}


def test_the_translator_authenticates_the_topologys_hosts(dta):
    auth = dta["info"]["auth"]
    assert auth["reporters"] == ["10.0.0.1", "10.0.0.2"] and auth["keys"].endswith("keys.json")
    st = control.translator_status(dta["prefix"], "sw2")
    assert st["counters"]["auth"]["reporters"] == 2 and st["auth"] == auth


def test_genuine_reports_land_and_forged_replayed_ones_do_not(dta, capsys):
    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    # a genuine report through the CLI (it passes the topology's key file to the tool in h1)
    out = cli(capsys, "dta", "report", "keywrite", "42", "7", "--from", "h1", "--prefix", prefix)
    assert "sealed as reporter 10.0.0.1" in out
    assert until(lambda: q.keywrite_get(42) == (7,)), q.keywrite_get(42)
    # again at once (the same wall-clock second): a newer era, not a replay of the first run
    cli(capsys, "dta", "report", "keywrite", "43", "8", "--from", "h1", "--prefix", prefix)
    assert until(lambda: q.keywrite_get(43) == (8,))
    c = status(capsys, prefix)
    assert c["auth_ok"] == 2 and not any(c["auth_refused"].values())

    # capture a genuine frame on h1's wire while the tool sends it
    sniffer = in_node(state, "h1", SNIFF, background=True)
    assert sniffer.stdout.readline().strip() == "ready"
    cli(capsys, "dta", "report", "keywrite", "44", "9", "--from", "h1", "--prefix", prefix)
    captured = bytes.fromhex(sniffer.stdout.readline().strip())
    sniffer.wait(timeout=10)
    assert until(lambda: q.keywrite_get(44) == (9,))
    udp = parse_udp_frame(captured)
    assert udp.ip.src == ip_bytes("10.0.0.1") and udp.payload_length == 12 + 17
    assert until(lambda: status(capsys, prefix)["auth_ok"] == 3)

    before = memory(q)
    c1 = control.collector_status(prefix)["responder"]["qps"]["keywrite"]["writes"]
    h1 = state.host_ip("h1")
    dst = state.host_ip("c1")
    report = encode_report(DTABase.of(KeyWrite(2, 42, (666,)), 0), KeyWrite(2, 42, (666,)))
    forged = report + AuthTrailer(1, int(time.time()) + 10, 1, os.urandom(8)).encode()
    # from h2's own address and socket: the codec's report with a made-up trailer (wrong MAC)
    code = ("import socket, sys; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
            "[s.sendto(bytes.fromhex(p), (sys.argv[1], 40040)) for p in sys.argv[2:]]")
    r = in_node(state, "h2", code, dst, forged.hex(), report.hex())  # forged; unauthenticated (truncated)
    assert r.returncode == 0, r.stderr

    # from h2's namespace, spoofing h1's address and an address that reports nothing: sw2's edge
    # port drops both before any translator sees them (BCP 38, netstack/switch/sourceguard.py)
    def spoofed(src: str, payload: bytes) -> str:
        return build_udp_frame(captured[6:12], captured[0:6], ip_bytes(src), ip_bytes(dst), UdpPort.DTA_SOURCE,
                               UdpPort.DTA, payload).hex()

    def edge_spoofed() -> int:
        return int(runtime.status(prefix)["daemons"]["sw2"]["ports"]["p-h2"]["edge_drops_spoofed"])

    spoofed_before = edge_spoofed()
    r = in_node(state, "h2", SEND_RAW, spoofed(h1, forged), spoofed("10.0.0.77", forged))
    assert r.returncode == 0, r.stderr
    assert until(lambda: edge_spoofed() == spoofed_before + 2)
    # the captured genuine frame, replayed from h1's namespace
    r = in_node(state, "h1", SEND_RAW, captured.hex(), captured.hex())
    assert r.returncode == 0, r.stderr

    want = {"forged": 1, "truncated": 1, "replayed": 2}
    assert until(lambda: {k: v for k, v in status(capsys, prefix)["auth_refused"].items() if v} == want), \
        status(capsys, prefix)["auth_refused"]
    c = status(capsys, prefix)
    assert c["auth_ok"] == 3 and c["reports"] == 3 + sum(want.values()) and c["malformed"] == 0
    assert c["auth"]["per_reporter"]["10.0.0.1"]["refused"] == {"replayed": 2}
    assert c["auth"]["per_reporter"]["10.0.0.2"]["refused"] == {"forged": 1, "truncated": 1}
    time.sleep(0.2)
    assert memory(q) == before and q.keywrite_get(42) == (7,)
    assert control.collector_status(prefix)["responder"]["qps"]["keywrite"]["writes"] == c1
    text = cli(capsys, "dta", "status", "--prefix", prefix)
    assert "auth_refused forged" in text and "auth_ok" in text


def test_the_reporter_tool_takes_the_key_file_itself(dta):
    state, q = dta["state"], dta["q"]
    keys = dta["info"]["auth"]["keys"]
    dst = state.host_ip("c1")
    argv = ["ip", "netns", "exec", state.namespaces["h2"], sys.executable, "-m", "netstack.dta.live", "report",
            "append", "--dst", dst, "--list", "4", "--value", "500", "--count", "8", "--quiet", "--key-file", keys,
            "--era", str(int(time.time()) + 100)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["auth"]["reporter"] == "10.0.0.2" and res["auth"]["sealed"] == 8
    assert until(lambda: q.append_read(4)[-8:] == list(range(500, 508))), q.append_read(4)
