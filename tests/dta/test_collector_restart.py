"""A collector restart (docs/dta.md, "Collector restart"): the responder's QP state exported
and rebuilt (the engine, sans-IO), the translator resynchronising it through a NAK and the
grace period, and the collector daemon's saved state: its format, its round trip through a
crash, and every way a saved state is refused (one log line, then a fresh start)."""

from __future__ import annotations

import json
import logging
import os
import random
import stat
from pathlib import Path

import pytest

from daemons import collector as cd
from headers.inet import ip_bytes, ip_str, mac_bytes, mac_str
from headers.roce import BTH, RETH, AethKind, AtomicETH, NakCode, Opcode, build_roce_frame, decode_syndrome
from headers.roce import parse_roce_frame as parse
from netstack.dta import CollectorMemory, RoceResponder
from netstack.dta import layout as dl
from netstack.dta import persist as dp

from . import COLLECTOR_IP, COLLECTOR_MAC, MS, TRANSLATOR_IP, TRANSLATOR_MAC, Rig, make_memory

STRANGER_MAC = bytes.fromhex("02000000dead")
STRANGER_IP = bytes([10, 0, 9, 66])
M = 0xFFFFFF


def _setup(mem: CollectorMemory) -> None:
    mem.add_region("w", 256, ("write",))
    mem.add_region("a", 256, ("atomic",))


def _nic(mem: CollectorMemory, seed: int = 0, **kw) -> RoceResponder:
    return RoceResponder(mem, COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(seed), **kw)


def _write(nic: RoceResponder, psn: int, offset: int = 0, data: bytes = b"abcd", src=(TRANSLATOR_MAC, TRANSLATOR_IP),
           qp: str = "w") -> bytes:
    r = nic.memory.region(qp)
    bth = BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, dqpn=nic.qp(qp).qpn, psn=psn & M, padcount=-len(data) & 3)
    return build_roce_frame(src[0], COLLECTOR_MAC, src[1], COLLECTOR_IP, 50000, bth,
                            [RETH(r.base_va + offset, r.rkey, len(data))], data)


# =========================================================================== the engine


def test_the_qp_state_round_trips_into_a_responder_with_the_same_qps():
    mem = make_memory(_setup)
    nic = _nic(mem)
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP, {"w": 77})
    e = nic.qp("w").epsn
    for k in range(3):
        assert nic.receive(_write(nic, e + k, 4 * k)) == []
    state = nic.qp_state()
    assert json.loads(json.dumps(state)) == state  # data, JSON-able
    w = next(q for q in state if q["name"] == "w")
    assert w["epsn"] == (e + 3) & M and w["msn"] == 3 and w["peer_qpn"] == 77
    assert w["peer"] == {"mac": mac_str(TRANSLATOR_MAC), "ip": ip_str(TRANSLATOR_IP)}
    assert next(q for q in state if q["name"] == "a")["peer"] is None  # never bound: stays unbound

    again = _nic(mem, seed=99, qps=state)  # another rng: nothing is drawn
    assert again.qp_state() == state and again.connect_info() == nic.connect_info()
    assert again.counters()["qps"]["w"]["writes"] == 0  # counters are the process's, not state
    assert again.receive(_write(again, e + 3, 12)) == [] and mem.region("w").read(0, 16) == b"abcd" * 4
    # a QP restored unbound accepts nothing until bound, as before the restart
    assert again.receive(_write(again, again.qp("a").epsn, qp="a")) == []
    assert again.counters()["requests_unbound"] == 1


