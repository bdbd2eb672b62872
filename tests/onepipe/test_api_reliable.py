"""The asyncio API in reliable mode (``OnePipeEndpoint(reliable=True)``), on real UDP sockets over
loopback: two processes (127.0.0.2, 127.0.0.3), a fake controller and a fake ToR (127.0.0.1).
No namespaces: the ToR is a few lines that hand every process the minimum of the barriers the
processes beaconed, and the controller registers processes and sends the notice a test asks for.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio

from headers.errors import HeaderError
from headers.onepipe import BARRIER_OPCODES, OnePipeHeader, OnePipeOpcode, decode_packet, ts_from_ns
from netstack.onepipe import api
from netstack.onepipe.api import OnePipeEndpoint
from netstack.onepipe.ctlwire import Notice, failure_notice, parse_register_request, register_reply
from netstack.onepipe.endpoint import Endpoint
from netstack.onepipe.reliable import ReliableEndpoint

Addr = tuple[str, int]
A_IP, B_IP, NET_IP = "127.0.0.2", "127.0.0.3", "127.0.0.1"


def _free_port(ip: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((ip, 0))
        return s.getsockname()[1]


def _sock(ip: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ip, 0))
    s.setblocking(False)
    return s


@dataclass
class FakeNet:
    """The fake controller (registration, notices on demand) and the fake ToR (min barriers)."""

    ctl: socket.socket = field(default_factory=lambda: _sock(NET_IP))
    tor: socket.socket = field(default_factory=lambda: _sock(NET_IP))
    procs: dict[Addr, int] = field(default_factory=dict)  # registered -> incarnation
    be: dict[Addr, int] = field(default_factory=dict)  # the barriers each process beaconed (wire)
    commit: dict[Addr, int] = field(default_factory=dict)
    done: list[int] = field(default_factory=list)  # CALLBACK_DONE failure ids

    @property
    def ctl_addr(self) -> Addr:
        return self.ctl.getsockname()

    def on_ctl(self) -> None:
        while True:
            try:
                data, src = self.ctl.recvfrom(65536)
            except BlockingIOError:
                return
            hdr, payload = decode_packet(data)
            if hdr.opcode is OnePipeOpcode.CALLBACK_DONE:
                self.done.append(hdr.psn)
            elif hdr.opcode is OnePipeOpcode.REGISTER:
                nonce, _rev, _recover = parse_register_request(hdr, payload)
                inc = self.procs.setdefault(src, len(self.procs) + 1)
                self.ctl.sendto(register_reply(src, inc, 0, nonce), src)
                for other, oinc in self.procs.items():  # announcements both ways
                    if other != src:
                        self.ctl.sendto(register_reply(src, inc, 0), other)
                        self.ctl.sendto(register_reply(other, oinc, 0), src)

    def notice(self, proc: Addr, t_f: int, fid: int) -> None:
        frame = failure_notice(Notice(proc, self.procs[proc], ts_from_ns(t_f), fid, False))
        for p in self.procs:
            if p != proc:
                self.ctl.sendto(frame, p)

    def on_tor(self) -> None:
        while True:
            try:
                data, src = self.tor.recvfrom(65536)
            except BlockingIOError:
                return
            with contextlib.suppress(HeaderError):
                hdr, _ = decode_packet(data)
                if hdr.opcode in BARRIER_OPCODES:
                    self.be[src] = hdr.be_barrier
                    if hdr.commit_barrier:
                        self.commit[src] = hdr.commit_barrier

    async def beacons(self, n: int) -> None:
        """Every 1 ms, once all ``n`` processes beaconed: the minima, to each of them."""
        while True:
            await asyncio.sleep(0.001)
            if len(self.be) == n:
                commit = min(self.commit.values()) if len(self.commit) == n else 0
                frame = OnePipeHeader(0, min(self.be.values()), commit, 0, OnePipeOpcode.BEACON).to_bytes()
                for p in self.be:
                    self.tor.sendto(frame, p)


@pytest_asyncio.fixture
async def net(monkeypatch) -> AsyncIterator[FakeNet]:
    fake = FakeNet()
    monkeypatch.setattr(api, "PORT", fake.tor.getsockname()[1])  # beacons go to (broadcast, PORT): the fake ToR
    loop = asyncio.get_running_loop()
    loop.add_reader(fake.ctl.fileno(), fake.on_ctl)
    loop.add_reader(fake.tor.fileno(), fake.on_tor)
    task = asyncio.create_task(fake.beacons(2))
    yield fake
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    loop.remove_reader(fake.ctl.fileno())
    loop.remove_reader(fake.tor.fileno())
    fake.ctl.close()
    fake.tor.close()


async def _until(cond, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.005)


@pytest.mark.asyncio
async def test_reliable_endpoints_register_deliver_and_report_a_failed_process(net):
    a_addr, b_addr = (A_IP, _free_port(A_IP)), (B_IP, _free_port(B_IP))
    events: dict[str, list] = {"a_fail": [], "a_send_fail": [], "a_reg": [], "b_reg": []}
    a = OnePipeEndpoint(a_addr, reliable=True, controller=net.ctl_addr, broadcast=NET_IP,
                        on_proc_fail=lambda proc, t_f: events["a_fail"].append((proc, t_f)),
                        on_send_fail=lambda ts, dst, msg: events["a_send_fail"].append((ts, dst, msg)),
                        on_register=events["a_reg"].append)
    b = OnePipeEndpoint(b_addr, reliable=True, controller=net.ctl_addr, broadcast=NET_IP,
                        on_register=events["b_reg"].append)
    assert isinstance(a.engine, ReliableEndpoint) and a.incarnation is None
    async with a, b:
        await _until(lambda: a.incarnation is not None and b.incarnation is not None)
        assert sorted(events["a_reg"] + events["b_reg"]) == [1, 2] and net.procs[a_addr] == a.incarnation
        seq = await a.send([(b_addr, b"hello")])
        assert seq == 0
        ts, src, msg = await asyncio.wait_for(b.recv(), timeout=5)
        assert (src, msg) == (a_addr, b"hello") and ts > 0
        # the controller declares b failed: a's callback gets (b, T_f), then a answers CALLBACK_DONE
        t_f = a.now() - 1000
        net.notice(b_addr, t_f, fid=7)
        await _until(lambda: events["a_fail"] and 7 in net.done)
        assert events["a_fail"] == [(b_addr, t_f)]
        assert a.failed_incarnation(b_addr) == net.procs[b_addr] and a.failed_incarnation(a_addr) is None
        # b is failed for a now: a message to it fails at once (ts 0) and nothing is sent
        assert await a.send([(b_addr, b"late")]) is None
        assert events["a_send_fail"] == [(0, b_addr, b"late")]
        assert a.counters()["proc_fails"] == 1 and a.callback_errors == 0


@pytest.mark.asyncio
async def test_a_raising_callback_is_counted_and_the_batch_goes_on(net):
    a_addr, b_addr = (A_IP, _free_port(A_IP)), (B_IP, _free_port(B_IP))

    def boom(*_args: object) -> None:
        raise RuntimeError("the application's bug")

    a = OnePipeEndpoint(a_addr, reliable=True, controller=net.ctl_addr, broadcast=NET_IP, on_proc_fail=boom,
                        on_register=boom)
    b = OnePipeEndpoint(b_addr, reliable=True, controller=net.ctl_addr, broadcast=NET_IP)
    async with a, b:
        await _until(lambda: a.incarnation is not None and b.incarnation is not None)
        net.notice(b_addr, a.now() - 1000, fid=3)
        await _until(lambda: 3 in net.done)  # CALLBACK_DONE went out after the callback raised
        assert a.callback_errors == 2


def test_reliable_needs_the_controller_and_best_effort_takes_none():
    with pytest.raises(ValueError, match="needs the controller's address"):
        OnePipeEndpoint(("10.0.0.1", 40101), reliable=True)
    with pytest.raises(ValueError, match="reliable=True only"):
        OnePipeEndpoint(("10.0.0.1", 40101), controller=("10.0.0.100", 40100))
    with pytest.raises(ValueError, match="reliable=True only"):
        OnePipeEndpoint(("10.0.0.1", 40101), on_proc_fail=lambda proc, t_f: None)


def test_best_effort_keeps_its_engine_and_reader():
    ep = OnePipeEndpoint(("10.0.0.1", 40101))
    assert type(ep.engine) is Endpoint and not ep.reliable and ep.incarnation is None
    assert ep.failed_incarnation(("10.0.0.2", 40101)) is None
    rel = OnePipeEndpoint(("10.0.0.1", 40101), reliable=True, controller=("10.0.0.100", 40100))
    # the REGISTER is queued at creation and goes out when the socket starts
    assert rel.engine.actions and rel.reliable and rel.controller == ("10.0.0.100", 40100)
