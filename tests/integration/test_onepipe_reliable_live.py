"""Reliable 1Pipe on the shipped ``onepipe`` topology (two ToRs under a spine, four hosts, the
controller ``ctl`` on the spine): real processes (one OS process each) on real sockets, the
switch daemons' commit aggregation, the controller daemon and its store; failures made with
``kill -9``, a host cut off, and the controller leader killed (docs/onepipe-reliable.md).

Each test brings its own testbed up (a fresh controller store), and judges the run's logs with
``netstack onepipe check`` (order and atomicity, design topic §12 items 2 and 8)."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from headers.onepipe import ts_from_ns, ts_le
from netstack import runtime
from netstack.io.control import request
from netstack.onepipe.check import check_logs
from netstack.onepipe.etcd import etcd_available
from netstack.onepipe.runner import kill, read_procs_file, run, running_since
from netstack.topo.model import load_topology_spec

from .conftest import running, sh

pytestmark = pytest.mark.netns


@pytest.fixture
def fabric(tmp_path_factory):
    yield from running(load_topology_spec("onepipe"), tmp_path_factory, "r")


@pytest.fixture
def etcd_fabric(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    if not etcd_available():
        pytest.fail("etcd-server is not installed: scripts/install.sh installs it")
    prefix = "re" + uuid.uuid4().hex[:6]
    os.environ.setdefault("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("run")))
    state = runtime.up(load_topology_spec("onepipe"), prefix, apply_impairments=False, options={"store": "etcd"})
    try:
        yield state
    finally:
        runtime.down(prefix)


def _start(prefix: str, out: Path, **kw: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """``netstack onepipe run --reliable`` in a thread; its summary (or error) in the dict."""
    got: dict[str, Any] = {}

    def go() -> None:
        try:
            got["summary"] = run(prefix, out=out, reliable=True, **kw)
        except Exception as exc:
            got["error"] = exc

    t = threading.Thread(target=go, daemon=True)
    t.start()
    return t, got


def _wait_scattering(prefix: str, t: threading.Thread, after_s: float) -> None:
    """Until the run's processes are up (its pid file says ``running``: the file stays after a
    run, ``finished``, and says ``starting`` before every process is spawned), then ``after_s``
    more."""
    deadline = time.monotonic() + 60
    since = time.time() - 1.0
    while running_since(prefix, since) is None:
        assert t.is_alive() and time.monotonic() < deadline, "the run never started its processes"
        time.sleep(0.1)
    time.sleep(after_s)


def _finish(t: threading.Thread, got: dict[str, Any]) -> dict[str, Any]:
    t.join(timeout=120)
    assert not t.is_alive(), "the run did not finish"
    if "error" in got:
        raise got["error"]
    return got["summary"]


def _deliveries(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for p in sorted(out.glob("*.jsonl")) for line in p.read_text().splitlines()]


def _controller(prefix: str, timeout: float = 15.0) -> dict[str, Any]:
    """The leader controller's status, once one leads (an election takes a lease's time)."""
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
                    return {**st, "daemon": d}
        if time.monotonic() > deadline:
            raise AssertionError("no controller leads")
        time.sleep(0.2)


def _failure(prefix: str, addr: str, timeout: float = 20.0) -> dict[str, Any]:
    """The controller's failure record of ``addr`` once released (every callback in)."""
    deadline = time.monotonic() + timeout
    while True:
        view = _controller(prefix, timeout)["view"]
        done = [f for f in view["failures"] if f["proc"] == addr and f["released"]]
        if done:
            return done[-1]
        assert time.monotonic() < deadline, f"no released failure of {addr}"
        time.sleep(0.2)


def _assert_check(out: Path) -> None:
    verdict = check_logs([out])
    assert verdict.ok, verdict.summary()


def test_kill_9_of_a_sender_mid_stream_delivers_up_to_t_f_everywhere_and_nothing_after(fabric, tmp_path):
    """Design topic §12 item 7, "sender fails", live: ``netstack onepipe kill`` (SIGKILL) of p1
    while it scatters; every message of p1 at or below its T_f is delivered at all its receivers
    (atomicity, checked on the logs), none above T_f anywhere, and the others go on."""
    prefix = fabric.prefix
    out = tmp_path / "run"
    t, got = _start(prefix, out, procs=4, seconds=4.0, rate=40, fanout=2, drain=3.0)
    _wait_scattering(prefix, t, 2.5)
    killed = kill(prefix, "p1")
    summary = _finish(t, got)
    assert summary["killed"] == ["p1"] and killed["name"] == "p1"
    # validity: the kill is the run's own fault: its failure is no sign of a fooled detector
    assert "process failures" not in [c["name"] for c in summary["checks"]]
    assert summary["checks"][0]["measured"]["killed"] == ["p1"]
    _assert_check(out)
    f = _failure(prefix, summary["addresses"]["p1"])
    assert f["t_f"] > 0
    from_p1 = [d for d in _deliveries(out) if d["src"] == "p1"]
    assert from_p1, "p1 had messages committed before it died"
    assert all(ts_le(ts_from_ns(d["ts"]), f["t_f"]) for d in from_p1), "a message above T_f was delivered"
    others = [d for d in _deliveries(out) if d["src"] != "p1"]
    assert max(d["at"] for d in others) > max(d["at"] for d in from_p1), "delivery went on after the failure"


