"""TCD's end hosts on the wire: the engines' bytes as the codecs, Scapy and contrib's RoCE layers
read them; the paced-sender shell and its UDP helpers (netstack.io.paced); and the live tools
(``python -m netstack.tcd send|recv``) over loopback, with the TOS byte carrying the ECN marks."""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import threading
import time

import pytest
from scapy.contrib.roce import BTH as ContribBTH
from scapy.contrib.roce import CNPPadding
from scapy.layers.inet import IP
from scapy.layers.l2 import Ether

from headers.layers import tcd as L
from headers.tcd import CnpKind, TcdCnp, TcdData
from netstack.io import paced
from netstack.sim.packets import Ipv4Flow
from netstack.tcd import live
from netstack.tcd.dcqcn import DcqcnParams, RateSender
from netstack.tcd.np import TcdReceiver

MAC1, MAC2 = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
IP1, IP2 = bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2])
P = DcqcnParams.scaled(40_000_000, 1000)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -------------------------------------------------------------------------------- bytes
def test_sender_datagrams_in_frames_dissect_as_tcd_data_with_ect0():
    s = RateSender(P, flow=5, mode="fixed", size_bytes=2500, payload=1000, now_ns=0)
    flow = Ipv4Flow(MAC1, MAC2, IP1, IP2, tos=0x02)
    frames = [flow.udp(40001, 40300, d) for d in s.poll(10**9)]
    assert len(frames) == 3
    for i, f in enumerate(frames):
        pkt = Ether(f)
        assert pkt[IP].tos == 0x02 and pkt[L.TcdData].seq == i and pkt[L.TcdData].flow == 5
    assert Ether(frames[-1])[L.TcdData].flags == "FIN" and len(Ether(frames[-1])[L.TcdData].payload) == 500 - 16


def test_np_cnps_are_roce_cnps():
    r = TcdReceiver(P)
    r.receive(TcdData(9, 0, 0).to_bytes(100), 0, ("10.0.0.1", 40001), 0b11)
    (act,) = r.actions.take_all()
    assert act.dst == ("10.0.0.1", 40001)
    bth = ContribBTH(act.data)
    assert (bth.opcode, bth.becn, bth.dqpn, bth.pkey) == (0x81, 1, 9, 0xFFFF) and bth.haslayer(CNPPadding)
    assert TcdCnp.from_bytes(act.data) == TcdCnp(9, CnpKind.CE, 1) == TcdCnp.from_bytes(bytes(L.TcdCnp(act.data)))


# ------------------------------------------------------------------------ io/paced helpers
def test_tos_goes_out_and_comes_back_with_recvtos():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        paced.enable_recv_tos(rx)
        with paced.open_udp_sender("127.0.0.1", port, tos=0x2E << 2 | 0x02) as tx:
            tx.send(b"one")
            tx.send(b"two")
        rx.settimeout(2)
        data, addr, tos = paced.recv_with_tos(rx)
        assert (data, tos) == (b"one", 0xBA) and addr[0] == "127.0.0.1"
        rx.setblocking(False)
        assert [(d, t) for d, _, t in paced.drain_with_tos(rx)] == [(b"two", 0xBA)]
        assert paced.drain_with_tos(rx) == [] and paced.drain(rx) == []
    with pytest.raises(ValueError, match="tos"):
        paced.open_udp_sender("127.0.0.1", port, tos=256)


