"""Faults on the live testbed (docs/faults.md), each driven by its ``netstack fault`` command:

1. a switch daemon killed (-9) and restarted under LinkGuardian: no duplicate, the stream completes;
2. the DTA collector killed and restarted, or frozen: what is lost is counted, and the translator
   recovers through NAKs and the grace period (DTA §5.3), after a restart as after a stall;
3. a link set down and up: the stream stops, the switch counts it, the stream resumes;
4. a pause storm: refused at a default edge port, released by the PFC watchdog where one is on
   (edge by default, fabric when the topology asks), held for ever where none is;
5. a clock jump on a 1Pipe host: the host's processes see it.

Every test brings its own topology up under a unique prefix and down again, also on failure.
Assertions are on behaviour and counters, never on how long something took.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from netstack import faults, runtime
from netstack.cli import main as cli
from netstack.dta import CollectorQuery, control
from netstack.linkguardian.control import status_all
from netstack.procstat import process_start
from netstack.topo.model import load_topology, load_topology_spec
from netstack.topo.nsenter import iproute
from tests.topologies import header, line

from .conftest import in_node, running

pytestmark = pytest.mark.netns

#: A sequenced UDP sink: prints the sequence numbers it received (in arrival order) as JSON once it
#: hears the end marker (sequence number 2^32 - 1) or nothing for argv[2] seconds. "ready" on stderr
#: once bound. (The marker, not silence, ends it: a switch restarted on a loaded machine can leave a
#: gap of seconds in the stream, and a sink that gave up during it lost the rest.)
SINK = r"""
import json, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 24)
s.bind(("0.0.0.0", int(sys.argv[1])))
print("ready", file=sys.stderr, flush=True)
s.settimeout(30.0)
seqs = []
while True:
    try:
        data = s.recv(65536)
    except TimeoutError:
        break
    if len(data) >= 4:
        seq = struct.unpack_from("!I", data)[0]
        if seq == 0xFFFFFFFF:
            break
        seqs.append(seq)
        s.settimeout(float(sys.argv[2]))
print(json.dumps(seqs))
"""

#: The sink's end marker, sent a few times (a copy may be lost like any datagram)
END = 0xFFFFFFFF

#: Sends argv[4] datagrams numbered argv[3].. to argv[1]:argv[2] at argv[5] per second.
SEND = r"""
import socket, struct, sys, time
dst, port, first, count, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
t0 = time.monotonic()
for i in range(count):
    ahead = t0 + i / rate - time.monotonic()
    if ahead > 0:
        time.sleep(ahead)
    while True:
        try:
            s.sendto(struct.pack("!I", first + i) + bytes(196), (dst, port))
            break
        except OSError:
            time.sleep(0.001)
print(count)
"""


def _ip(state, node: str) -> str:
    return state.host_ip(node)


def _until(cond, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


class Stream:
    """A sink on ``dst`` and phases of numbered datagrams sent to it from ``src``."""

    def __init__(self, state, src: str, dst: str, port: int, quiet: float = 20.0) -> None:
        self.state, self.src, self.dst, self.port = state, src, dst, port
        self.sink = in_node(state, dst, SINK, str(port), str(quiet), background=True)
        assert self.sink.stderr.readline().strip() == "ready"

    def send(self, first: int, count: int, rate: float = 1000.0, background: bool = False):
        args = (_ip(self.state, self.dst), str(self.port), str(first), str(count), str(rate))
        if background:
            return in_node(self.state, self.src, SEND, *args, background=True)
        r = in_node(self.state, self.src, SEND, *args)
        assert r.returncode == 0, r.stderr
        return r

    def received(self) -> list[int]:
        """What the sink got, once the end marker sent after everything else reached it."""
        for _ in range(3):
            self.send(END, 1)
            if self.sink.poll() is not None:
                break
            time.sleep(0.2)
        out, err = self.sink.communicate(timeout=60)
        assert self.sink.returncode == 0, err
        return json.loads(out.strip().splitlines()[-1])

    def close(self) -> None:
        if self.sink.poll() is None:
            self.sink.kill()
            self.sink.wait()


def _port(prefix: str, node: str, port: str) -> dict:
    return runtime.control(prefix, node, "status")["ports"][port]


def _fault(capsys, *argv: str) -> tuple[int, str, str]:
    """``netstack fault ARGV`` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = cli(["fault", *argv])
    except SystemExit as exc:  # argparse rejects the arguments
        rc = int(exc.code or 0)
    out, err = capsys.readouterr()
    return rc, out, err


def _bed(topology, tmp_path_factory):
    """``running`` (conftest), and afterwards the shared memory of a collector that a failed test
    left killed (a crashed collector leaves its regions, as any crashed process would)."""
    gen = running(topology, tmp_path_factory, "f")
    state = next(gen)
    try:
        yield state
    finally:
        gen.close()  # netstack down
        for leftover in Path("/dev/shm").glob(f"netstack-{state.prefix}-*"):
            shutil.rmtree(leftover, ignore_errors=True)


