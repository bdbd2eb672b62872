"""``netstack capture`` on the running testbed: a sequenced stream captured on a switch-to-switch
link lands in a pcapng file complete and in order, with the software FCS kept and marked; the live
one-line view; bad input refused before anything runs; ``netstack link`` down/up/flap."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time

import pytest

from netstack.runtime import RunState
from netstack.topo.nsenter import in_netns

from .conftest import sh

pytestmark = pytest.mark.netns

CLI = [sys.executable, "-m", "netstack.cli"]
PORT = 45555


def _stream(state: RunState, count: int, tag: bytes) -> None:
    with in_netns(state.namespaces["h1"]):
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with tx:
        for seq in range(count):
            tx.sendto(tag + struct.pack("!I", seq) + bytes(40), ("10.0.0.2", PORT))
            time.sleep(0.002)


def _started(proc: subprocess.Popen) -> None:
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("capturing on"), line


def test_a_stream_is_captured_whole_in_order_with_the_fcs_marked(testbed, tmp_path):
    from scapy.utils import PcapNgReader

    out = tmp_path / "sw1.pcapng"
    cap = subprocess.Popen([*CLI, "capture", "sw1-sw2", "--end", "sw1", "-w", str(out), "--count", "200",
                            "--filter", f"udp dst port {PORT}", "--prefix", testbed.prefix],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _started(cap)
        _stream(testbed, 200, b"NSCAP")
        stdout, stderr = cap.communicate(timeout=30)
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    assert cap.returncode == 0, stderr
    assert "captured 200 frames on sw1:" in stdout and str(out) in stdout
    with PcapNgReader(str(out)) as r:
        pkts = list(r)
    assert len(pkts) == 200
    seqs = []
    for p in pkts:
        raw = bytes(p)
        at = raw.index(b"NSCAP")
        seqs.append(struct.unpack_from("!I", raw, at + 5)[0])
        # sw1 -> sw2 carries netstack's software FCS: kept at the end, marked, and it checks
        assert p.comments == [b"netstack software FCS: last 4 bytes, ok"], p.comments
        assert p.direction == 2  # outbound at sw1's end
        assert p.sniffed_on.startswith("sw1:")
    assert seqs == list(range(200))
    _tshark_reads(out)


def _tshark_reads(pcapng) -> None:
    """The file opens in tshark (installed by the plugin tests' helper when missing), and with
    netstack's plugin each frame's software FCS shows as checked and good."""
    import importlib.util
    import shutil
    import tempfile
    from pathlib import Path

    path = Path(__file__).parents[1] / "wireshark" / "tshark.py"
    spec = importlib.util.spec_from_file_location("tshark_helper", path)
    assert spec is not None and spec.loader is not None
    helper = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helper)
    exe = shutil.which("tshark") or helper.install_tshark()
    work = Path(tempfile.mkdtemp(prefix="netstack-capture-"))
    try:
        work.chmod(0o755)
        copy = work / "capture.pcapng"
        shutil.copyfile(pcapng, copy)
        copy.chmod(0o644)
        done = helper.TShark(exe, work).run(copy, "-T", "fields", "-e", "frame.comment", "-e", "netstack_fcs.good",
                                            "-e", "udp.dstport")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [line.split("\t") for line in done.stdout.strip().splitlines()]
    assert len(rows) == 200, done.stdout[-500:]
    assert all(r[0] == "netstack software FCS: last 4 bytes, ok" and r[1] in ("1", "True") and r[2] == str(PORT)
               for r in rows), rows[:3]


def test_without_a_file_each_frame_is_one_line(testbed):
    cap = subprocess.Popen([*CLI, "capture", "h1-sw1", "--count", "4", "--filter", f"udp port {PORT}",
                            "--prefix", testbed.prefix], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _started(cap)
        _stream(testbed, 4, b"NSLINE")
        stdout, stderr = cap.communicate(timeout=30)
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    lines = stdout.strip().splitlines()
    assert cap.returncode == 0 and len(lines) == 4, (stdout, stderr)
    assert all(" h1>sw1 " in line and "10.0.0.1" in line and str(PORT) in line for line in lines), lines
    assert "captured 4 frames on h1:" in stderr


@pytest.mark.parametrize("argv, said", [
    (["capture", "nosuch"], "no link 'nosuch'"),
    (["capture", "sw1-sw2", "--end", "h2"], "--end 'h2' is not an end of sw1-sw2"),
    (["capture", "sw1-sw2", "--count", "-3"], "the count must be at least 1"),
    (["capture", "sw1-sw2", "--seconds", "-1"], "the time must be positive"),
    (["capture", "sw1-sw2", "-w", "/proc/nope/x.pcapng"], "cannot write /proc/nope/x.pcapng"),
    (["capture", "sw1-sw2", "--filter", "udp port banana"], "--filter 'udp port banana'"),
    (["link", "nosuch", "down"], "no link 'nosuch'"),
    (["link", "sw1-sw2", "down", "--end", "h2"], "--end 'h2'"),
    (["link", "sw1-sw2", "flap", "--down-ms", "-5", "--up-ms", "10"], "the time must be positive"),
    (["link", "sw1-sw2", "flap"], "flap needs --down-ms and --up-ms"),
    (["metrics"], "serve no metrics: start the topology with 'netstack up --metrics-port PORT'"),
])
def test_bad_input_is_refused_clearly_and_nothing_runs(testbed, argv, said):
    r = subprocess.run([*CLI, *argv, "--prefix", testbed.prefix], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
    # only this testbed's commands: another user's `netstack capture` may run meanwhile
    left = subprocess.run(["pgrep", "-f", f"netstack.cli {argv[0]} .*--prefix {testbed.prefix}$"],
                          capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_link_down_stops_traffic_up_restores_it_and_flap_leaves_it_up(testbed):
    prefix = testbed.prefix
    r = subprocess.run([*CLI, "link", "sw1-sw2", "down", "--prefix", prefix], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0 and "down" in r.stdout, r.stderr
    try:
        assert sh(testbed, "h1", "ping", "-c", "2", "-i", "0.2", "-W", "1", "10.0.0.2").returncode != 0
    finally:
        r = subprocess.run([*CLI, "link", "sw1-sw2", "up", "--prefix", prefix], capture_output=True, text=True,
                           timeout=30)
    assert r.returncode == 0, r.stderr
    # ~0.1 s of carrier after the up; the first ping may wait for it
    assert sh(testbed, "h1", "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.0.0.2").returncode == 0
    # a 100 ms ping stream across 3 flaps of 300 ms down: the gaps are in the replies' sequence
    ping = subprocess.Popen(["ip", "netns", "exec", testbed.namespaces["h1"], "ping", "-i", "0.05", "-c", "60",
                             "-W", "1", "10.0.0.2"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    r = subprocess.run([*CLI, "link", "sw1-sw2", "flap", "--down-ms", "300", "--up-ms", "300", "--count", "3",
                        "--prefix", prefix, "--json"], capture_output=True, text=True, timeout=30)
    out, _ = ping.communicate(timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("flap ") == 3  # progress
    replies = [int(line.split("icmp_seq=")[1].split()[0]) for line in out.splitlines() if "icmp_seq=" in line]
    lost = 60 - len(replies)
    # 3 x 300 ms down at 50 ms per ping: about 18 lost (each outage also costs the carrier's return)
    assert 10 <= lost <= 36, (lost, out[-500:])
    assert '"flaps": 3' in r.stdout and "UP" in r.stdout
