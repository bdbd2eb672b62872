"""The live testbed end to end: real frames through the userspace switches.

Issue #4: h1 pings h2 and c1; a kernel TCP transfer of >= 10 MB arrives intact; a corrupting
sw1-sw2 link shows its FCS drops at sw2 and the matching end-to-end loss; a rate-limited port
paces; a PFC pause stops a class and resume restarts it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from headers.fcs import append_fcs
from headers.pfc import pause_frame, resume_frame
from netstack import runtime
from netstack.topo import impair

from .conftest import in_node, sh

pytestmark = pytest.mark.netns

TCP_SINK = r"""
import hashlib, socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 5001)); srv.listen(1); print("ready", flush=True)
conn, _ = srv.accept(); h = hashlib.sha256(); n = 0
while True:
    b = conn.recv(1 << 16)
    if not b: break
    h.update(b); n += len(b)
print(n, h.hexdigest(), flush=True)
"""

TCP_SOURCE = r"""
import hashlib, os, socket, sys
data = os.urandom(int(sys.argv[1]))
s = socket.create_connection(("10.0.0.2", 5001), timeout=60); s.sendall(data); s.close()
print(len(data), hashlib.sha256(data).hexdigest())
"""

UDP_SINK = r"""
import socket, struct, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
s.bind(("0.0.0.0", 5002)); s.settimeout(float(sys.argv[1])); print("ready", flush=True)
seqs = set(); first = last = None; nbytes = 0
try:
    while True:
        b = s.recv(2048); now = time.monotonic()
        first = first or now; last = now; nbytes += len(b)
        seqs.add(struct.unpack_from("!I", b)[0])
except socket.timeout:
    pass
print(len(seqs), nbytes, (last or 0) - (first or 0), flush=True)
"""

UDP_SOURCE = r"""
import socket, struct, sys, time
n, size, pps = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
pad = b"x" * (size - 4); t0 = time.monotonic()
for i in range(n):
    if pps:
        ahead = t0 + i / pps - time.monotonic()
        if ahead > 0: time.sleep(ahead)
    while True:
        try:
            s.sendto(struct.pack("!I", i) + pad, ("10.0.0.2", 5002)); break
        except BlockingIOError:
            time.sleep(0.0005)
