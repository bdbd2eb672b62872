"""Pure tests of the DTA engines (netstack.dta). Shared helpers live here.

Everything runs in one process on anonymous memory with a fake clock: a :class:`Rig` wires a
collector memory, a :class:`RoceResponder` (the collector NIC), a :class:`DTATranslator`
and a query view, and hands frames between them the way the switch and the wire would.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any

from headers.inet import ip_bytes
from netstack.dta import (
    CollectorMemory,
    CollectorQuery,
    DTATranslator,
    Reporter,
    RoceResponder,
    TranslatorConfig,
    is_roce_frame,
)
from netstack.engine import Transmit

COLLECTOR_MAC = bytes.fromhex("02000000c011")
COLLECTOR_IP = ip_bytes("10.0.9.1")
TRANSLATOR_MAC = bytes.fromhex("02000000710a")
TRANSLATOR_IP = ip_bytes("10.0.9.254")
REPORTER_MAC = bytes.fromhex("020000000101")
REPORTER_IP = ip_bytes("10.0.1.1")
MS = 1_000_000


def make_memory(setup: Callable[[CollectorMemory], Any] | None = None, seed: int = 0,
                directory=None) -> CollectorMemory:
    mem = CollectorMemory("test", directory=directory, rng=random.Random(seed))
    if setup is not None:
        setup(mem)
    return mem


def default_setup(mem: CollectorMemory) -> None:
    mem.add_keywrite(slots=1 << 12, data_words=1)
    mem.add_keyincrement(slots=1 << 12)
    mem.add_append_list(1, entries=64, batch=4)
    mem.add_sketch(7, rows=3, columns=10, merge="sum", reporters=(1, 2, 3), batch_columns=4)


def bind(nic: RoceResponder, tr: DTATranslator) -> None:
    """Connect the NIC's QPs to the translator (what enable_translator's ``bind`` does live)."""
    nic.bind(tr.config.mac, tr.config.ip, {name: qp.local_qpn for name, qp in tr.qps.items()})


class Rig:
    """Memory + NIC + translator + query, connected in-process (no loss unless asked)."""

    def __init__(self, setup: Callable[[CollectorMemory], Any] | None = default_setup, *, seed: int = 0,
                 nak_policy: str = "once", reporter: Reporter | None = None, **config: Any) -> None:
        self.mem = make_memory(setup, seed)
        self.nic = RoceResponder(self.mem, COLLECTOR_MAC, COLLECTOR_IP, nak_policy=nak_policy,
                                 rng=random.Random(seed + 1))
        config.setdefault("grace_reports", 0)
        self.tr = DTATranslator(TranslatorConfig(self.nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, **config))
        bind(self.nic, self.tr)
        self.q = CollectorQuery(self.mem)
        self.reporter = reporter or Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
        self.emitted: list[bytes] = []  # every RoCEv2 frame the translator produced
        self.nacks: list[bytes] = []
        self.responses: list[bytes] = []

    def send(self, payload: bytes, now: int = 0, drop: Callable[[bytes], bool] | None = None) -> list[bytes]:
        """Report ``payload`` (a UDP payload from a Reporter) at ``now``; returns the NACK frames."""
        return self.deliver(self.tr.on_report(self.reporter.frame(payload), now), now, drop)

    def send_all(self, payloads: Iterable[bytes], now: int = 0, drop=None) -> list[bytes]:
        nacks = []
        for p in payloads:
            nacks += self.send(p, now, drop)
        return nacks

    def timer(self, now: int, drop=None) -> list[bytes]:
        return self.deliver(self.tr.on_timer(now), now, drop)

    def deliver(self, frames: list[bytes], now: int, drop=None) -> list[bytes]:
        """Hand the translator's RoCEv2 ``frames`` to the NIC (and its responses back); returns
        the NACKs the translator left in its actions (taken first, before the responses can
        make it act again)."""
        nacks = [a.data for a in self.tr.actions.take_all() if isinstance(a, Transmit)]
        self.nacks += nacks
        for f in frames:
            assert is_roce_frame(f), "the translator returns RoCEv2 frames only; NACKs are actions"
            self.emitted.append(f)
            if drop is not None and drop(f):
                continue
            for r in self.nic.receive(f, now):
                self.responses.append(r)
                self.deliver(self.tr.on_roce_response(r, now), now, drop)
        return nacks

    def snapshot(self) -> dict[str, bytes]:
        return {name: r.read(0, r.size) for name, r in self.mem.regions.items()}

    def region_writes(self, name: str) -> int:
        return self.mem.region(name).trailer()["writes"]