@pytest.fixture
def testbed_f(tmp_path_factory):
    """The default topology (no impairment), fresh for each test: faults leave their marks."""
    yield from _bed(load_topology(None), tmp_path_factory)


# =========================================================================== bad input


def test_bad_input_exits_2_with_a_message_and_changes_nothing(testbed_f, capsys):
    prefix = testbed_f.prefix
    before = {d.key: d.pid for d in runtime.daemons_of(runtime.load_state(prefix))}
    cases = [
        (["kill", "nosuch", "--prefix", prefix], "no node or daemon 'nosuch'"),
        (["kill", "h1", "--prefix", prefix], "node h1 runs no daemon"),
        (["kill", "sw2", "--restart", "--down-ms", "-5", "--prefix", prefix], "cannot be negative"),
        (["kill", "sw2", "--down-ms", "100", "--prefix", prefix], "give --restart too"),
        (["kill", "sw2", "--signal", "HUP", "--prefix", prefix], "invalid choice"),
        (["start", "sw2", "--prefix", prefix], "is running"),
        (["link", "nosuch", "down", "--prefix", prefix], "no link 'nosuch'"),
        (["link", "sw1-sw2", "down", "--end", "h2", "--prefix", prefix], "--end 'h2'"),
        (["link", "sw1-sw2", "sideways", "--prefix", prefix], "invalid choice"),
        (["pause-storm", "h1-sw1", "--from", "h1", "--seconds", "-1", "--prefix", prefix], "must be positive"),
        (["pause-storm", "h1-sw1", "--from", "h1", "--pps", "0", "--prefix", prefix], "must be positive"),
        (["pause-storm", "h1-sw1", "--from", "h1", "--class", "9", "--prefix", prefix], "class must be 0 to 7"),
        (["pause-storm", "h1-sw1", "--from", "h2", "--prefix", prefix], "is not an end of h1-sw1"),
        (["pause-storm", "nosuch", "--from", "h1", "--prefix", prefix], "no link 'nosuch'"),
        (["clock-jump", "sw1", "--ms", "5", "--prefix", prefix], "sw1 is not a host"),
        (["clock-jump", "nosuch", "--ms", "5", "--prefix", prefix], "no node 'nosuch'"),
        (["clock-jump", "h1", "--ms", "5", "--prefix", prefix], "no 1Pipe process runs on h1"),
        (["clock-jump", "h1", "--ms", "0", "--prefix", prefix], "non-zero jump"),
        (["kill", "sw1", "--prefix", "zz" + prefix], "no topology is running under prefix"),
    ]
    for argv, message in cases:
        rc, _out, err = _fault(capsys, *argv)
        assert rc == 2, (argv, err)
        assert message in err, (argv, err)
    # nothing was killed, restarted, downed or written
    state = runtime.load_state(prefix)
    assert {d.key: d.pid for d in runtime.daemons_of(state)} == before
    assert all(d.alive() for d in runtime.daemons_of(state))
    st = runtime.status(prefix)["daemons"]
    assert all("error" not in v for v in st.values()), st
    assert all(v == "UP" for link in state.links for v in faults.link_state(state, link).values())
    assert not list(runtime.run_dir(prefix).glob("*clock-*.json"))
    assert not list(runtime.run_dir(prefix).glob("*" + runtime.LAUNCH_SUFFIX))


def test_a_killed_and_restarted_daemon_keeps_status_and_down_working(tmp_path_factory, capsys):
    gen = _bed(load_topology(None), tmp_path_factory)
    state = next(gen)
    prefix = state.prefix
    try:
        old = {d.key: d for d in runtime.daemons_of(state)}
        # up recorded when each daemon's process started: a pid is theirs only while that agrees
        assert all(d.start_ticks == process_start(d.pid) > 0 for d in old.values()), old
        rc, out, err = _fault(capsys, "kill", "sw1", "--signal", "TERM", "--restart", "--prefix", prefix)
        assert rc == 0, err
        assert "killed (SIGTERM), restarted as pid" in out
        new = {d.key: d for d in runtime.daemons_of(runtime.load_state(prefix))}
        assert new["sw1"].pid != old["sw1"].pid and new["sw1"].alive() and not old["sw1"].alive()
        assert new["sw1"].start_ticks == process_start(new["sw1"].pid)  # the restart recorded its own
        assert new["c1"].pid == old["c1"].pid and new["sw2"].pid == old["sw2"].pid
        assert runtime.status(prefix)["daemons"]["sw1"]["pid"] == new["sw1"].pid
        log = Path(new["sw1"].log).read_text()
        assert log.count("switch sw1 up") == 2 and "netstack: restarting sw1" in log  # appended, not replaced
        # killed without --restart: down until 'fault start'
        rc, out, err = _fault(capsys, "kill", "c1", "--prefix", prefix)
        assert rc == 0 and "stays down" in out, err
        assert "not answering" in runtime.status(prefix)["daemons"]["c1"]["error"]
        rc, out, err = _fault(capsys, "start", "c1", "--prefix", prefix)
        assert rc == 0 and "started again as pid" in out, err
        c1 = next(d for d in runtime.daemons_of(runtime.load_state(prefix)) if d.key == "c1")
        assert runtime.status(prefix)["daemons"]["c1"]["pid"] == c1.pid
    finally:
        gen.close()  # netstack down
    assert not new["sw1"].alive() and not c1.alive()  # down stopped the restarted daemons