print(n)
"""


def _udp_run(state, n: int, size: int, pps: float, quiet_s: float = 2.0) -> tuple[int, int, float]:
    sink = in_node(state, "h2", UDP_SINK, str(quiet_s), background=True)
    assert sink.stdout.readline().strip() == "ready"
    src = in_node(state, "h1", UDP_SOURCE, str(n), str(size), str(pps), timeout=300)
    assert src.returncode == 0, src.stderr
    out, _err = sink.communicate(timeout=300)
    got, nbytes, span = out.split()
    return int(got), int(nbytes), float(span)


def _counters(state, node: str) -> dict:
    return runtime.status(state.prefix)["daemons"][node]["ports"]


def test_ping_through_switches(testbed):
    for target in ("10.0.0.2", "10.0.0.100"):
        r = sh(testbed, "h1", "ping", "-c", "3", "-i", "0.2", "-W", "2", target)
        assert r.returncode == 0, r.stdout + r.stderr
        assert " 0% packet loss" in r.stdout


def test_tcp_10mb_arrives_intact(testbed):
    sink = in_node(testbed, "h2", TCP_SINK, background=True)
    try:
        assert sink.stdout.readline().strip() == "ready"
        src = in_node(testbed, "h1", TCP_SOURCE, str(10 * 1024 * 1024), timeout=120)
        assert src.returncode == 0, src.stderr
        out, _ = sink.communicate(timeout=120)
    finally:
        sink.kill()
    assert out.split() == src.stdout.split()  # same length, same SHA-256
    c = _counters(testbed, "sw1")
    assert c["p-sw2"]["tx_frames"] >= 10 * 1024 * 1024 // 1500


def test_corruption_becomes_fcs_loss(testbed):
    prefix = testbed.prefix
    sw1 = f"{prefix}-sw1"
    before_sw1, before_sw2 = _counters(testbed, "sw1")["p-sw2"], _counters(testbed, "sw2")["p-sw1"]
    impair.apply_impairment(prefix, sw1, "p-sw2", corrupt=0.01, backend="nft")
    try:
        n = 20000
        got, _, _ = _udp_run(testbed, n, 200, 8000)
        kernel = impair.active_impairment(prefix, sw1, "p-sw2")
    finally:
        impair.clear_impairment(prefix, sw1, "p-sw2")
    after_sw1, after_sw2 = _counters(testbed, "sw1")["p-sw2"], _counters(testbed, "sw2")["p-sw1"]
    sent_on_link = after_sw1["tx_frames"] - before_sw1["tx_frames"]
    fcs_drops = after_sw2["fcs_errors"] - before_sw2["fcs_errors"]
    assert sent_on_link >= n
    rate = fcs_drops / sent_on_link
    # 20k Bernoulli(0.01) trials: sd ~ 0.0007; allow 5 sd
    assert 0.0065 < rate < 0.0135, (fcs_drops, sent_on_link)
    assert kernel is not None and kernel["corrupted"] == fcs_drops  # every corrupted frame was caught
    # end to end: the datagrams lost are the ones the FCS check dropped (at most a few ARP/other frames differ)
    lost = n - got
    assert abs(lost - fcs_drops) <= max(3, fcs_drops // 20), (lost, fcs_drops)


def test_rate_limited_port_paces(testbed):
    prefix = testbed.prefix
    runtime.control(prefix, "sw1", "set_port", port="p-sw2", rate_bps=10_000_000)
    try:
        before = _counters(testbed, "sw1")["p-sw2"]["queue_drops"]
        # offer ~2x the rate for ~2 s: 1000-byte datagrams at 2500/s = 20 Mbit/s
        got, _nbytes, span = _udp_run(testbed, 5000, 1000, 2500)
        drops = _counters(testbed, "sw1")["p-sw2"]["queue_drops"]
    finally:
        runtime.control(prefix, "sw1", "set_port", port="p-sw2", rate_bps=100_000_000)
    wire_bits = got * (1000 + 8 + 20 + 14 + 4 + 24) * 8  # UDP+IP+Ethernet+FCS trailer+preamble/IFG
    measured = wire_bits / span
    assert 8.5e6 < measured < 11e6, measured  # paced at ~10 Mbit/s, not the offered 20
    assert (drops if isinstance(drops, int) else sum(drops.values())) - (
        before if isinstance(before, int) else sum(before.values())) > 0  # excess tail-dropped and counted


def test_pfc_pause_stops_a_class_and_resume_restarts_it(testbed):
    """Pause class 0 of sw1's p-sw2 by injecting a real 802.1Qbb frame on the link from
    sw2's side; UDP from h1 then queues at sw1 and flows again after the resume."""
    ns_sw2 = testbed.namespaces["sw2"]
    inject = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(("p-sw1", 0)); s.send(bytes.fromhex(sys.argv[1]))