def test_a_request_ahead_of_the_restored_psn_is_nakd_to_the_bound_peer_only():
    mem = make_memory(_setup)
    nic = _nic(mem)
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP)
    e = nic.qp("w").epsn
    nic.receive(_write(nic, e))
    restored = _nic(mem, seed=5, qps=nic.qp_state())  # what the crashed collector had saved: e + 1
    qp = restored.qp("w")
    before = mem.region("w").read(0, 256)
    # a stranger's request, ahead of the PSN: dropped before the PSN is looked at, never answered
    assert restored.receive(_write(restored, e + 40, src=(STRANGER_MAC, STRANGER_IP))) == []
    assert restored.counters()["requests_rejected_source"] == 1 and qp.c.naks_psn == 0
    # the translator's, ahead (what it sent while the collector was down was lost): one NAK with
    # the expected PSN, to the bound peer's addresses and QPN, nothing touched
    (nak,) = [parse(f) for f in restored.receive(_write(restored, e + 40))]
    assert decode_syndrome(nak.aeth.syndrome) == (AethKind.NAK, NakCode.PSN_SEQUENCE_ERROR)
    assert nak.bth.psn == (e + 1) & M and nak.bth.dqpn == qp.peer_qpn
    assert (nak.eth.dst, nak.ip.dst, nak.eth.src, nak.ip.src) == (TRANSLATOR_MAC, TRANSLATOR_IP, COLLECTOR_MAC,
                                                                  COLLECTOR_IP)
    assert restored.receive(_write(restored, e + 41)) == []  # IBTA: one NAK per sequence error
    assert qp.c.out_of_sequence_dropped == 1 and mem.region("w").read(0, 256) == before
    # resynchronised: the expected PSN executes, and the next one
    assert restored.receive(_write(restored, e + 1, 8, b"resy")) == []
    assert restored.receive(_write(restored, e + 2, 12, b"nced")) == []
    assert mem.region("w").read(8, 8) == b"resynced" and qp.epsn == (e + 3) & M


def _state(mem: CollectorMemory) -> list[dict]:
    nic = _nic(mem)
    nic.bind(TRANSLATOR_MAC, TRANSLATOR_IP)
    return nic.qp_state()


@pytest.mark.parametrize("mutate, said", [
    (lambda s: s[:1], "one per region"),
    (lambda s: [*s, dict(s[0])], "one per region"),
    (lambda s: [{**s[0], "name": "nope"}, s[1]], "one per region"),
    (lambda s: [s[0], {**s[1], "qpn": s[0]["qpn"]}], "repeat a QPN"),
    (lambda s: [{**s[0], "epsn": 1 << 24}, s[1]], "epsn="),
    (lambda s: [{**s[0], "qpn": 1}, s[1]], "qpn=1"),
    (lambda s: [{**s[0], "msn": True}, s[1]], "msn=True"),
    (lambda s: [{**s[0], "peer": {"mac": "zz", "ip": "10.0.0.1"}}, s[1]], "bad peer"),
    (lambda s: [{**s[0], "peer": {"mac": "02:00:00:00:00:01", "ip": 7}}, s[1]], "bad peer"),
    (lambda s: [{**s[0], "peer": "10.0.0.1"}, s[1]], "bad peer"),
    (lambda s: [["w"], s[1]], "not an object"),
    (lambda s: "w", "must be a list"),
])
def test_a_malformed_qp_state_is_refused(mutate, said):
    mem = make_memory(_setup)
    with pytest.raises(ValueError, match=said):
        _nic(mem, qps=mutate(_state(mem)))


def test_the_translator_resynchronises_a_restarted_collector_through_a_nak_and_the_grace_period():
    """In-process: 10 reports land; the collector crashes (its state and memory kept); 7 reports
    are sent while it is down; the first report after the restart is a PSN sequence error: one
    NAK, a resync and a grace period of 5 reports; then reports land again."""
    rig = Rig(grace_reports=5)
    rig.send_all(rig.reporter.key_write(k, k + 7, 1) for k in range(10))
    saved = rig.nic.qp_state()
    rig.send_all((rig.reporter.key_write(k, k + 7, 1) for k in range(100, 107)), drop=lambda f: True)  # down
    rig.nic = RoceResponder(rig.mem, COLLECTOR_MAC, COLLECTOR_IP, qps=saved)  # restarted over the same memory
    rig.send_all(rig.reporter.key_write(k, k + 7, 1) for k in range(200, 220))
    c, kw = rig.tr.counters(), rig.nic.qp("keywrite").c
    assert c["resyncs"] == 1 and c["grace_periods"] == 1 and c["grace_dropped"] == 5
    assert c["naks_rejected_window"] == 0 and kw.naks_psn == 1 and kw.writes == 14
    assert [k for k in range(10) if rig.q.keywrite_get(k) == (k + 7,)] == list(range(10))  # kept
    assert not any(rig.q.keywrite_get(k) for k in range(100, 107))  # lost while down
    assert [k for k in range(200, 220) if rig.q.keywrite_get(k) == (k + 7,)] == list(range(206, 220))
    # every report: executed before (10), lost while down (7), NAK'd (1), grace (5), executed after (14)
    assert c["reports"] == 37 == c["writes"] + c["grace_dropped"] and rig.region_writes("keywrite") == 24


