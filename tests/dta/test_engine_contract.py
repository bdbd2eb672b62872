"""The DTA engines keep the netstack.engine contract: an ``actions`` queue, ``next_deadline()``,
``counters()``; the translator's NACKs are Transmit actions; its clock starts at ``now_ns``."""

from __future__ import annotations

import json

import pytest

from headers.dta import parse_nack_frame
from netstack.dta import (
    BufferedResponder,
    DTATranslator,
    Reporter,
    SketchReporter,
    TranslatorConfig,
    is_roce_frame,
)
from netstack.engine import ActionQueue, Engine, Transmit

from . import COLLECTOR_IP, MS, REPORTER_IP, REPORTER_MAC, TRANSLATOR_IP, TRANSLATOR_MAC, Rig


def engines(rig: Rig) -> list[Engine]:
    """Every DTA engine class, typed as :class:`Engine` (mypy checks the structural fit)."""
    reporter = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    return [rig.tr, rig.nic, BufferedResponder(rig.nic, capacity=4, service_ns=10), reporter,
            SketchReporter(reporter, 1, 7, 3, 10)]


def test_every_engine_offers_actions_a_deadline_and_json_counters() -> None:
    rig = Rig()
    for engine in engines(rig):
        assert isinstance(engine.actions, ActionQueue) and not engine.actions
        deadline = engine.next_deadline()
        assert deadline is None or isinstance(deadline, int)
        json.dumps(engine.counters())


def test_a_nack_is_a_transmit_action_and_the_return_value_is_rdma_only() -> None:
    rig = Rig(setup=lambda m: m.add_append_list(5, entries=16, batch=1))
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP, retransmittable=True)
    first, _, third = rep.append(5, 1), rep.append(5, 2), rep.append(5, 3)
    out = rig.tr.on_report(rep.frame(first), 0)
    assert len(out) == 1 and all(is_roce_frame(f) for f in out) and not rig.tr.actions
    assert rig.tr.on_report(rep.frame(third), 0) == []  # the second one was lost
    (action,) = rig.tr.actions.take_all()
    assert isinstance(action, Transmit)
    udp, nack = parse_nack_frame(action.data)
    assert nack.seqnum == 0 and udp.ip.dst == REPORTER_IP and udp.eth.dst == REPORTER_MAC
    assert not rig.tr.actions and rig.tr.c.seq_nacks == 1


def test_the_clock_starts_at_now_ns_and_only_calls_move_it() -> None:
    rig = Rig(setup=lambda m: m.add_append_list(5, entries=16, batch=4))
    tr = DTATranslator(TranslatorConfig(rig.nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP,
                                        append_flush_ns=MS), now_ns=10 * MS)
    assert tr.now == 10 * MS
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    tr.on_report(rep.frame(rep.append(5, 1)), 0)  # an earlier now_ns never turns the clock back
    assert tr.now == 10 * MS and tr.next_deadline() == 11 * MS
    with pytest.raises(AttributeError):
        tr.now = 0  # type: ignore[misc]  # read-only on purpose: the clock comes in as now_ns


def test_the_responder_and_buffer_never_act_on_their_own() -> None:
    rig = Rig()
    nic = rig.nic
    buf = BufferedResponder(nic, capacity=1, service_ns=10)
    rep = Reporter(REPORTER_MAC, TRANSLATOR_MAC, REPORTER_IP, COLLECTOR_IP)
    frames = rig.tr.on_report(rep.frame(rep.key_write(1, 2, 2)), 0)
    assert [buf.offer(f, 0) for f in frames] == [True, False]
    assert buf.counters() == {"queued": 1, "served": 0, "overflow_drops": 1}
    assert buf.next_deadline() == 10 and buf.poll(10) == [] and nic.next_deadline() is None
    assert buf.counters() == {"queued": 0, "served": 1, "overflow_drops": 1}
    assert not nic.actions and not buf.actions