def test_a_receiver_host_cut_off_before_its_acks_is_recalled_from_the_others(fabric, tmp_path):
    """Design topic §12 item 7, "receiver fails before ACK": h4 loses its link while the others
    scatter to its process; the controller declares it failed, the senders recall what it never
    ACKed from its co-receivers, and every scattering reaches all its correct receivers or none."""
    prefix = fabric.prefix
    out = tmp_path / "run"
    t, got = _start(prefix, out, procs=4, seconds=4.0, rate=40, fanout=3, drain=3.0)
    _wait_scattering(prefix, t, 2.0)
    sh(fabric, "h4", "ip", "link", "set", "eth0", "down")
    summary = _finish(t, got)
    _failure(prefix, summary["addresses"]["p4"])
    recalls = sum(p["counters"].get("recalls_sent", 0) for n, p in summary["processes"].items() if n != "p4")
    assert recalls > 0, "nothing was recalled"
    _assert_check(out)  # p4 is failed: atomicity is judged among p1-p3


def test_a_process_stopped_past_the_failure_timeout_is_fenced_then_recovers(fabric, tmp_path):
    """A live process stalls longer than the detection bound (SIGSTOP for 2.3 s: the 300 ms failure
    timeout, then the controller's probe unanswered for its 1.5 s probe timeout, issue 31; a
    stopped process's socket stays open, so no ICMP tells it from a slow one): it is declared
    failed while alive. What its senders recalled meanwhile waits in its socket, and it must not
    deliver it (the paper's §5, restricted failure atomicity; its ToR holds the commit barrier it
    gives it); once it learns it failed it recovers as a new incarnation, and every scattering
    reaches all its correct and recovered receivers or none."""
    prefix = fabric.prefix
    out = tmp_path / "run"
    t, got = _start(prefix, out, procs=4, seconds=3.0, rate=40, fanout=3, drain=3.5)
    _wait_scattering(prefix, t, 2.3)  # (they scatter from about 1.7 s after the pid file)
    pid = read_procs_file(prefix)["processes"]["p3"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(2.3)
    finally:
        os.kill(pid, signal.SIGCONT)
    summary = _finish(t, got)
    _failure(prefix, summary["addresses"]["p3"])
    p3 = summary["processes"]["p3"]
    assert p3["counters"]["recoveries"] >= 1 and p3["incarnations"][-1] > 1, "p3 recovered"
    # validity: to the run, a stopped process is a starved one: it measured its own 1.2 s stall,
    # and its failure is named (nothing was killed, no fault the runner injected)
    bad = {c["name"]: c["measured"] for c in summary["checks"] if not c["ok"]}
    assert summary["valid"] is False and bad["scheduling delay"]["worst_max_at"] == "p3"
    assert any(f.startswith("p3: ") for f in bad["process failures"])
    recalls = sum(p["counters"].get("recalls_sent", 0) for n, p in summary["processes"].items() if n != "p3")
    assert recalls > 0, "nothing was recalled"
    _assert_check(out)  # p3 recovered: judged with the others


def test_the_leader_controller_killed_during_a_recovery_hands_over_and_the_recovery_completes(etcd_fabric,
                                                                                           tmp_path):
    """The etcd store with two controller replicas: p1 is killed, and while its failure is being
    handled the leader controller is SIGKILLed too; the other replica takes the lead (etcd lease),
    restores the failure records from etcd and completes the recovery."""
    prefix = etcd_fabric.prefix
    out = tmp_path / "run"
    leader = _controller(prefix)["daemon"]
    t, got = _start(prefix, out, procs=4, seconds=5.0, rate=30, fanout=2, drain=6.0)
    _wait_scattering(prefix, t, 2.0)
    kill(prefix, "p1")
    time.sleep(0.4)  # the switches report p1 after 300 ms of silence: its failure is under way
    os.killpg(leader.pid, signal.SIGKILL)
    summary = _finish(t, got)
    now = _controller(prefix)
    assert now["daemon"].name != leader.name, "the other replica leads"
    f = _failure(prefix, summary["addresses"]["p1"])
    assert f["t_f"] > 0
    _assert_check(out)


def test_the_controller_follows_the_switches_t_beacon(fabric):
    """``netstack onepipe enable --t-beacon-ms 6``: the controller polls and times at the switches'
    T_beacon (every replica is told), not at the default its config was written with."""
    from netstack.onepipe.control import enable_all
    from netstack.onepipe.ctlnode import live_timers
    from netstack.onepipe.params import OnePipeParams

    prefix = fabric.prefix
    before = _controller(prefix)
    assert before["t_beacon_ns"] == OnePipeParams().t_beacon_ns
    params = OnePipeParams(t_beacon_ns=6_000_000, ack_timeout_ns=6_000_000 * 20)
    enable_all(prefix, params)
    st = _controller(prefix)
    assert st["t_beacon_ns"] == 6_000_000
    assert st["timers"] == dataclasses.asdict(live_timers(params))
    assert st["timers"]["retry_ns"] == 4 * 6_000_000