def _increments_across_a_restart(restore_from: str) -> Rig:
    """8 Key-Increment reports (each Fetch&Add answered: the translator knows they executed),
    the QP state saved after 3 of them ("stale") or after all 8 ("current"), the collector
    restarted from it, then 12 more reports."""
    rig = Rig(grace_reports=5)
    rig.send_all(rig.reporter.key_increment(k, 1, 1) for k in range(3))
    saved = {"stale": rig.nic.qp_state()}
    rig.send_all(rig.reporter.key_increment(k, 1, 1) for k in range(3, 8))
    saved["current"] = rig.nic.qp_state()
    rig.nic = RoceResponder(rig.mem, COLLECTOR_MAC, COLLECTOR_IP, qps=saved[restore_from])
    rig.send_all(rig.reporter.key_increment(k, 1, 1) for k in range(8, 20))
    return rig


def test_a_saved_psn_behind_an_acknowledged_one_would_leave_the_qp_stuck():
    """Why the daemon saves the expected PSNs before any response leaves (not, say, every 100 ms):
    restored from a state older than the answers the translator got, the collector NAKs a PSN
    the translator knows was executed; the translator refuses that NAK (docs/security.md#dta)
    and the QP never recovers. Restored from the state as of the last answer, it is simply in
    sequence."""
    stuck = _increments_across_a_restart("stale")
    c, ki = stuck.tr.counters(), stuck.nic.qp("keyincrement").c
    assert c["naks_rejected_window"] == 1 and c["resyncs"] == 0 and ki.fetch_adds == 0
    assert ki.naks_psn == 1 and ki.out_of_sequence_dropped == 11  # and so on, for ever
    fine = _increments_across_a_restart("current")
    c, ki = fine.tr.counters(), fine.nic.qp("keyincrement").c
    assert c["naks_rejected_window"] == 0 and ki.naks_psn == 0 and ki.fetch_adds == 12
    assert all(fine.q.counter_get(k, 1) == 1 for k in range(20))


# =========================================================================== memory


def test_a_region_file_is_kept_with_what_it_holds(tmp_path):
    mem = CollectorMemory("c", directory=tmp_path, rng=random.Random(1))
    r = mem.add_region("w", 64, ("write", "atomic"))
    r.write(r.base_va + 8, b"held")
    r.fetch_add(r.base_va + 16, 5)
    rkey, base = r.rkey, r.base_va
    mem.close()  # a crash: the file stays
    again = CollectorMemory("c", directory=tmp_path)
    k = again.add_region("w", 64, ("write", "atomic"), rkey=rkey, base_va=base, keep=True)
    assert k.read(8, 4) == b"held" and k.read_u64(16) == 5 and k.trailer()["writes"] == 1
    assert again.by_rkey(rkey) is k
    with pytest.raises(ValueError, match="is 128 bytes, not 32 \\+ 64"):
        CollectorMemory("d", directory=tmp_path).add_region("w", 32, ("write",), keep=True)
    with pytest.raises(ValueError, match="cannot re-open"):
        CollectorMemory("d", directory=tmp_path).add_region("gone", 32, ("write",), keep=True)
    with pytest.raises(ValueError, match="anonymous"):
        CollectorMemory("d", directory=None).add_region("w", 32, ("write",), keep=True)
    again.close(unlink=True)


# =========================================================================== the daemon's saved state

