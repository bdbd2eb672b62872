"""The translator's window time-out on a loaded host (docs/dta.md "The window time-out on a
loaded host"): it waits the scheduling slack the live switch daemon passes
(``Switch.set_timer_slack`` -> ``TranslatorFeature.set_timer_slack`` ->
``DTATranslator.set_timer_slack``), so that a collector or a daemon that only waited for the
CPU never rewinds a window."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from netstack.dta import DTATranslator, RoceResponder, TranslatorConfig, TranslatorFeature
from netstack.switch import PortConfig, Switch, SwitchConfig

from . import COLLECTOR_IP, COLLECTOR_MAC, MS, TRANSLATOR_IP, TRANSLATOR_MAC, Rig, make_memory

WINDOW = 8


def setup(m) -> None:
    m.add_keywrite(slots=1 << 10, data_words=1, max_redundancy=4)
    m.add_append_list(1, entries=64, batch=4)


def _full(timeout_ns: int, slack_ns: int) -> Rig:
    """A translator whose Key-Write window is full at time 0 (no ACK ever came back)."""
    rig = Rig(setup, window=WINDOW, window_timeout_ns=timeout_ns, grace_reports=100)
    rig.tr.set_timer_slack(slack_ns)
    for i in range(WINDOW):
        assert len(rig.tr.on_report(rig.reporter.frame(rig.reporter.key_write(i, i, 1)), 0)) == 1
    return rig


@given(timeout_ms=st.integers(1, 100), slack_ms=st.integers(0, 500), frac=st.floats(0.0, 0.999))
def test_no_time_out_before_the_timeout_plus_the_slack(timeout_ms, slack_ms, frac):
    """A full window with no ACK progress for less than window_timeout + slack is still waiting:
    the report is shed (window_dropped), nothing is rewound; at window_timeout + slack it times
    out and the report goes out from una."""
    rig = _full(timeout_ms * MS, slack_ms * MS)
    tr, c = rig.tr, rig.tr.c
    limit = (timeout_ms + slack_ms) * MS
    early = int(frac * limit)
    assert tr.on_report(rig.reporter.frame(rig.reporter.key_write(100, 1, 1)), early) == []
    assert c.window_timeouts == 0 and c.window_dropped == 1 and c.window_rewound == 0
    assert len(tr.on_report(rig.reporter.frame(rig.reporter.key_write(101, 1, 1)), limit)) == 1
    assert c.window_timeouts == 1 and c.window_rewound == WINDOW
    counters = tr.counters()
    assert counters["timer_slack_ns"] == slack_ms * MS and counters["window_timeout_ns"] == limit


@given(timeout_ms=st.integers(1, 100), slack_ms=st.integers(0, 500))
def test_a_waiting_flush_is_due_at_the_timeout_plus_the_slack(timeout_ms, slack_ms):
    """An idle Append batch waiting for room wakes the timer at the slackened time-out."""
    rig = Rig(setup, window=2, window_timeout_ns=timeout_ms * MS, append_flush_ns=MS, grace_reports=100)
    rig.tr.set_timer_slack(slack_ms * MS)
    for i in range(9):  # two batches fill the window; the ninth entry waits
        rig.tr.on_report(rig.reporter.frame(rig.reporter.append(1, i)), 0)
    assert rig.tr.next_deadline() == (timeout_ms + slack_ms) * MS
    assert rig.tr.on_timer((timeout_ms + slack_ms) * MS - 1) == []
    assert rig.tr.c.window_timeouts == 0


def test_no_window_no_time_out_to_show():
    rig = Rig(setup)  # window 0: the public behaviour
    rig.tr.set_timer_slack(7 * MS)
    counters = rig.tr.counters()
    assert counters["window_timeout_ns"] is None and counters["timer_slack_ns"] == 7 * MS
    rig.tr.set_timer_slack(-1)
    assert rig.tr.timer_slack_ns == 0


def _tor() -> tuple[Switch, RoceResponder]:
    nic = RoceResponder(make_memory(setup), COLLECTOR_MAC, COLLECTOR_IP, rng=random.Random(3))
    sw = Switch(SwitchConfig("tor", (PortConfig("to-collector"), PortConfig("p1")), {}))
    return sw, nic


def _translator(nic: RoceResponder) -> DTATranslator:
    return DTATranslator(TranslatorConfig(nic.connect_info(), TRANSLATOR_MAC, TRANSLATOR_IP, window=WINDOW))


def test_the_switch_passes_its_slack_to_the_translator_feature():
    """What the live switch daemon does every 100 ms (daemons/switch.py follow_lag) reaches the
    translator, also one enabled after the slack was set (a re-enable keeps following it)."""
    sw, nic = _tor()
    first = _translator(nic)
    feature = TranslatorFeature(sw, "to-collector", first)
    sw.set_timer_slack(40 * MS)
    assert first.timer_slack_ns == 40 * MS and first.window_timeout_ns() == first.config.window_timeout_ns + 40 * MS
    feature.detach()
    second = _translator(nic)
    TranslatorFeature(sw, "to-collector", second)
    assert second.timer_slack_ns == 40 * MS
    sw.set_timer_slack(0)
    assert second.timer_slack_ns == 0 and second.window_timeout_ns() == second.config.window_timeout_ns
