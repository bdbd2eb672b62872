"""1Pipe on the shipped ``onepipe`` topology (two ToRs under a spine, four hosts with skewed
clocks): real processes on real sockets scatter through the switch daemons' barrier feature, and
``netstack onepipe check`` judges their logs."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from netstack import runtime
from netstack.cli import main
from netstack.onepipe.control import enable_all
from netstack.onepipe.live import message_id
from netstack.onepipe.runner import run
from netstack.topo.model import load_topology_spec

from .conftest import running, valid_run

pytestmark = pytest.mark.netns
EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "onepipe_hello.py"


@pytest.fixture(scope="module")
def fabric(tmp_path_factory):
    yield from running(load_topology_spec("onepipe"), tmp_path_factory, "o")


def _ids(paths) -> set[str]:
    return {json.loads(line)["id"] for p in paths for line in Path(p).read_text().splitlines()}


def _check(out: Path, capsys) -> str:
    logs = sorted(str(p) for p in out.glob("*.jsonl"))
    capsys.readouterr()
    rc = main(["onepipe", "check", *logs])
    said = capsys.readouterr().out
    assert rc == 0, said
    return said


def _accounted(out: Path, summary: dict) -> tuple[set[str], set[str]]:
    """Best effort's accounting (1Pipe §3; issue 31): every message sent was delivered, reported
    by its sender (send-fail: known not delivered, a NAK; send-unknown: its ACK timeout fired) or
    is listed in flight at its sender's end. A message reported failed is never delivered; a
    delivered one is reported only as unknown (its delivery, or every ACK of it, took longer than
    the ACK timeout). The summary's counts are exactly these sets', and the identity holds."""
    delivered = _ids(out.glob("*.jsonl"))
    failed = _ids((out / "send-fail").glob("*.jsonl"))
    unknown = _ids((out / "send-unknown").glob("*.jsonl"))
    flight = _ids((out / "in-flight").glob("*.jsonl"))
    scatterings = [(p.stem, json.loads(line)) for p in (out / "sent").glob("*.jsonl")
                   for line in p.read_text().splitlines()]
    sent = {message_id(src, sc["seq"], dst) for src, sc in scatterings for dst in sc["dsts"]}
    assert len(sent) == summary["messages_sent"]
    assert delivered | failed | unknown | flight == sent, sorted(sent - delivered - failed - unknown - flight)[:10]
    assert not failed & delivered, sorted(failed & delivered)[:10]
    assert summary["delivered"] == len(delivered) and summary["send_failed"] == len(failed)
    assert summary["send_unknown"] == len(unknown - delivered) and summary["unaccounted"] == 0
    assert summary["messages_sent"] == (summary["delivered"] + summary["send_failed"] + summary["send_unknown"]
                                        + summary["in_flight_at_end"])
    return delivered, failed | unknown


def test_processes_under_two_tors_deliver_one_total_order(fabric, tmp_path, capsys):
    out = tmp_path / "run"
    summary = run(fabric.prefix, procs=8, seconds=2.0, out=out, rate=80, fanout=3)
    assert summary["placement"] == {"h1": ["p1", "p5"], "h2": ["p2", "p6"], "h3": ["p3", "p7"], "h4": ["p4", "p8"]}
    assert summary["messages_sent"] == 8 * 160 * 3
    delivered, _failed = _accounted(out, summary)
    assert len(delivered) == summary["delivered"] > 0.95 * summary["messages_sent"]
    said = _check(out, capsys)
    assert f"ok: {summary['delivered']} messages from 8 senders at 8 receivers" in said
    st = runtime.status(fabric.prefix)
    spine = st["daemons"]["spine1"]["protocols"]["onepipe"]["ports"]
    # across the spine, both ways (nothing 1Pipe goes to the controller's port)
    assert all(p["counters"]["stamped"] > 0 for name, p in spine.items() if name != "p-ctl")


def test_loss_on_a_tor_spine_link_is_reported_and_the_order_holds(fabric, tmp_path, capsys):
    """1 % of the frames on tor1-spine1 dropped both ways: the check still passes, and every
    message that never arrived was reported by its sender (send-fail or send-unknown)."""
    out = tmp_path / "lossy"
    summary = run(fabric.prefix, procs=8, seconds=2.0, out=out, rate=80, fanout=3, loss=["tor1-spine1:0.01"])
    _check(out, capsys)
    delivered, failed = _accounted(out, summary)
    assert failed - delivered  # the loss cost messages, and their senders heard of it


def test_a_silent_sender_host_stalls_delivery_only_until_its_input_times_out(fabric, tmp_path, capsys):
    """h1's link goes down a second into the run: its processes stop sending barriers, and every
    other receiver stalls only until the ToR times their inputs out (10 beacon intervals, 30 ms
    at the testbed's scale, design topic §6); deliveries then go on to the end of the run."""
    ns = fabric.namespaces["h1"]

    def cut() -> None:
        time.sleep(2.5)  # ~1 s after the processes start (they start 1.5 s after the run)
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "down"], check=True)

    def once() -> dict:
        out = tmp_path / f"silent{len(list(tmp_path.iterdir()))}"
        t = threading.Thread(target=cut)
        t.start()
        try:
            summary = run(fabric.prefix, procs=8, seconds=3.0, out=out, rate=100, fanout=3)
        finally:
            t.join()
            subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
        # judged by its scheduling delay alone: the cut times h1's inputs out on purpose, and a
        # machine that held a process or daemon up longer than the input timeout stretches the
        # gaps below by that much (160 ms once on CI, the unit tests beside), which is no stall
        sched = [c for c in summary["checks"] if c["name"] == "scheduling delay"]
        return {"valid": all(c["ok"] for c in sched), "checks": sched, "out": out}

    result = valid_run(once, machine=("scheduling delay",))
    out = result["out"]
    _check(out, capsys)
    # deliveries arrive every few ms. The barrier stalls for the input timeout (30 ms at the
    # testbed's scale) plus a beacon interval (3 ms; the stall measured ~40 ms); scatterings that include one of
    # h1's dead processes then wait for the ACK timeout (60 ms) to free its window (per-sender
    # FIFO): 93 ms by the timers. A delivery also waits for its sender, the two ToRs' daemons and
    # its receiver, each of which this valid run may have held up by up to its largest measured
    # scheduling delay (the run's validity allows 30 ms; a fixed 150 ms bound failed CI twice, at
    # 160 and 171 ms, with the unit tests beside), plus a 20 ms margin for what the 5 ms sampler
    # does not see. Even at its largest that is far below the two seconds left after the cut.
    held_ms = max((c["measured"]["worst_max_ms"] for c in result["checks"]), default=0.0)
    bound_ns = int((30 + 3 + 60 + 4 * held_ms + 20) * 1e6)
    for p in ("p2", "p3", "p4", "p6", "p7", "p8"):  # not on h1
        at = [json.loads(line)["at"] for line in (out / f"{p}.jsonl").read_text().splitlines()]
        gaps = sorted(b - a for a, b in itertools.pairwise(at))
        assert gaps[-1] < bound_ns, (p, gaps[-5:], f"bound {bound_ns} ns: scheduling delay up to {held_ms} ms")
        assert at[-1] - at[0] > 2.5e9, p  # delivering until the end, not stalled since the cut