CFG = {"name": "c1", "ifname": "eth0", "mac": "02:00:0a:00:00:64", "ip": "10.0.0.100"}
C_MAC, C_IP = mac_bytes(CFG["mac"]), ip_bytes(CFG["ip"])
LAYOUT = dl.resolve_layout({"keywrite": {"slots": 1024}, "append": [{"list_id": 4, "entries": 64, "batch": 4}],
                            "keyincrement": {"slots": 256}, "sketches": None})


@pytest.fixture
def bed(tmp_path):
    """A config in a run directory and a memory directory, as netstack up makes them."""
    run = tmp_path / "run"
    run.mkdir()
    cfg = {**CFG, "memory_dir": str(tmp_path / "shm")}
    (run / "c1.json").write_text(json.dumps({"collector": cfg}))
    return cfg, run / "c1.json"


def _open(cfg, config: Path, layout=LAYOUT):
    store = dp.SavedState.beside(config)
    memory, nic, info = dp.open_collector(cfg, layout, store)
    return store, memory, nic, info


def _crash(store, memory) -> None:
    """What SIGKILL leaves: the files, unmapped."""
    memory.close()
    store.close()


def _traffic(store, memory, nic) -> None:
    """Bind, execute a few WRITEs and a Fetch&Add, record the PSNs (as a batch does)."""
    nic.bind(mac_str(TRANSLATOR_MAC), ip_str(TRANSLATOR_IP))
    store.save_identity()
    kw = memory.region("keywrite")
    e = nic.qp("keywrite").epsn
    for k in range(3):
        bth = BTH(opcode=Opcode.RDMA_WRITE_ONLY, migreq=1, dqpn=nic.qp("keywrite").qpn, psn=(e + k) & M)
        nic.receive(build_roce_frame(TRANSLATOR_MAC, C_MAC, TRANSLATOR_IP, C_IP, 50000, bth,
                                     [RETH(kw.base_va + 8 * k, kw.rkey, 8)], b"slot%04d" % k))
    ki = memory.region("keyincrement")
    bth = BTH(opcode=Opcode.FETCH_ADD, migreq=1, dqpn=nic.qp("keyincrement").qpn, psn=nic.qp("keyincrement").epsn)
    assert nic.receive(build_roce_frame(TRANSLATOR_MAC, C_MAC, TRANSLATOR_IP, C_IP, 50000, bth,
                                        [AtomicETH(ki.base_va, ki.rkey, 9, 0)]))
    store.record()


def test_the_saved_state_survives_a_crash_and_restores_the_same_collector(bed, caplog):
    cfg, config = bed
    caplog.set_level(logging.INFO, "netstack.collector")
    store, memory, nic, info = _open(cfg, config)
    assert not info["restored"] and info["reason"] == "no saved state"
    assert "no saved state" in caplog.text and "a fresh start" in caplog.text
    for path in (store.path, store.psn_path):  # beside the config, private
        assert path.parent == config.parent and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    _traffic(store, memory, nic)
    before = {"qps": nic.qp_state(), "info": nic.connect_info(),
              "memory": {n: r.read(0, r.size) for n, r in memory.regions.items()}}
    doc = json.loads(store.path.read_text())
    assert doc["format"] == dp.STATE_FORMAT and doc["config"]["nak_policy"] == "once"
    assert {"epsn", "msn"}.isdisjoint(doc["qps"][0])  # those live in the PSN page
    _crash(store, memory)

    caplog.clear()
    store, memory, nic, info = _open(cfg, config)
    assert info["restored"] and info["epsn"]["keywrite"] == before["qps"][0]["epsn"]
    assert nic.qp_state() == before["qps"] and nic.connect_info() == before["info"]
    assert {n: r.read(0, r.size) for n, r in memory.regions.items()} == before["memory"]
    assert memory.region("keyincrement").read_u64(0) == 9 and memory.region("keywrite").trailer()["writes"] == 3
    assert "restored from" in caplog.text and "3 WRITEs and 1 atomics executed before" in caplog.text
    # it goes on recording, and a clean stop removes the state: the next start is a fresh one
    _traffic(store, memory, nic)
    _crash(store, memory)
    store, memory, nic, info = _open(cfg, config)
    assert info["restored"] and memory.region("keywrite").trailer()["writes"] == 6
    memory.close(unlink=True)
    store.remove()
    assert not store.path.exists() and not store.psn_path.exists() and not Path(cfg["memory_dir"]).exists()
    store, memory, nic, info = _open(cfg, config)
    assert not info["restored"] and info["reason"] == "no saved state"
    memory.close(unlink=True)
    store.remove()