# =========================================================================== 1. switch restart, LinkGuardian


LG_TOPOLOGY = header("faults-lg", prefix="fl", rate="100Mbit", delay="10us", mtu=1500, buffer="200KB") + line(
    core='\n[links.features.a]\nlinkguardian = { role = "sender", mode = "blocking", copies = 1 }\n'
         '\n[links.features.b]\nlinkguardian = { role = "receiver" }\n')


@pytest.fixture(params=["lg-enable", "topology"])
def lg_bed(request, tmp_path_factory):
    """LinkGuardian on sw1-sw2 (sender sw1, receiver sw2): turned on at run time with 'netstack lg
    enable' (what an operator does), or named in the topology file (attached at daemon start)."""
    if request.param == "topology":
        path = tmp_path_factory.mktemp("topo") / "lg.toml"
        path.write_text(LG_TOPOLOGY)
        yield from _bed(load_topology(path), tmp_path_factory)
        return
    gen = _bed(load_topology(None), tmp_path_factory)
    state = next(gen)
    try:
        assert cli(["lg", "enable", "sw1-sw2", "--copies", "1", "--prefix", state.prefix]) == 0
        yield state
    finally:
        gen.close()


def test_a_switch_killed_and_restarted_under_linkguardian_delivers_no_duplicate(lg_bed, capsys):
    """sw2 (LinkGuardian's receiver on sw1-sw2) is killed with SIGKILL in the middle of a
    sequenced stream h1 -> h2 and restarted. Required (the issue): LinkGuardian restarts on
    sw2 with a new era, sw1's sender resynchronises, no datagram is delivered twice, and the
    stream sent after the restart arrives whole."""
    state, prefix = lg_bed, lg_bed.prefix
    stream = Stream(state, "h1", "h2", 5011)
    try:
        stream.send(0, 500, rate=2000)
        busy = stream.send(10_000, 4000, rate=2000, background=True)
        _until(lambda: _port(prefix, "sw1", "p-sw2")["tx_frames"] >= 1500)
        rc, _out, err = _fault(capsys, "kill", "sw2", "--restart", "--down-ms", "300", "--prefix", prefix)
        assert rc == 0, err
        assert busy.wait(timeout=60) == 0
        lg_sw2 = status_all(prefix).get("sw2", {})
        stream.send(20_000, 100, rate=1000)  # after recovery: a lead-in ...
        sender_before = runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]["counters"]
        stream.send(30_000, 300, rate=1000)  # ... and what must arrive whole
        sender_after = runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]["counters"]
        got = stream.received()
    finally:
        stream.close()
    counts = Counter(got)
    dups = sorted(s for s, n in counts.items() if n > 1)
    assert not dups, f"{len(dups)} datagrams delivered twice, e.g. {dups[:10]}"
    assert all(counts[s] == 1 for s in range(500))  # before the fault
    after = [s for s in range(30_000, 30_300) if s not in counts]
    assert not after, (f"{len(after)} of the 300 datagrams sent after the restart never arrived "
                       f"(LinkGuardian on the restarted sw2: {lg_sw2}); "
                       f"{sum(1 for s in counts if 10_000 <= s < 14_000)} of the 4000 sent across the fault did; "
                       f"sw1 sender after: {sender_after}; got {len(got)}: {sorted(counts)[-5:]}")
    assert sender_after["protected_frames"] > sender_before["protected_frames"]  # still protected
    assert lg_sw2.get("p-sw1", {}).get("receiver", {}).get("enabled"), \
        f"LinkGuardian did not restart on sw2's p-sw1 (lg_status {lg_sw2})"


# =========================================================================== 2. DTA collector


def _report_argv(state, first: int, count: int, redundancy: int = 1, rate: float = 2000.0) -> list[str]:
    """Key-Write reports from h1: key k := k + 7 for k in first..first+count-1."""
    return ["ip", "netns", "exec", state.namespaces["h1"], sys.executable, "-m", "netstack.dta.live", "report",
            "keywrite", "--dst", _ip(state, "c1"), "--quiet", "--key", str(first), "--value", str(first + 7),
            "--count", str(count), "--redundancy", str(redundancy), "--rate", str(rate)]


