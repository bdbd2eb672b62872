"""DTA on the live testbed (issue #6): reporters in h1 and h2 send real UDP reports, sw2's
translator turns them into RoCEv2 operations, c1's collector daemon executes them on its
shared-memory regions, and the queries read the result back.

h1's reports cross sw1 and enter sw2 on p-sw1; h2's enter sw2 on p-h2; c1 hangs off p-c1.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from headers.roce import check_icrc
from netstack.dta import CollectorQuery, CountMinSketch, control, live
from netstack.dta.collector import is_roce_frame
from netstack.dta.keywrite import KeyWriteLayout
from netstack.topo.netns import in_netns

from .conftest import in_node, valid_run

pytestmark = pytest.mark.netns


def _collector_ip(state) -> str:
    return state.host_ip("c1")


def _report(state, node, kind, *args, background=False):
    argv = ["ip", "netns", "exec", state.namespaces[node], sys.executable, "-m", "netstack.dta.live", "report",
            kind, "--dst", _collector_ip(state), "--quiet", *map(str, args)]
    if background:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _finish(proc) -> dict:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _until(cond, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.02)


def _qps(prefix):
    return control.collector_status(prefix)["responder"]["qps"]


@pytest.fixture(scope="module")
def dta(testbed):
    prefix = testbed.prefix
    info = control.enable_translator(prefix, "sw2", "c1")
    q = CollectorQuery.open(info["memory_dir"])
    try:
        yield {"state": testbed, "prefix": prefix, "info": info, "q": q}
    finally:
        q.close()
        control.disable_translator(prefix, "sw2")


def test_enable_finds_the_collector_port_and_regions(dta):
    info = dta["info"]
    assert info["port"] == "p-c1" and info["collector_ip"] == _collector_ip(dta["state"])
    assert {"keywrite", "keyincrement", "append-4", "sketch-1"} <= set(info["regions"])
    # the collector's QPs are bound to the translator (its IP, the port's MAC, its QPNs) before dta_enable
    assert sorted(info["bound"]) == sorted(info["regions"])
    port_mac = next(p.mac for p in dta["state"].ports if p.node == "sw2" and p.ifname == "p-c1")
    assert info["translator_mac"] == port_mac
    st = control.collector_status(dta["prefix"])
    ci = control.connect_info(dta["prefix"])
    peer_qpn = {r["name"]: r["peer_qpn"] for r in ci["regions"]}
    for name, qp in st["responder"]["qps"].items():
        assert qp["peer"] == {"ip": info["translator_ip"], "mac": port_mac, "qpn": peer_qpn[name]}, name
    assert st["udp4791_guard"] in ("nft", "socket")
    assert Path(st["memory_dir"], "manifest.json").exists()


def test_keywrite_from_two_hosts_with_valid_icrc_on_the_wire(dta):
    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    # watch c1's wire: every RoCEv2 frame the translator sends must carry a correct ICRC
    with in_netns(state.namespaces["c1"]):
        tap = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    tap.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    tap.bind(("eth0", 0))
    tap.setblocking(False)
    try:
        before = _qps(prefix)["keywrite"]["writes"]
        # one after the other, so that the order of the WRITEs (and so which key wins a slot two
        # keys share) is known: the result is compared with a replay on the same layout
        assert _report(state, "h1", "keywrite", "--key", 1000, "--value", 5000, "--count", 300,
                       "--redundancy", 2)["sent"] == 300
        assert _report(state, "h2", "keywrite", "--key", 2000, "--value", 9000, "--count", 300,
                       "--redundancy", 3)["sent"] == 300
        want = before + 300 * 2 + 300 * 3
        assert _until(lambda: _qps(prefix)["keywrite"]["writes"] >= want), _qps(prefix)["keywrite"]
        frames = []
        while True:
            try:
                frames.append(tap.recv(9216))
            except BlockingIOError:
                break
    finally:
        tap.close()
    roce = [f for f in frames if is_roce_frame(f) and f[30:34] == socket.inet_aton(_collector_ip(state))]
    assert len(roce) == 300 * 2 + 300 * 3
    assert all(check_icrc(f) for f in roce)
    layout = KeyWriteLayout.from_dict(q.memory.find("keywrite").layout)
    owner: dict[int, tuple[int, int]] = {}
    for first, value, n in ((1000, 5000, 2), (2000, 9000, 3)):
        for i in range(300):
            for copy in range(n):
                owner[layout.slot_offset(first + i, copy)] = (first + i, value + i)
    found = 0
    for first, value in ((1000, 5000), (2000, 9000)):
        for i in range(300):
            key = first + i
            votes = [owner.get(layout.slot_offset(key, n)) for n in range(layout.max_redundancy)]
            copies = sum(v is not None and v[0] == key for v in votes)
            assert q.keywrite_get(key) == ((value + i,) if copies else None), key
            assert q.keywrite_get(key, consensus=2) == ((value + i,) if copies >= 2 else None), key
            found += copies > 0
    assert found >= 590  # a few keys may lose every copy to later keys: the structure's nature (Fig. 7)
    assert q.keywrite_get(999) is None and q.keywrite_get(3000) is None


def test_append_full_and_partial_batches_from_two_hosts(dta):
    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    _report(state, "h1", "append", "--list", 4, "--value", 100, "--count", 10)  # 2 batches + 2 buffered
    # the idle flush (1 ms) writes the 2 buffered entries in place, without moving the head
    assert _until(lambda: q.append_read(4) == list(range(100, 110))), q.append_read(4)
    _report(state, "h2", "append", "--list", 4, "--value", 200, "--count", 3)  # completes the batch, 1 more
    want = [*range(100, 110), 200, 201, 202]
    assert _until(lambda: q.append_read(4) == want), q.append_read(4)
    assert q.append_read(4, last=2) == [201, 202]
    c = control.translator_status(prefix, "sw2")["counters"]
    assert c["append_flushes"] >= 2 and c["lists"]["4"]["head"] == 12


def test_postcards_of_a_flow_from_both_hops_of_the_path_land_in_one_slot(dta, capsys):
    """Postcarding (issue 33): h1 -> sw1 -> sw2 -> c1 is a 2-switch path; a postcard for each hop of
    flow 0x5EED (h1's for hop 1, reaching sw2 through sw1; h2's for hop 2, straight into sw2) is
    gathered by the translator into one slot, and `netstack dta query postcard` reads both hops."""
    from netstack import cli

    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    writes = q.memory.find("postcard").trailer()["writes"]
    a = _report(state, "h1", "postcard", "--key", 0x5EED, "--hop", 1, "--value", 0x5701, "--count", 3, background=True)
    b = _report(state, "h2", "postcard", "--key", 0x5EED, "--hop", 2, "--value", 0x5702, "--count", 3, background=True)
    assert _finish(a)["sent"] == _finish(b)["sent"] == 3
    want = {0x5EED: {1: 0x5701, 2: 0x5702}, 0x5EEE: {1: 0x5702, 2: 0x5703}, 0x5EEF: {1: 0x5703, 2: 0x5704}}
    assert _until(lambda: all(q.postcard_get(f) == h for f, h in want.items())), [q.postcard_get(f) for f in want]
    c = control.translator_status(prefix, "sw2")["counters"]
    assert c["postcards"] == 6 and c["postcard_bad_hop"] == 0 and c["postcard"]["pending"] == 0
    # one WRITE per flow and flush: both hops at once, or one's then the other's rewriting the whole slot
    assert q.memory.find("postcard").trailer()["writes"] - writes == c["postcard_writes"] in range(3, 7)
    capsys.readouterr()
    assert cli.main(["dta", "query", "postcard", str(0x5EED), "--json", "--prefix", prefix]) == 0
    assert json.loads(capsys.readouterr().out) == {"flow": 0x5EED, "hops": {"1": 0x5701, "2": 0x5702}}
    assert cli.main(["dta", "query", "postcard", "12345", "--prefix", prefix]) == 1
    assert "not found" in capsys.readouterr().out


def test_sw1_and_sw2_postcard_a_flow_crossing_them_into_one_slot(dta, capsys):
    """Postcarding by the switches themselves (issue 33): sw1 and sw2 each send a postcard (its hop
    number, its switch id) for a UDP flow h1 -> h2 that crosses both, and for one h2 -> h1 (sw1's
    postcard then leaves by the port the flow came in on); the translator on sw2 gathers them; the
    query, by 5-tuple, returns both hops."""
    from netstack import cli
    from netstack.dta.hopreport import flow_key_of, switch_id

    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    h1, h2 = (state.host_ip(h) for h in ("h1", "h2"))
    started = control.enable_postcards(prefix, ["sw1", "sw2"], interval_ms=50)
    try:
        assert {sw: st["counters"]["hop"] for sw, st in started.items()} == {"sw1": 1, "sw2": 2}
        code = ("import socket, sys, time\n"
                "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('', 6666))\n"
                "for _ in range(3):\n    s.sendto(b'x' * 64, (sys.argv[1], 7777)); time.sleep(0.01)\n")
        for src, dst in (("h1", h2), ("h2", h1)):
            r = in_node(state, src, code, dst)
            assert r.returncode == 0, r.stderr
        key = flow_key_of(socket.inet_aton(h1), socket.inet_aton(h2), 17, 6666, 7777)
        back = flow_key_of(socket.inet_aton(h2), socket.inet_aton(h1), 17, 6666, 7777)
        want = {1: switch_id("sw1"), 2: switch_id("sw2")}
        assert _until(lambda: q.postcard_get(key) == want == q.postcard_get(back)), (
            q.postcard_get(key), q.postcard_get(back))
        capsys.readouterr()
        assert cli.main(["dta", "query", "postcard", f"{h1}:6666>{h2}:7777/udp", "--json", "--prefix", prefix]) == 0
        assert json.loads(capsys.readouterr().out) == {"flow": key, "hops": {str(h): v for h, v in want.items()}}
    finally:
        stopped = control.disable_postcards(prefix)
    sw1, sw2 = stopped["sw1"]["final"], stopped["sw2"]["final"]
    assert sw1["postcards"] >= 2 and sw2["postcards"] >= 2 and sw1["hop"] == 1 and sw2["hop"] == 2
    assert stopped["sw2"]["counters"] is None  # stopped


def test_the_append_query_after_a_re_enable_shows_the_newest_entries(dta):
    """Issue 33: `dta enable` restarts the heads at 0; the entries written since must be the newest read."""
    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    _report(state, "h1", "append", "--list", 1, "--value", 700, "--count", 100)
    assert _until(lambda: q.append_read(1, last=1) == [799])
    control.enable_translator(prefix, "sw2", "c1")
    _report(state, "h1", "append", "--list", 1, "--value", 9000, "--count", 5)
    assert _until(lambda: q.append_read(1, last=5) == [9000, 9001, 9002, 9003, 9004]), q.append_read(1, last=8)


def test_keyincrement_counts_are_exact(dta):
    state, q = dta["state"], dta["q"]
    n = q.memory.find("keyincrement").layout["max_redundancy"]
    # paced: a flat-out burst of N=4 Fetch&Adds from both reporters can outrun the collector's ATOMIC
    # ACKs by more than the translator's output window, which then sheds reports (window_dropped,
    # docs/dta.md "Output window"): exactness is this test's business, overload the flood test's
    # (2,500/s each: with two reporters active the translator guarantees each a part of the window
    # and the rest is first come, first served; netstack/dta/fairshare.py)
    a = _report(state, "h1", "increment", "--key", 77, "--by", 1, "--count", 400, "--redundancy", n, "--rate", 2500,
                background=True)
    b = _report(state, "h2", "increment", "--key", 77, "--by", 3, "--count", 250, "--redundancy", n, "--rate", 2500,
                background=True)
    _finish(a), _finish(b)
    tc = lambda: control.translator_status(dta["prefix"], "sw2")["counters"]  # noqa: E731
    assert _until(lambda: q.counter_get(77) == 400 + 750), (q.counters_of(77), {
        k: v for k, v in tc().items() if k in ("window_dropped", "share_dropped", "grace_dropped", "resyncs",
                                                "window_timeouts", "keyincrement", "reports", "fair_share")})
    assert q.counters_of(77) == [1150] * n  # every one of the N counters saw every Fetch&Add
    assert q.counter_get(78) == 0


def test_sketch_merge_from_two_reporters_is_the_elementwise_sum(dta):
    state, q = dta["state"], dta["q"]
    lay = q.memory.find("sketch", sketch_id=1).layout
    rows, cols = lay["rows"], lay["columns"]
    common = ["--sketch-id", 1, "--rows", rows, "--columns", cols, "--keys", 500]
    a = _report(state, "h1", "sketch", "--reporter-id", 1, "--random", 3000, "--seed", 11, *common, background=True)
    b = _report(state, "h2", "sketch", "--reporter-id", 2, "--random", 2000, "--seed", 12, *common, background=True)
    ra, rb = _finish(a), _finish(b)
    expected = CountMinSketch(rows, cols)
    for key in live.sketch_items(11, 3000, 500) + live.sketch_items(12, 2000, 500):
        expected.add(key)
    assert [[x + y for x, y in zip(r1, r2, strict=True)] for r1, r2 in zip(ra["matrix"], rb["matrix"], strict=True)] \
        == expected.matrix
    assert _until(lambda: q.sketch_matrix(1, 0) == expected.matrix)
    key = live.sketch_items(11, 1, 500)[0]
    assert q.sketch_point(1, key) >= 1


def test_reenabling_after_traffic_stays_in_sequence(dta):
    """connect_info hands out each QP's current PSN, so a replaced translator starts in sequence
    (with the QPs' initial PSNs every request would look like a duplicate and be dropped)."""
    state, prefix, q = dta["state"], dta["prefix"], dta["q"]
    assert control.enable_translator(prefix, "sw2", "c1")["replaced"]
    _report(state, "h2", "keywrite", "--key", 555_000, "--value", 42, "--redundancy", 2)
    assert _until(lambda: q.keywrite_get(555_000) == (42,))
    control.disable_translator(prefix, "sw2")
    assert control.translator_status(prefix, "sw2", quiet=True) == {"enabled": False}
    with pytest.raises(control.DTAError, match="DTA is not enabled on sw2: netstack dta enable"):
        control.translator_status(prefix, "sw2")
    control.enable_translator(prefix, "sw2", "c1")
    _report(state, "h1", "append", "--list", 16, "--value", 7, "--count", 16)
    assert _until(lambda: q.append_read(16) == list(range(7, 23)))


def test_no_icrc_errors_no_naks_no_resyncs(dta):
    st = control.collector_status(dta["prefix"])
    r = st["responder"]
    assert r["icrc_errors"] == 0 and r["malformed"] == 0 and r["internal_errors"] == 0 and r["unknown_qp"] == 0
    assert r["requests_rejected_source"] == 0 and r["requests_unbound"] == 0  # the genuine peer is never refused
    for name, qp in r["qps"].items():
        assert qp["naks_psn"] == qp["naks_access"] == qp["naks_invalid"] == 0, name
        assert qp["duplicates"] == qp["out_of_sequence_dropped"] == 0, name
    c = control.translator_status(dta["prefix"], "sw2")["counters"]
    assert c["resyncs"] == 0 and c["response_icrc_errors"] == 0 and c["internal_errors"] == 0
    assert c["malformed"] == 0 and c["grace_dropped"] == 0
    # every Fetch&Add answered by an ATOMIC ACKNOWLEDGE (this translator's: re-enabled above); the
    # other ACKs answer the WRITEs the output window asks to be acknowledged (AckReq)
    assert c["acks"] >= c["fetch_adds"]
    assert c["window_timeouts"] == 0 and c["window_dropped"] == 0
    # and every genuine response was believed: from the collector, for us, inside the sequence window
    assert c["responses_rejected_source"] == c["responses_rejected_dest"] == 0
    assert c["naks_rejected_window"] == c["acks_rejected_window"] == c["response_unknown_qp"] == 0


FORGE = r"""
import json, socket, sys
from headers.inet import ip_bytes, mac_bytes
from headers.roce import BTH, RETH, Opcode, build_roce_frame
p = json.loads(sys.argv[1])
me_mac = open("/sys/class/net/eth0/address").read().strip()
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); rx.bind(("0.0.0.0", 4791)); rx.settimeout(0.5)
tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); tx.bind(("eth0", 0))
def frame(rkey, psn):
    bth = BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, pkey=0xFFFF, dqpn=p["qpn"], psn=psn)
    return build_roce_frame(mac_bytes(me_mac), mac_bytes(p["mac"]), ip_bytes(p["src"]), ip_bytes(p["ip"]), 50000,
                            bth, [RETH(p["va"], rkey, 8)], b"FORGED!!")
bad_icrc = bytearray(frame(p["rkey"], p["psn"])); bad_icrc[-1] ^= 0xFF
tx.send(bytes(bad_icrc))                          # a corrupt frame: silently dropped (ICRC)
tx.send(frame(p["bad_rkey"], p["psn"]))           # well-formed, bad rkey, from a stranger: no NAK
tx.send(frame(p["rkey"], p["psn"]))               # right QPN, PSN and rkey, from a stranger: dropped
tx.send(frame(p["rkey"], (p["psn"] + 1000) & 0xFFFFFF))  # a PSN ahead: no NAK tells h1 the expected PSN
try:
    data = rx.recv(2048)
    print(json.dumps({"answer": data.hex()}))
except socket.timeout:
    print(json.dumps({"answer": None}))
"""


def test_forged_roce_frames_from_a_stranger_are_dropped_unanswered(dta):
    """The collector's QPs are bound to the translator: h1, which knows the QPN, the expected
    PSN and the rkey, gets no byte written and no answer (a NAK would tell it the expected PSN)."""
    state, prefix = dta["state"], dta["prefix"]
    info = control.connect_info(prefix)
    region = next(r for r in info["regions"] if r["name"] == "sketch-1")  # idle now: nothing else moves its PSN
    qp_before = _qps(prefix)["sketch-1"]
    before = control.collector_status(prefix)["responder"]
    rkeys = {r["rkey"] for r in info["regions"]}
    bad = region["rkey"] ^ 0x5A5A5A5A
    while bad in rkeys or bad == 0:
        bad = (bad + 1) & 0xFFFFFFFF
    directory = Path(info["memory_dir"])
    time.sleep(0.05)  # let any idle flush finish before the snapshot
    snapshot = {p.name: p.read_bytes() for p in directory.glob("*.mem")}
    params = {"qpn": region["qpn"], "psn": qp_before["epsn"], "rkey": region["rkey"], "bad_rkey": bad,
              "va": region["base_va"], "mac": info["mac"], "ip": info["ip"],
              "src": state.host_ip("h1")}
    r = in_node(state, "h1", FORGE, json.dumps(params), timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"answer": None}
    assert _until(lambda: control.collector_status(prefix)["responder"]["requests_rejected_source"]
                  == before["requests_rejected_source"] + 3)
    after = control.collector_status(prefix)["responder"]
    assert after["icrc_errors"] == before["icrc_errors"] + 1
    qp_after = _qps(prefix)["sketch-1"]
    assert (qp_after["epsn"], qp_after["writes"], qp_after["naks_access"], qp_after["naks_psn"]) == \
        (qp_before["epsn"], qp_before["writes"], qp_before["naks_access"], qp_before["naks_psn"])
    assert {p.name: p.read_bytes() for p in directory.glob("*.mem")} == snapshot


#: the checks only a starved machine fails: scheduling delay, a reporter behind its rate
MACHINE_CHECKS = ("scheduling delay", "report rate (/s)")


def test_a_normal_report_run_is_valid_with_its_checks(dta):
    """netstack.validity: ``control.run_report`` (what ``netstack dta report`` runs) judges a paced
    Key-Write run: reports sent and rate as planned, the reporter's, the translator's switch's and
    the collector's scheduling delay. A run the machine starved is run again (at most 3 times),
    skipped if starved every time. The translator follows its switch's scheduling slack."""
    state, prefix = dta["state"], dta["prefix"]
    argv = [sys.executable, "-m", "netstack.dta.live", "report", "keywrite", "--dst", _collector_ip(state),
            "--key", "8000000", "--count", "500", "--rate", "2000", "--redundancy", "2", "--quiet"]
    res = valid_run(lambda: control.run_report(prefix, "h1", ["ip", "netns", "exec", state.namespaces["h1"], *argv]),
                    machine=MACHINE_CHECKS)
    assert res["valid"] is True, [c for c in res["checks"] if not c["ok"]]
    assert [c["name"] for c in res["checks"]] == ["reports sent", "report rate (/s)", "scheduling delay"]
    assert res["sent"] == 500 and res["planned"] == {"reports": 500, "rate": 2000.0, "seconds": None}
    assert {"sw1", "sw2", "c1", "reporter h1"} <= set(res["sched"])
    c = control.translator_status(prefix, "sw2")["counters"]
    window_timeout = control.translator_status(prefix, "sw2")["config"]["window_timeout_ns"]
    assert c["window_timeout_ns"] == window_timeout + c["timer_slack_ns"]


def test_a_key_write_n4_flood_is_paced_not_collapsed(dta):
    """The output window (docs/dta.md "Output window"): h1 sends Key-Write N=4 reports as fast as
    it can. Without a window the translator overran c1's socket, every drop was a PSN gap, and the
    resynchronisations with their grace periods (§5.3) took ingestion to about nothing. With it the
    translator drops the excess *before* it becomes RoCEv2 (``window_dropped``) and c1 keeps up
    with what it is sent. Behaviour, not speed: a fair part of what reached the translator is
    ingested, there is no run of resyncs, and no QP ever has more than the window outstanding.
    Last in the module: the test above assumes a run with no resync at all."""
    state, prefix = dta["state"], dta["prefix"]
    window = control.translator_status(prefix, "sw2")["config"]["window"]
    assert window > 0  # dta_enable's default
    tr0 = control.translator_status(prefix, "sw2")["counters"]
    w0 = _qps(prefix)["keywrite"]["writes"]
    rep = _report(state, "h1", "keywrite", "--key", 7_000_000, "--value", 1, "--redundancy", 4, "--count", 4096,
                  "--duration", 1.5, "--rate", 0)
    last: list[int] = []

    def settled() -> bool:  # c1 has drained what it was sent: its write counter stopped moving
        last.append(_qps(prefix)["keywrite"]["writes"])
        time.sleep(0.2)
        return len(last) > 1 and last[-1] == last[-2]

    assert _until(settled, timeout=10)
    tr1 = control.translator_status(prefix, "sw2")["counters"]
    ingested = (last[-1] - w0) / 4
    translated = tr1["keywrite"] - tr0["keywrite"]
    reached = tr1["reports"] - tr0["reports"]  # what sw2 read; the rest was shed at its socket
    assert rep["sent"] > 0 and reached > 0
    assert ingested >= max(200, 0.05 * reached), (ingested, reached, rep["sent"])
    # what became RDMA was executed, but for what a time-out (a starved daemon: nothing is pinned here)
    # or a resync left behind, at most one window of requests each
    lapses = tr1["window_timeouts"] - tr0["window_timeouts"] + tr1["resyncs"] - tr0["resyncs"]
    assert translated - ingested <= (lapses + 1) * window / 4, {k: tr1[k] - tr0[k] for k in (
        "resyncs", "window_timeouts", "window_rewound", "window_dropped", "grace_dropped", "roce_frames")}
    assert tr1["resyncs"] - tr0["resyncs"] <= 2 and tr1["internal_errors"] == 0
    assert all(q["outstanding"] <= window for q in tr1["qps"].values())