def _damage_psn_record(store, memory) -> None:
    data = bytearray(store.psn_path.read_bytes())
    data[dp._PSN_HEADER.size] ^= 1
    store.psn_path.write_bytes(bytes(data))


def _edit(key, value):
    def edit(store, memory):
        doc = json.loads(store.path.read_text())
        doc[key] = value(doc) if callable(value) else value
        store.path.write_text(json.dumps(doc))
    return edit


@pytest.mark.parametrize("spoil, said", [
    (lambda store, memory: store.path.write_text("{not json"), "cannot read it"),
    (lambda store, memory: store.path.write_text("[1, 2]"), "not a version-1"),
    (_edit("version", 2), "not a version-1"),
    (_edit("qps", None), "'qps' is missing"),
    (_edit("config", lambda d: {**d["config"], "ip": "10.0.0.99"}), "another collector's (its ip"),
    (_edit("config", lambda d: {**d["config"], "nak_policy": "every"}), "another collector's (its nak_policy"),
    (_edit("layout", lambda d: {**d["layout"], "sketches": []}), "another memory layout"),
    (_edit("regions", lambda d: d["regions"][:-1]), "not the ones the layout makes"),
    (_edit("regions", lambda d: [{**d["regions"][0], "rkey": "x"}, *d["regions"][1:]]), "bad rkey"),
    (_edit("token", 5), "not the state file's"),
    (_edit("qps", lambda d: [{**d["qps"][0], "qpn": 0}, *d["qps"][1:]]), "qpn=0"),
    (_damage_psn_record, "PSN record of QP 0 is damaged"),
    (lambda store, memory: store.psn_path.unlink(), "cannot read the PSN page"),
    (lambda store, memory: store.psn_path.write_bytes(b"short"), "not one record per QP"),
    (lambda store, memory: memory.region("keywrite").path.unlink(), "cannot re-open"),
    (lambda store, memory: os.truncate(memory.region("keywrite").path, 100), "is 100 bytes"),
    (lambda store, memory: os.chmod(store.path, 0o666), "only we can write"),
])
def test_a_malformed_or_foreign_state_is_refused_with_one_log_line_and_a_fresh_start(bed, caplog, spoil, said):
    cfg, config = bed
    store, memory, nic, _ = _open(cfg, config)
    _traffic(store, memory, nic)
    old = {q["name"]: q["qpn"] for q in nic.qp_state()}
    _crash(store, memory)
    spoil(store, memory)
    caplog.clear()
    caplog.set_level(logging.INFO, "netstack.collector")
    store, memory, nic, info = _open(cfg, config)
    refusals = [r for r in caplog.records if "refusing the saved state" in r.getMessage()]
    assert len(refusals) == 1 and refusals[0].levelno == logging.WARNING, caplog.text
    assert said in refusals[0].getMessage() and str(store.path) in refusals[0].getMessage()
    assert "a fresh start" in refusals[0].getMessage()
    assert not info["restored"] and said in info["reason"]
    # fresh: new QPs, empty memory, unbound; and its own state saved, which loads
    assert {q["name"]: q["qpn"] for q in nic.qp_state()} != old
    assert all(q["peer"] is None for q in nic.qp_state())
    assert memory.region("keywrite").trailer()["writes"] == 0 and memory.region("keyincrement").read_u64(0) == 0
    assert store.load(cfg, LAYOUT) is not None
    memory.close(unlink=True)
    store.remove()


def test_a_fresh_start_that_fails_leaves_nothing(bed):
    cfg, config = bed
    bad = dl.resolve_layout({"keywrite": {"slots": 1000}})  # not a power of two
    with pytest.raises(dl.LayoutError):
        _open(cfg, config, bad)
    assert list(config.parent.iterdir()) == [config]
    assert not any(Path(cfg["memory_dir"]).glob("*.mem"))