def test_the_asyncio_api_example_runs_and_both_processes_see_one_order(fabric):
    """docs/examples/onepipe_hello.py (the API's documented example) in h1 and h3, each
    scattering to both: each delivers every message, in the same order."""
    enable_all(fabric.prefix)
    everyone = ["10.0.0.1:40101", "10.0.0.3:40101"]
    procs = [subprocess.Popen(["ip", "netns", "exec", fabric.namespaces[h], sys.executable, str(EXAMPLE), me,
                               *everyone, "--count", "6"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for h, me in (("h1", everyone[0]), ("h3", everyone[1]))]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        outs.append([json.loads(line) for line in out.splitlines()])
    # every message delivered or reported lost (best effort: one sent before its peer had bound
    # its socket is lost)
    totals = [lines[-1] for lines in outs]
    # (an unknown may have been delivered as well: at least every message has a fate)
    assert sum(t["delivered"] + t["send_failed"] + t["send_unknown"] for t in totals) >= 24, totals
    assert sum(t["delivered"] + t["send_failed"] for t in totals) <= 24, totals
    assert all(t["delivered"] >= 10 for t in totals), totals
    orders = [[(d["ts"], d["src"], d["msg"]) for d in lines[:-1]] for lines in outs]
    common = set(orders[0]) & set(orders[1])
    assert len(common) >= 8
    assert [m for m in orders[0] if m in common] == [m for m in orders[1] if m in common]
    assert all(o == sorted(o) for o in orders)