class _Echoed:
    """A paced engine for the shell test: 20 datagrams 1 ms apart; counts what comes back."""

    def __init__(self) -> None:
        self.sent = 0
        self.got: list[bytes] = []
        self.t0 = time.monotonic_ns()

    @property
    def done(self) -> bool:
        return self.sent >= 20 and len(self.got) >= 10

    def poll(self, now_ns: int) -> list[bytes]:
        due = min(20, (now_ns - self.t0) // 1_000_000 + 1)
        out = [b"%d" % i for i in range(self.sent, due)]
        self.sent = max(self.sent, due)
        return out

    def receive(self, datagram: bytes, now_ns: int) -> None:
        if datagram == b"bad":
            from headers.errors import HeaderError

            raise HeaderError("test", "bad")
        self.got.append(datagram)

    def next_deadline(self) -> int | None:
        return None if self.sent >= 20 else self.t0 + self.sent * 1_000_000


def test_run_sender_sends_feeds_and_counts():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        rx.settimeout(2)
        eng = _Echoed()
        result: dict = {}
        with paced.open_udp_sender("127.0.0.1", port) as tx:
            th = threading.Thread(target=lambda: result.update(paced.run_sender(tx, eng, max_seconds=5)))
            th.start()
            for i in range(20):  # answer every other datagram, once with garbage
                d, addr = rx.recvfrom(100)
                assert d == b"%d" % i
                if i % 2 == 0:
                    rx.sendto(b"bad" if i == 0 else b"ack", addr)
            rx.sendto(b"ack", addr)
            th.join(5)
    assert eng.done and result["malformed"] == 1 and result["send_errors"] == 0 and not result["timed_out"]
    with paced.open_udp_sender("127.0.0.1", port) as tx:
        stuck = _Echoed()
        assert paced.run_sender(tx, stuck, max_seconds=0.05)["timed_out"]  # nobody answers


# ------------------------------------------------------------------------------ live tools
def _recv_args(port: int, **kw) -> argparse.Namespace:
    argv = ["recv", "--port", str(port), "--quiet", "--idle", "0.5", "--wait", "5"]
    for k, v in kw.items():
        argv += [f"--{k.replace('_', '-')}"] + ([] if v is True else [str(v)])
    return live.build_parser().parse_args(argv)


def _start_recv(args: argparse.Namespace) -> tuple[threading.Thread, dict]:
    result: dict = {}
    th = threading.Thread(target=lambda: result.update(live.run_recv(args)), daemon=True)
    th.start()
    time.sleep(0.2)  # the receiver binds its socket
    return th, result


def test_send_and_recv_over_loopback():
    port = free_port()
    th, res = _start_recv(_recv_args(port, expect=2))
    outs = [live.run_send(live.build_parser().parse_args(
        ["send", "--dst", "127.0.0.1", "--port", str(port), "--flow", str(f), "--quiet", *extra]))
        for f, extra in ((1, ["--bytes", "50KB"]), (2, ["--mode", "fixed", "--rate", "20Mbit", "--seconds", "0.1"]))]
    th.join(5)
    assert all(o["done"] and o["send_errors"] == 0 for o in outs)
    assert outs[0]["counters"]["mode"] == "dcqcn+tcd" and outs[0]["bytes"] == 50_000
    # a line rate of 20 Mbit/s, headers counted: never above it (how close it gets is the machine's:
    # 13 Mbit/s once on CI, starved under SCHED_IDLE; a rate is a timing, not a behaviour)
    assert 0 < outs[1]["rate_bps_avg"] < 20e6
    flows = res["flows"]
    assert set(flows) == {"1", "2"} and all(f["complete"] and f["ect"] == f["packets"] for f in flows.values())
    assert flows["1"]["bytes"] == 50_000 and res["cnps_sent"] == 0 and res["malformed"] == 0
    assert flows["1"]["fct_ns"] > 0 and json.dumps(res) and json.dumps(outs)


def test_the_receiver_answers_ce_and_ue_marks_with_cnps_to_the_source():
    port = free_port()
    th, res = _start_recv(_recv_args(port))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as ce, socket.socket(socket.AF_INET,
                                                                               socket.SOCK_DGRAM) as ue:
        ce.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x03)
        ue.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x01)
        ce.sendto(TcdData(1, 0, 0, 1).to_bytes(100), ("127.0.0.1", port))
        ue.sendto(TcdData(2, 0, 0, 1).to_bytes(100), ("127.0.0.1", port))
        ce.sendto(b"junk", ("127.0.0.1", port))
        ce.settimeout(3)
        ue.settimeout(3)
        assert TcdCnp.from_bytes(ce.recvfrom(100)[0]) == TcdCnp(1, CnpKind.CE, 1)
        assert TcdCnp.from_bytes(ue.recvfrom(100)[0]) == TcdCnp(2, CnpKind.UE, 1)
        th.join(5)
    assert res["cnps_sent"] == 2 and res["malformed"] == 1 and res["flows"]["2"]["ue"] == 1


def test_the_sender_cuts_on_cnps_from_its_receiver():
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as rx:
        rx.bind(("127.0.0.1", port))
        rx.settimeout(3)
        stop = threading.Event()

        def np() -> None:  # a receiver that answers the first packets with CNP-CE
            with contextlib.suppress(OSError):
                n = 0
                while not stop.is_set():
                    d, addr = rx.recvfrom(2000)
                    if d and n < 3:
                        rx.sendto(TcdCnp(TcdData.from_bytes(d).flow).to_bytes(), addr)
                    n += 1

        th = threading.Thread(target=np, daemon=True)
        th.start()
        out = live.run_send(live.build_parser().parse_args(
            # (for a time, not a size: 30 KB went out in 6 ms, before a starved receiver thread answered,
            # CI 2026-12-07 with the unit tests under SCHED_IDLE)
            ["send", "--dst", "127.0.0.1", "--port", str(port), "--flow", "4", "--mode", "dcqcn", "--seconds", "0.5",
             "--quiet", "--param", "alpha0=1.0"]))
        stop.set()
    c = out["counters"]
    assert out["done"] and c["rate_cuts"] >= 1 and c["min_rc_bps"] <= 20_000_000 and len(out["rate_log"]) >= 2


def test_main_refuses_bad_settings(capsys):
    for argv in (["send", "--dst", "127.0.0.1", "--bytes", "1KB", "--payload", "8"],
                 ["send", "--dst", "127.0.0.1", "--bytes", "1KB", "--burst", "4KB"],
                 ["send", "--dst", "127.0.0.1", "--bytes", "1KB", "--param", "nope=1"],
                 ["send", "--dst", "127.0.0.1"]):
        with pytest.raises(SystemExit) as e:
            live.main(argv)
        assert e.value.code == 2
    assert "payload" in capsys.readouterr().err