"""
    mac = next(p.mac for p in testbed.ports_of("sw2") if p.ifname == "p-sw1")
    src = bytes.fromhex(mac.replace(":", ""))

    def send(frame: bytes) -> None:
        r = subprocess.run(["ip", "netns", "exec", ns_sw2, "python3", "-c", inject, append_fcs(frame).hex()],
                           capture_output=True, text=True, timeout=10)
        assert r.returncode == 0, r.stderr

    before = _counters(testbed, "sw1")["p-sw2"]
    sink = in_node(testbed, "h2", UDP_SINK, "1.5", background=True)
    assert sink.stdout.readline().strip() == "ready"
    send(pause_frame(src, [0], quanta=0xFFFF))  # 0xFFFF quanta at 100 Mbit/s = 335 ms
    t0 = time.monotonic()
    r = in_node(testbed, "h1", UDP_SOURCE, "20", "100", "0")
    assert r.returncode == 0
    time.sleep(max(0.0, 0.15 - (time.monotonic() - t0)))
    paused = _counters(testbed, "sw1")["p-sw2"]
    queued = paused["tx_frames"] - before["tx_frames"]
    send(resume_frame(src, [0]))
    out, _ = sink.communicate(timeout=30)
    after = _counters(testbed, "sw1")["p-sw2"]
    pauses = paused["pauses_rx"]
    assert (sum(pauses.values()) if isinstance(pauses, dict) else pauses) >= 1
    assert queued == 0, "class 0 kept sending while paused"
    assert int(out.split()[0]) == 20  # everything flowed after the resume
    assert after["tx_frames"] - before["tx_frames"] >= 20


def test_status_json(testbed):
    r = subprocess.run([sys.executable, "-m", "netstack.cli", "status", "--prefix", testbed.prefix, "--json"],
                       capture_output=True, text=True, check=False, timeout=30)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert set(data["daemons"]) == {"sw1", "sw2", "c1"}  # switches and the DTA collector
    ports = data["daemons"]["sw1"]["ports"]
    assert set(ports) == {"p-h1", "p-sw2"}
    for key in ("rx_frames", "tx_frames", "rx_bytes", "tx_bytes", "fcs_errors", "queue_drops", "pauses_rx",
                "pauses_tx", "kernel_drops"):
        assert key in ports["p-sw2"], key


def test_switch_backend_impairment_via_cli_and_status(testbed):
    prefix = testbed.prefix
    cli = [sys.executable, "-m", "netstack.cli"]
    r = subprocess.run([*cli, "impair", "sw1-sw2", "--backend", "switch", "--loss", "0.5", "--seed", "7",
                        "--direction", "sw1:sw2", "--prefix", prefix], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    try:
        sh(testbed, "h1", "ping", "-c", "20", "-i", "0.01", "-q", "10.0.0.2")
        st = runtime.status(prefix)
        imp = st["impairments"]["sw1>sw2"]
        assert imp["backend"] == "switch" and imp["loss"] == 0.5 and imp["dropped"] > 0
    finally:
        r = subprocess.run([*cli, "impair", "sw1-sw2", "--clear", "--prefix", prefix], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
    assert "sw1>sw2" not in runtime.status(prefix)["impairments"]
    bad = subprocess.run([*cli, "impair", "sw1-sw2", "--gilbert", "0.1,0.2", "--prefix", prefix],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "needs --backend switch" in bad.stderr


def test_exec_detach_starts_in_the_node_and_returns(testbed, tmp_path):
    """``netstack exec --detach``: the command runs on in the node's namespace (where ``netstack
    down`` looks for processes to stop), its output goes to the log, the CLI returns at once."""
    cli = [sys.executable, "-m", "netstack.cli"]
    log = tmp_path / "ping.log"
    r = subprocess.run([*cli, "exec", "--prefix", testbed.prefix, "--detach", "--log", str(log), "h1", "--",
                        "ping", "-i", "0.2", "10.0.0.2"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split("started pid ")[1].split()[0])
    try:
        assert "output in " + str(log) in r.stdout
        pids = subprocess.run(["ip", "netns", "pids", testbed.namespaces["h1"]], capture_output=True, text=True)
        assert str(pid) in pids.stdout.split()
        deadline = time.monotonic() + 5
        while "bytes from 10.0.0.2" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "bytes from 10.0.0.2" in log.read_text()
    finally:
        os.kill(pid, signal.SIGTERM)
    for argv, said in ((["--log", str(log), "h1", "--", "true"], "--log goes with --detach"),
                       (["--detach", "--log", "/proc/nope/x.log", "h1", "--", "true"], "cannot write the log"),
                       (["--detach", "h1", "--", "/nonexistent/cmd"], "exited at once")):
        r = subprocess.run([*cli, "exec", "--prefix", testbed.prefix, *argv], capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 2 and said in r.stderr, (argv, r.stderr)