def _report(state, first: int, count: int, redundancy: int = 1, rate: float = 2000.0) -> int:
    """Key-Write reports from h1: key k := k + 7 for k in first..first+count-1."""
    r = subprocess.run(_report_argv(state, first, count, redundancy, rate), capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    return int(json.loads(r.stdout.strip().splitlines()[-1])["sent"])


def _stored(prefix: str, first: int, count: int) -> int:
    q = CollectorQuery.open(control.memory_dir(prefix))
    try:
        return sum(1 for k in range(first, first + count) if q.keywrite_get(k) == (k + 7,))
    finally:
        q.close()


def _dta(prefix: str) -> tuple[dict, dict, dict]:
    """(translator counters, collector status, sw2's p-c1 counters)."""
    return (control.translator_status(prefix)["counters"], control.collector_status(prefix),
            _port(prefix, "sw2", "p-c1"))


def _settled(prefix: str, writes: int) -> None:
    """Wait until the translator has turned ``writes`` requests into frames, or stopped counting."""
    seen: list[int] = []

    def done() -> bool:
        seen.append(control.translator_status(prefix)["counters"]["writes"])
        return seen[-1] >= writes or (len(seen) > 10 and seen[-1] == seen[-11])

    _until(done)


def test_a_collector_killed_and_started_again_keeps_its_qps_and_memory_and_counts_what_was_lost(testbed_f, capsys):
    """c1 killed with SIGKILL and started again later: the reports sent while it is down are lost
    and counted; it comes back with what its memory held and its QPs as they were (the same QPNs,
    rkeys and peer, expecting the PSN it had saved: docs/dta.md "Collector restart"). The old
    translator's next request is then ahead of that PSN: one NAK, a resync and a grace period
    (DTA §5.3), each request and report of it counted. ``netstack dta enable`` (the RDMA_CM
    exchange again, §7.2.1) still reconnects, in sequence."""
    state, prefix = testbed_f, testbed_f.prefix
    control.enable_translator(prefix, "sw2", "c1", grace_reports=200)
    assert _report(state, 1_000_000, 200) == 200
    _settled(prefix, 200)
    assert _until(lambda: _stored(prefix, 1_000_000, 200) == 200)
    t0, c0, p0 = _dta(prefix)
    info0 = control.connect_info(prefix)

    rc, _out, err = _fault(capsys, "kill", "c1", "--prefix", prefix)
    assert rc == 0, err
    assert _report(state, 2_000_000, 200) == 200  # while c1 is down
    _settled(prefix, t0["writes"] + 200)
    t1, p1 = control.translator_status(prefix)["counters"], _port(prefix, "sw2", "p-c1")
    rc, _out, err = _fault(capsys, "start", "c1", "--prefix", prefix)
    assert rc == 0, err
    c_new = control.collector_status(prefix)
    assert c_new["pid"] != c0["pid"] and c_new["restart"]["restored"], c_new["restart"]
    # the same connection: QPNs, rkeys, base addresses, peers; the saved PSN is the one c1 expected
    key = ("name", "qpn", "peer_qpn", "rkey", "base_va", "size")
    assert [{k: r[k] for k in key} for r in control.connect_info(prefix)["regions"]] == \
        [{k: r[k] for k in key} for r in info0["regions"]]
    assert c_new["responder"]["qps"]["keywrite"]["epsn"] == c0["responder"]["qps"]["keywrite"]["epsn"]
    assert c_new["responder"]["qps"]["keywrite"]["peer"] == c0["responder"]["qps"]["keywrite"]["peer"]
    assert _stored(prefix, 1_000_000, 200) == 200  # what c1 held survived the crash

    assert _report(state, 3_000_000, 200) == 200  # the old translator, the restarted collector
    _until(lambda: control.translator_status(prefix)["counters"]["reports"] >= t1["reports"] + 200)
    t2, c2, _p2 = _dta(prefix)
    kw = c2["responder"]["qps"]["keywrite"]

    # the accounting: every report sent while c1 was down reached the translator and became a
    # WRITE on p-c1 ...
    assert t1["keywrite"] - t0["keywrite"] == 200 and t1["writes"] - t0["writes"] == 200
    assert p1["tx_frames"] - p0["tx_frames"] >= 200
    # ... which no collector saw (the restarted one had seen nothing before the next report) ...
    assert c_new["responder"]["frames"] == 0
    # ... so the first request to the restarted c1 is ahead of its PSN: one NAK (to the bound
    # translator), those sent before the NAK came back dropped out of sequence, a resync and a
    # grace period that drops the rest of the 200; nothing of them executed
    sent = t2["writes"] - t1["writes"]
    assert kw["naks_psn"] == 1 and kw["requests"] == sent == 1 + kw["out_of_sequence_dropped"]
    assert kw["writes"] == 0 and kw["duplicates"] == 0 and c2["responder"]["unknown_qp"] == 0
    assert t2["resyncs"] - t0["resyncs"] == 1 and t2["grace_periods"] - t0["grace_periods"] == 1
    assert t2["naks_rejected_window"] == 0
    assert sent + (t2["grace_dropped"] - t1["grace_dropped"]) == 200
    assert _stored(prefix, 3_000_000, 200) == 0

    control.enable_translator(prefix, "sw2", "c1", grace_reports=200)  # a reconnect still works
    assert _report(state, 4_000_000, 200) == 200
    assert _until(lambda: _stored(prefix, 4_000_000, 200) == 200)
    kw = control.collector_status(prefix)["responder"]["qps"]["keywrite"]
    assert kw["writes"] == 200 and kw["naks_psn"] == 1 and kw["duplicates"] == 0


def test_a_frozen_collector_is_resynchronised_by_a_nak_and_the_grace_period(testbed_f, capsys):
    """c1 frozen (SIGSTOP) while reports keep coming: its receive ring fills and the kernel
    drops the rest (counted at c1's socket). Resumed, it NAKs the first request past the gap
    with its expected PSN; the translator rewinds the QP and drops the next ``grace`` reports
    (DTA §5.3); then reports land again. Every WRITE is accounted for. (Without the output
    window, ``window=0``: with it, the translator stops at the window instead of overflowing the
    frozen collector's ring, so no gap opens and no NAK comes: docs/dta.md "Output window".)"""
    state, prefix = testbed_f, testbed_f.prefix
    grace = 200
    control.enable_translator(prefix, "sw2", "c1", grace_reports=grace, window=0)
    assert _report(state, 1_000_000, 100) == 100
    _settled(prefix, 100)
    assert _until(lambda: _stored(prefix, 1_000_000, 100) == 100)
    t0, c0, p0 = _dta(prefix)
    kw0 = c0["responder"]["qps"]["keywrite"]

    rc, out, err = _fault(capsys, "kill", "c1", "--signal", "STOP", "--prefix", prefix)
    assert rc == 0 and "frozen" in out, err
    try:
        assert _report(state, 2_000_000, 4000, rate=4000) == 4000  # more than c1's receive ring holds
        _settled(prefix, t0["writes"] + 4000)
        t1 = control.translator_status(prefix)["counters"]
    finally:
        rc, out, err = _fault(capsys, "start", "c1", "--prefix", prefix)
    assert rc == 0 and "resumed" in out, err
    stalled = t1["writes"] - t0["writes"]  # what reached the translator (and became a WRITE) meanwhile
    assert stalled > 0
    # c1 executes what its ring held, and its kernel counts what did not fit
    assert _until(lambda: (lambda c: c["responder"]["qps"]["keywrite"]["writes"] - kw0["writes"]
                           + c["kernel_drops"] - c0["kernel_drops"])(control.collector_status(prefix)) >= stalled)
    t1, c1, p1 = _dta(prefix)
    executed = c1["responder"]["qps"]["keywrite"]["writes"] - kw0["writes"]
    dropped = c1["kernel_drops"] - c0["kernel_drops"]
    lost_on_the_way = (p1["queue_drops"] - p0["queue_drops"]) + (p1["send_errors"] - p0["send_errors"])
    assert dropped > 0 and executed > 0
    assert executed + dropped + lost_on_the_way == stalled
    assert c1["responder"]["qps"]["keywrite"]["naks_psn"] == kw0["naks_psn"]  # nothing told it yet

    # the next report reveals the gap: one NAK, one resync, a grace period of `grace` reports
    assert _report(state, 3_000_000, grace + 100, rate=500) == grace + 100
    _until(lambda: control.translator_status(prefix)["counters"]["reports"] >= t1["reports"] + grace + 100)
    t2, c2, _ = _dta(prefix)
    kw2 = c2["responder"]["qps"]["keywrite"]
    assert kw2["naks_psn"] - kw0["naks_psn"] >= 1
    assert t2["resyncs"] - t0["resyncs"] >= 1 and t2["grace_periods"] - t0["grace_periods"] >= 1
    assert t2["naks_rejected_window"] == 0  # a genuine NAK, inside the window
    assert t2["grace_dropped"] - t0["grace_dropped"] == grace
    # reports after the grace period land
    assert _report(state, 4_000_000, 100, rate=500) == 100
    assert _until(lambda: _stored(prefix, 4_000_000, 100) == 100)
    t3 = control.translator_status(prefix)["counters"]
    assert not t3["in_grace"] and t3["resyncs"] == t2["resyncs"]


def test_a_restarted_collector_is_resynchronised_through_naks_without_a_reconnect(testbed_f, capsys):
    """The issue's requirement for a collector restart: the translator resynchronises its QPs
    through NAKs and the grace period (DTA §5.3), with no 'netstack dta enable', and reports
    sent after the recovery land. c1 is killed (SIGKILL) and restarted while reports flow: it
    comes back with its QPNs, rkeys, peer and memory, expecting the PSN it had saved
    (docs/dta.md "Collector restart"); the reports sent while it was down put the translator
    ahead, so the first request the restarted c1 sees is a PSN sequence error. Every WRITE is
    accounted for. (Restarted with nothing sent meanwhile, c1 is simply in sequence: nothing
    was lost, nothing needs a resync.)"""
    state, prefix = testbed_f, testbed_f.prefix
    grace = 200
    control.enable_translator(prefix, "sw2", "c1", grace_reports=grace)
    assert _report(state, 1_000_000, 100) == 100
    _settled(prefix, 100)
    assert _until(lambda: _stored(prefix, 1_000_000, 100) == 100)
    t0, c0, p0 = _dta(prefix)
    # reports across the crash (keys whose slots none of c1's first 100 keys share)
    busy = subprocess.Popen(_report_argv(state, 2_400_000, 1000, rate=500), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert _until(lambda: control.translator_status(prefix)["counters"]["reports"] >= t0["reports"] + 50, 30)
        rc, _out, err = _fault(capsys, "kill", "c1", "--restart", "--down-ms", "200", "--prefix", prefix)
        assert rc == 0, err
        out, err = busy.communicate(timeout=120)
    finally:
        if busy.poll() is None:
            busy.kill()
            busy.wait()
    assert busy.returncode == 0, err
    assert int(json.loads(out.strip().splitlines()[-1])["sent"]) == 1000
    assert _stored(prefix, 1_000_000, 100) == 100  # what c1 held before the crash is still there
    assert _report(state, 2_000_000, 500, rate=500) == 500  # the rest of the grace period, if any
    _until(lambda: control.translator_status(prefix)["counters"]["reports"] >= t0["reports"] + 1500)
    t1, c1, p1 = _dta(prefix)
    r1 = c1["responder"]
    assert t1["resyncs"] > t0["resyncs"] and t1["grace_periods"] > t0["grace_periods"], \
        f"no resync: the restarted collector dropped {r1['unknown_qp']} requests as unknown_qp"
    kw = r1["qps"]["keywrite"]
    assert c1["restart"]["restored"] and r1["unknown_qp"] == 0 and c1["pid"] != c0["pid"]
    assert kw["naks_psn"] >= 1 and t1["naks_rejected_window"] == 0  # a genuine NAK, believed
    grace_dropped = t1["grace_dropped"] - t0["grace_dropped"]
    assert grace_dropped >= grace
    # the accounting: every report became a WRITE or was dropped in a grace period; every WRITE
    # was executed (the region's trailer is in c1's memory: it counts across the restart),
    # refused by the restarted c1, dropped by its kernel or the switch, or sent while no collector
    # listened (the one loss no counter sees: what remains)
    sent = t1["writes"] - t0["writes"]
    assert t1["reports"] - t0["reports"] == sent + grace_dropped
    executed = c1["regions"]["keywrite"]["writes"] - c0["regions"]["keywrite"]["writes"]
    refused = kw["naks_psn"] + kw["out_of_sequence_dropped"] + kw["duplicates"]
    dropped = c1["kernel_drops"] + (p1["queue_drops"] - p0["queue_drops"]) + (p1["send_errors"] - p0["send_errors"])
    unheard = sent - executed - refused - dropped
    assert executed > 0 and unheard > 0, (sent, executed, refused, dropped)
    assert _report(state, 3_000_000, 100, rate=500) == 100
    assert _until(lambda: _stored(prefix, 3_000_000, 100) == 100)


# =========================================================================== 3. link down/up


def _kernel_rx(state, node: str, ifname: str) -> int:
    ns = state.namespaces[node]
    with iproute(ns) as ipr:
        link = ipr.get_links(ipr.link_lookup(ifname=ifname)[0])[0]
    return int(link.get_attr("IFLA_STATS64")["rx_packets"])


def test_a_link_set_down_stops_the_stream_and_it_resumes_once_up(testbed_f, capsys):
    """sw1-sw2 set down (both veth ends) in the middle of a sequenced stream h1 -> h2: both
    switches see the carrier go (``link_down``), what is sent meanwhile is lost (sw1 drops and
    counts it in ``carrier_drops``, sw2 receives nothing); set up again, the stream resumes."""
    state, prefix = testbed_f, testbed_f.prefix
    stream = Stream(state, "h1", "h2", 5013)
    try:
        stream.send(0, 200)
        s1, s2 = _port(prefix, "sw1", "p-sw2"), _port(prefix, "sw2", "p-sw1")
        rc, out, err = _fault(capsys, "link", "sw1-sw2", "down", "--prefix", prefix)
        assert rc == 0, err
        assert "sw1/p-sw2 DOWN" in out and "sw2/p-sw1 DOWN" in out
        assert "sw1/p-sw2 carrier down, link_down 1" in out and "sw2/p-sw1 carrier down, link_down 1" in out
        stream.send(1000, 200)
        d1, d2 = _port(prefix, "sw1", "p-sw2"), _port(prefix, "sw2", "p-sw1")
        rc, out, err = _fault(capsys, "link", "sw1-sw2", "up", "--prefix", prefix)
        assert rc == 0, err
        assert _until(lambda: set(faults.link_state(state, "sw1-sw2").values()) == {"UP"})
        kernel_before = _kernel_rx(state, "sw2", "p-sw1")
        daemon_before = _port(prefix, "sw2", "p-sw1")["rx_frames"]
        stream.send(2000, 200)
        got = set(stream.received())
        kernel = _kernel_rx(state, "sw2", "p-sw1") - kernel_before
        daemon = _port(prefix, "sw2", "p-sw1")["rx_frames"] - daemon_before
    finally:
        stream.close()
    assert all(s in got for s in range(200))  # before
    assert not any(s in got for s in range(1000, 1200))  # the gap: nothing while down ...
    assert d1["carrier"] is False and d2["carrier"] is False
    assert d1["link_down"] - s1["link_down"] == 1 and d2["link_down"] - s2["link_down"] == 1
    assert d1["carrier_drops"] - s1["carrier_drops"] >= 200  # ... sw1 dropped them: no carrier
    assert d1["send_errors"] == s1["send_errors"]  # (dropped in the switch, never sent into ENETDOWN)
    assert d2["rx_frames"] == s2["rx_frames"]  # ... and sw2 received nothing
    resumed = [s for s in range(2000, 2200) if s in got]
    assert len(resumed) == 200, (
        f"after the link came up only {len(resumed)} of 200 datagrams arrived; sw2's kernel received {kernel} "
        f"frames on p-sw1, its switch daemon read {daemon} (docs/faults.md, item 3)")


# =========================================================================== 4. pause storm

STORM_TOPOLOGY = header("faults-storm", prefix="fs", rate="100Mbit", delay="10us", mtu=1500,
                        buffer="200KB") + line(
    # sw1 honours h1's pauses (the edge watchdog stays on: 100 ms)
    edge1='\n[links.features.b]\nswitch = { pfc_from_host = true }\n',
    # sw2's fabric port gets a watchdog; sw1's keeps none
    core='\n[links.features.b]\nswitch = { pfc_watchdog = "50ms" }\n')


def test_a_pause_storm_on_a_default_edge_port_is_refused_and_counted(testbed_f, capsys):
    prefix = testbed_f.prefix
    rc, out, err = _fault(capsys, "pause-storm", "h1-sw1", "--from", "h1", "--seconds", "0.5", "--pps", "200",
                          "--json", "--prefix", prefix)
    assert rc == 0, err
    r = json.loads(out)
    assert r["frames"] == 100 and r["to"] == "sw1/p-h1" and r["honours_pfc"] is False
    assert r["counted"]["edge_drops_pfc"] == r["frames"]
    assert r["counted"]["pauses_rx"] == 0 and r["paused_ms"] == 0 and not r["still_paused"]


@pytest.fixture
def storm_bed(tmp_path_factory):
    path = tmp_path_factory.mktemp("topo") / "storm.toml"
    path.write_text(STORM_TOPOLOGY)
    yield from _bed(load_topology(path), tmp_path_factory)


#: how long the storms last: far longer than the 300 datagrams take (0.15 s) and than the
#: watchdogs (50 and 100 ms), so that "sent while the storm was on" means something
STORM_S = 2.0


def _storm_with_traffic(state, link: str, src: str, stream_src: str, stream_dst: str, watched: tuple[str, str]):
    """A STORM_S pause storm from ``src`` over ``link``; once it is under way (the watchdog fired, or
    the class is paused), 300 datagrams ``stream_src`` -> ``stream_dst`` through the stormed port
    ``watched`` (switch, port). Returns (storm report, how many of them the port sent while the
    storm was still on, the datagrams that arrived in the end)."""
    prefix = state.prefix
    node, port = watched
    result: dict = {}
    started = threading.Event()
    storm = threading.Thread(target=lambda: result.update(faults.pause_storm(
        prefix, link, src, seconds=STORM_S, pps=200, started=started.set)))
    stream = Stream(state, stream_src, stream_dst, 5014, quiet=STORM_S + 1.5)  # outlives the storm
    try:
        stream.send(10_000, 10)  # before the storm: the hosts' ARP entries, so nothing waits on them
        before = _port(prefix, node, port)
        storm.start()
        assert started.wait(10)
        assert _until(lambda: (lambda p: p["pfc_watchdog_events"] > before["pfc_watchdog_events"] or p["paused"][0])(
            _port(prefix, node, port)))
        tx0 = _port(prefix, node, port)["tx_frames_class"][0]
        stream.send(0, 300, rate=2000)

        def sent_or_queued() -> tuple[int, int]:
            p = _port(prefix, node, port)
            return p["tx_frames_class"][0] - tx0, p["queue_frames"][0]

        _until(lambda: sum(sent_or_queued()) >= 300)  # the switch has all 300: sent, or waiting
        during = sent_or_queued()[0]
        assert storm.is_alive(), "the storm ended before the stream was through: the check would mean nothing"
        storm.join(30)
        got = [s for s in stream.received() if s < 10_000]
    finally:
        storm.join(30)
        stream.close()
    return result, during, got


def test_a_pause_storm_from_a_host_is_ended_by_the_edge_watchdog(storm_bed):
    """h1 floods sw1's edge port (which takes a host's pauses here) with pauses: the watchdog
    (on by default on edge ports) releases the class and ignores the storm's pauses, so h2 -> h1
    traffic through that port flows while the storm goes on."""
    r, during, got = _storm_with_traffic(storm_bed, "h1-sw1", "h1", "h2", "h1", ("sw1", "p-h1"))
    c = r["counted"]
    assert r["watchdog_ms"] == 100 and r["honours_pfc"]
    assert c["pfc_watchdog_events"] >= 1
    assert c["pfc_rx"] == r["frames"] == c["pauses_rx"] + c["pfc_watchdog_ignored"]  # each one honoured or ignored
    assert c["pfc_watchdog_ignored"] > c["pauses_rx"]
    assert not r["still_paused"]
    assert during >= 300  # sent on while the storm was still on
    assert sorted(set(got)) == list(range(300))


def test_a_pause_storm_on_a_fabric_port_is_ended_by_a_configured_watchdog(storm_bed):
    """sw1 floods sw2's fabric port, whose watchdog the topology turned on (pfc_watchdog =
    "50ms"): released and counted; h2 -> h1 traffic through sw2's p-sw1 flows during the storm."""
    r, during, got = _storm_with_traffic(storm_bed, "sw1-sw2", "sw1", "h2", "h1", ("sw2", "p-sw1"))
    c = r["counted"]
    assert r["watchdog_ms"] == 50 and r["role"] == "fabric"
    assert c["pfc_watchdog_events"] >= 1 and c["pfc_rx"] == r["frames"] == c["pauses_rx"] + c["pfc_watchdog_ignored"]
    assert not r["still_paused"]
    assert during >= 300
    assert sorted(set(got)) == list(range(300))


def test_without_a_watchdog_a_pause_storm_holds_the_fabric_port(storm_bed):
    """The contrast: sw1's fabric port toward sw2 has no watchdog (the default): the storm keeps
    class 0 paused throughout, h1 -> h2 traffic waits in sw1's queue, and leaves once it ends."""
    r, during, got = _storm_with_traffic(storm_bed, "sw1-sw2", "sw2", "h1", "h2", ("sw1", "p-sw2"))
    c = r["counted"]
    assert r["watchdog_ms"] is None
    assert c["pfc_watchdog_events"] == 0 and c["pauses_rx"] == c["pfc_rx"] == r["frames"]
    assert during == 0  # held while the storm lasted
    assert sorted(set(got)) == list(range(300))  # and delivered after it


# =========================================================================== 5. clock jump (1Pipe)


@pytest.fixture
def onepipe_bed(tmp_path_factory):
    yield from _bed(load_topology_spec("onepipe"), tmp_path_factory)


def test_pauses_forged_on_the_onepipe_fabric_are_refused(onepipe_bed, capsys):
    """Finding 5: the onepipe topology enables PFC on no class of its fabric ports (802.1Qbb
    per-priority enable), so pause frames sent at tor1 over its uplink pause nothing; each is
    counted in ``pauses_refused``."""
    prefix = onepipe_bed.prefix
    rc, out, err = _fault(capsys, "pause-storm", "tor1-spine1", "--from", "spine1", "--seconds", "0.5", "--pps",
                          "200", "--json", "--prefix", prefix)
    assert rc == 0, err
    r = json.loads(out)
    assert r["to"] == "tor1/p-spine1" and r["role"] == "fabric" and r["honours_pfc"] is False
    assert r["counted"]["pfc_rx"] == r["frames"] == r["counted"]["pauses_refused"] == 100
    assert r["counted"]["pauses_rx"] == 0 and r["paused_ms"] == 0 and not r["still_paused"]


def _clock_shift_ms(sent_log: Path, rate: float) -> float:
    """How far a process's clock moved against the true time over its run: each scattering is
    due at start + n/rate (true time) and logged with the host time it left at (``at``)."""
    rows = [json.loads(line) for line in sent_log.read_text().splitlines()]
    resid = [r["at"] - r["seq"] * 1e9 / rate for r in rows]
    k = max(5, len(resid) // 10)
    return (statistics.median(resid[-k:]) - statistics.median(resid[:k])) / 1e6


def test_a_clock_jump_reaches_the_1pipe_processes_of_that_host(onepipe_bed, tmp_path, capsys):
    """``netstack fault clock-jump h2 --ms 200`` in the middle of a 1Pipe run: the processes on
    h2 log their scatterings 200 ms later than their schedule from then on, the others do not.
    (What 1Pipe does about it is 1Pipe's: docs/onepipe.md.)"""
    from netstack.onepipe.runner import run

    prefix = onepipe_bed.prefix
    out, rate, summary = tmp_path / "run", 50.0, {}
    runner = threading.Thread(target=lambda: summary.update(run(prefix, procs=4, seconds=4.0, out=out, rate=rate,
                                                                fanout=2)))
    runner.start()
    try:
        assert _until(lambda: faults.onepipe_processes(prefix, "h2"), timeout=20)
        assert _until(lambda: any((out / "sent").glob("*.jsonl"))
                      and sum(len(p.read_text().splitlines()) for p in (out / "sent").glob("*.jsonl")) >= 4 * 50)
        rc, said, err = _fault(capsys, "clock-jump", "h2", "--ms", "200", "--prefix", prefix)
    finally:
        runner.join(120)
    assert rc == 0, err
    assert "clock of h2 jumped +200 ms" in said
    data = json.loads(faults.clock_file(prefix, "h2").read_text())
    assert data["offset_ns"] == 200_000_000
    placement = summary["placement"]
    shifts = {p: _clock_shift_ms(out / "sent" / f"{p}.jsonl", rate) for ps in placement.values() for p in ps}
    on_h2 = placement["h2"]
    for p, shift in shifts.items():
        if p in on_h2:
            assert 100 <= shift <= 300, f"{p} on h2 did not see the jump (its clock moved {shift:.1f} ms): {shifts}"
        else:
            assert abs(shift) < 50, f"{p} is not on h2 but its clock moved {shift:.1f} ms: {shifts}"