class _FakePort:
    """recv_batch hands out queued frames; send_batch checks the PSN page is already current."""

    ifname = "eth0"
    send_errors = tx_dropped = kernel_packets = kernel_drops = 0

    def __init__(self, cfg, store, frames):
        self.cfg, self.store, self.frames, self.seen = cfg, store, frames, []

    def recv_batch(self, limit):
        out, self.frames = self.frames[:limit], self.frames[limit:]
        return out

    def read_kernel_stats(self):
        return 0, 0

    def send_batch(self, frames):
        self.seen.append(dp.SavedState(self.store.path.parent, "c1").load(self.cfg, LAYOUT))
        return len(frames)


def test_the_shell_saves_the_psns_before_the_responses_leave(bed):
    cfg, config = bed
    store, memory, nic, info = _open(cfg, config)
    nic.bind(mac_str(TRANSLATOR_MAC), ip_str(TRANSLATOR_IP))
    ki, qp = memory.region("keyincrement"), nic.qp("keyincrement")
    frames = []
    for k in range(4):
        bth = BTH(opcode=Opcode.FETCH_ADD, migreq=1, dqpn=qp.qpn, psn=(qp.epsn + k) & M)
        frames.append(build_roce_frame(TRANSLATOR_MAC, C_MAC, TRANSLATOR_IP, C_IP, 50000, bth,
                                       [AtomicETH(ki.base_va, ki.rkey, 1, 0)]))
    port = _FakePort(cfg, store, frames)
    shell = cd.CollectorShell(cfg, memory, nic, port, LAYOUT, cd.PortGuard(), store, info)
    shell.on_readable()
    (seen,) = port.seen  # one batch, four ATOMIC ACKs: the page already said so when they left
    assert next(q for q in seen["qps"] if q["name"] == "keyincrement")["epsn"] == qp.epsn
    assert shell.responses_sent == 4 and shell.internal_errors == 0
    assert shell.ctl_status({})["restart"] == info
    # a bind is saved too: a restart restores the new peer
    shell.ctl_bind({"ip": "10.0.0.253", "mac": "02:00:00:00:00:fd"})
    doc = json.loads(store.path.read_text())
    assert all(q["peer"] == {"mac": "02:00:00:00:00:fd", "ip": "10.0.0.253"} for q in doc["qps"])
    memory.close(unlink=True)
    store.remove()


def test_a_collector_down_for_longer_than_the_nak_window_needs_a_reconnect():
    """The limit (docs/dta.md "Collector restart"): reports flowing for 30 s to a dead collector,
    at 200/s. Its saved PSN was sent more than ``nak_window_ns`` (10 s) and ``nak_window_slack``
    PSNs before the newest: the translator refuses the NAK, the QP stays out of sequence. A
    translator without the time bound (``nak_window_ns=None``) resynchronises it."""
    def run(**config) -> Rig:
        rig = Rig(grace_reports=5, **config)
        rig.send_all(rig.reporter.key_write(k, k + 7, 1) for k in range(10))
        saved = rig.nic.qp_state()
        t = 0
        for n in range(6000):  # 30 s while the collector is down
            t = 1000 * MS + 5 * MS * n
            rig.send(rig.reporter.key_write(1000 + n, 1, 1), t, drop=lambda f: True)
        rig.nic = RoceResponder(rig.mem, COLLECTOR_MAC, COLLECTOR_IP, qps=saved)
        for k in range(20):
            rig.send(rig.reporter.key_write(5000 + k, 1, 1), t + (k + 1) * MS)
        return rig

    stuck = run()
    assert stuck.tr.counters()["naks_rejected_window"] == 1 and stuck.tr.counters()["resyncs"] == 0
    assert stuck.nic.qp("keywrite").c.writes == 0
    fine = run(nak_window_ns=None)
    assert fine.tr.counters()["resyncs"] == 1 and fine.nic.qp("keywrite").c.writes == 14
