"""DCQCN's reaction point with TCD's hold (netstack.tcd.dcqcn.RateSender): the cut, alpha, the
increase phases, CNP-UE (TCD spec item: a DCQCN RP that gets a CNP-UE keeps Rc and does not
increase in that interval), pacing, FIN and the flow's limits, burst mode, invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headers.errors import HeaderError
from headers.tcd import CnpKind, TcdCnp, TcdData
from netstack.ethernet import UDP_HEADERS_BYTES, line_time_exact_ns
from netstack.tcd.dcqcn import RATE_LOG_MAX, DcqcnParamError, DcqcnParams, RateSender

MS = 1_000_000
GBIT = 1_000_000_000
#: 1 Gbit/s, 1 ms timers, a byte counter that never fires, F = 5
P = DcqcnParams(line_rate_bps=GBIT, r_min_bps=1_000_000, g=1 / 16, alpha0=0.5, alpha_timer_ns=MS, rate_timer_ns=MS,
                byte_counter_bytes=10**12, f_stages=5, r_ai_bps=10_000_000, r_hai_bps=50_000_000,
                cnp_interval_ns=MS, burst_ns=2 * MS)
CE = TcdCnp(1, CnpKind.CE).to_bytes()
UE = TcdCnp(1, CnpKind.UE).to_bytes()
FAR = 10**15  # a start so late that nothing is sent: only CNPs and timers move the state


def idle(mode: str = "dcqcn", params: DcqcnParams = P, **kw) -> RateSender:
    return RateSender(params, flow=1, mode=mode, start_ns=FAR, now_ns=0, **kw)


def drain(s: RateSender, until: int) -> list[tuple[int, TcdData, int]]:
    """Poll at every deadline up to ``until``: (time polled, header, size) per packet."""
    out = []
    while not s.done and (d := s.next_deadline()) is not None and d <= until:
        out += [(d, TcdData.from_bytes(b), len(b)) for b in s.poll(d)]
    return out


# ----------------------------------------------------------------------------------- params
def test_params_defaults_and_scaling():
    p = DcqcnParams()
    assert (p.line_rate_bps, p.g, p.alpha0, p.alpha_timer_ns, p.rate_timer_ns, p.byte_counter_bytes,
            p.f_stages, p.r_ai_bps, p.cnp_interval_ns) == (40 * GBIT, 1 / 256, 1.0, 55_000, 55_000, 10_000_000,
                                                           5, 40_000_000, 50_000)
    assert DcqcnParams.scaled(40 * GBIT, 1) == p
    s = DcqcnParams.scaled(40_000_000, 1000)  # the live testbed: rates /1000, times x1000, bytes as they are
    assert (s.line_rate_bps, s.r_ai_bps, s.r_hai_bps, s.r_min_bps) == (40_000_000, 40_000, 200_000, 100_000)
    assert (s.alpha_timer_ns, s.rate_timer_ns, s.cnp_interval_ns) == (55 * MS, 55 * MS, 50 * MS)
    assert s.byte_counter_bytes == p.byte_counter_bytes and s.g == p.g
    assert DcqcnParams.scaled(40_000_000, 1000, f_stages=3).f_stages == 3
    assert DcqcnParams().to_dict()["clamp_target"] is True


@pytest.mark.parametrize(("kw", "field"), [
    ({"line_rate_bps": 0}, "line_rate_bps"), ({"r_min_bps": 0}, "r_min_bps"),
    ({"r_min_bps": 50 * GBIT}, "r_min_bps"), ({"g": 0}, "g"), ({"g": 1.5}, "g"), ({"alpha0": -0.1}, "alpha0"),
    ({"alpha0": float("nan")}, "alpha0"), ({"rate_timer_ns": 0}, "rate_timer_ns"), ({"f_stages": 0}, "f_stages"),
    ({"byte_counter_bytes": 0}, "byte_counter_bytes"), ({"r_ai_bps": -1}, "r_ai_bps"),
    ({"clamp_target": 1}, "clamp_target"), ({"cnp_interval_ns": 1.5}, "cnp_interval_ns"),
])
def test_params_are_checked(kw, field):
    with pytest.raises(DcqcnParamError) as e:
        DcqcnParams(**kw)
    assert isinstance(e.value, ValueError) and e.value.field == field and field in str(e.value)


def test_scaled_refuses_unknown_overrides_and_bad_scale():
    with pytest.raises(DcqcnParamError, match="nope"):
        DcqcnParams.scaled(GBIT, 1, nope=1)
    with pytest.raises(DcqcnParamError, match="time_scale"):
        DcqcnParams.scaled(GBIT, 0)


@pytest.mark.parametrize(("kw", "field"), [
    ({"mode": "reno"}, "mode"), ({"flow": 1 << 16}, "flow"), ({"payload": 15}, "payload"),
    ({"size_bytes": 0}, "size_bytes"), ({"duration_ns": 0}, "duration_ns"), ({"rate_bps": 2 * GBIT}, "rate_bps"),
    ({"rate_bps": 10}, "rate_bps"), ({"burst_bytes": 1000}, "burst_bytes"),
    ({"burst_bytes": 1000, "burst_period_ns": 0}, "burst_period_ns"),
])
def test_sender_settings_are_checked(kw, field):
    args = {"flow": 1, "now_ns": 0} | kw
    with pytest.raises(DcqcnParamError) as e:
        RateSender(P, **args)
    assert e.value.field == field


# -------------------------------------------------------------------------------- the cut
def test_cut_formula_and_alpha_update():
    s = idle()
    assert s.rc == s.rt == GBIT and s.alpha == 0.5
    s.receive(CE, 0)
    a1 = (1 - P.g) * 0.5 + P.g
    assert s.alpha == pytest.approx(a1) and s.rc == pytest.approx(GBIT * (1 - a1 / 2)) and s.rt == GBIT
    rc1 = s.rc
    s.receive(CE, 10)  # a second CNP right away (no decay yet)
    a2 = (1 - P.g) * a1 + P.g
    assert s.alpha == pytest.approx(a2) and s.rc == pytest.approx(rc1 * (1 - a2 / 2)) and s.rt == rc1
    c = s.counters()
    assert (c["rate_cuts"], c["cnps_ce"], c["cnps_rx"]) == (2, 2, 2) and c["min_rc_bps"] == round(s.rc)


def test_dcqcn_alpha_starts_at_one_so_the_first_cut_halves():
    s = idle(params=DcqcnParams.scaled(GBIT, 1))
    s.receive(CE, 0)
    assert s.alpha == 1.0 and s.rc == GBIT / 2


def test_rate_never_goes_below_rmin():
    s = idle(params=DcqcnParams(line_rate_bps=GBIT, r_min_bps=300_000_000, alpha0=1.0))
    for t in range(5):
        s.receive(CE, t)
    assert s.rc == 300_000_000


def test_without_clamp_the_target_moves_only_after_an_increase():
    s = idle(params=DcqcnParams(**{**P.to_dict(), "clamp_target": False}))
    s.receive(CE, 0)
    s.receive(CE, 1)
    assert s.rt == GBIT  # no increase between the cuts: Rt stays
    s.on_timer(MS + 1)  # one fast-recovery step, 1 ms after the last cut
    rc = s.rc
    assert s.counters()["fast_recovery"] == 1
    s.receive(CE, MS + 2)
    assert s.rt == rc


def test_alpha_decays_once_per_timer_without_cnp():
    s = idle()
    s.receive(CE, 0)
    a = s.alpha
    s.on_timer(MS - 1)
    assert s.alpha == a
    s.on_timer(3 * MS + 5)
    assert s.alpha == pytest.approx(a * (1 - P.g) ** 3) and s.counters()["alpha_decays"] == 3
    s.receive(CE, 3 * MS + 10)  # a CNP restarts the alpha timer
    a = s.alpha
    s.on_timer(4 * MS + 5)
    assert s.alpha == a


# ---------------------------------------------------------------------------- increase
def _reference_step(rc: float, rt: float, ts: int, bs: int, p: DcqcnParams) -> tuple[float, float]:
    """DCQCN's increase rules, written out once more: fast recovery, additive, hyper."""
    f = p.f_stages
    if max(ts, bs) < f:
        pass
    elif min(ts, bs) < f:
        rt = min(p.line_rate_bps, rt + p.r_ai_bps)
    else:
        rt = min(p.line_rate_bps, rt + (min(ts, bs) - f + 1) * p.r_hai_bps)
    return min(p.line_rate_bps, (rt + rc) / 2), rt


def test_fast_recovery_then_additive_increase_on_the_timer():
    s = idle(params=DcqcnParams(**{**P.to_dict(), "alpha0": 1.0}))
    s.receive(CE, 0)
    rc, rt = s.rc, s.rt
    assert (rc, rt) == (GBIT / 2, GBIT)
    for k in range(1, 9):
        s.on_timer(k * MS)
        rc, rt = _reference_step(rc, rt, k, 0, s.params)
        assert (s.rc, s.rt) == pytest.approx((rc, rt)), k
    c = s.counters()
    assert (c["fast_recovery"], c["additive_increase"], c["hyper_increase"], c["timer_events"]) == (4, 4, 0, 8)
    assert s.rc > GBIT / 2 and s.rt == GBIT  # Rt is capped at the line rate


def test_hyper_increase_once_both_counters_pass_f():
    # every packet is a byte event; the timer is slow: byte stages first (fast recovery, then AI),
    # then the timer's stages reach F and both counters are past it: hyper increase, i = min - F + 1
    p = DcqcnParams(line_rate_bps=GBIT, r_min_bps=1_000_000, alpha0=1.0, rate_timer_ns=1000 * MS,
                    alpha_timer_ns=1000 * MS, byte_counter_bytes=1000, f_stages=5, r_ai_bps=1_000_000,
                    r_hai_bps=3_000_000)
    s = RateSender(p, flow=1, now_ns=0)
    drain(s, 0)  # the first packet
    s.receive(CE, 1)
    s.receive(CE, 2)
    s.receive(CE, 3)  # well below the line rate, so that the steps show
    rc, rt = s.rc, s.rt
    ts = bs = 0
    t = 4
    for _ in range(7):  # 7 packets: 7 byte events
        sent = s.poll(t := max(t, s.next_deadline()))
        assert len(sent) == 1
        bs += 1
        rc, rt = _reference_step(rc, rt, ts, bs, p)
        assert (s.rc, s.rt) == pytest.approx((rc, rt))
    first_timer = 3 + p.rate_timer_ns
    for k in range(6):  # 6 timer events, none of them overtaken by a packet (nothing polls)
        s.on_timer(first_timer + k * p.rate_timer_ns)
        ts += 1
        rc, rt = _reference_step(rc, rt, ts, bs, p)
        assert (s.rc, s.rt) == pytest.approx((rc, rt)), k
    c = s.counters()
    assert c["fast_recovery"] == 4 and c["additive_increase"] == 3 + 4 and c["hyper_increase"] == 2
    assert (c["time_stage"], c["byte_stage"]) == (6, 7)


def test_a_long_idle_spell_costs_one_step():
    s = idle()
    s.receive(CE, 0)
    s.on_timer(3_600 * 10**9)  # an hour of 1 ms events
    c = s.counters()
    assert s.rc == GBIT and s.rt == GBIT and c["timer_events"] == 3_600_000
    assert c["fast_recovery"] + c["additive_increase"] + c["hyper_increase"] < 1000


# ----------------------------------------------------------------------------- CNP-UE
def _after_some_recovery(mode: str) -> RateSender:
    s = idle(mode)
    s.receive(CE, 0)
    s.on_timer(2 * MS)  # two fast-recovery steps
    return s


def test_cnp_ue_holds_the_rate_in_tcd_mode_and_suppresses_the_increase():
    s = _after_some_recovery("dcqcn+tcd")
    t = 2 * MS + MS // 2
    s.on_timer(t)
    rc, rt, alpha = s.rc, s.rt, s.alpha
    s.receive(UE, t)
    assert (s.rc, s.rt, s.alpha) == (rc, rt, alpha)  # no cut, alpha not raised
    s.on_timer(t + MS - 1)  # the step due at 3 ms did not happen: the timer restarted at t
    assert (s.rc, s.rt) == (rc, rt)
    s.on_timer(t + MS)
    assert s.rc > rc  # the next interval without a CNP-UE increases again
    c = s.counters()
    assert (c["holds"], c["cnps_ue"], c["rate_cuts"]) == (1, 1, 1)


def test_a_steady_stream_of_cnp_ue_keeps_the_rate_for_good():
    s = _after_some_recovery("dcqcn+tcd")
    rc, rt = s.rc, s.rt
    for k in range(1, 200):  # one CNP-UE per NP interval (< the increase timer)
        s.receive(UE, 2 * MS + k * (MS - 1))
    assert (s.rc, s.rt) == (rc, rt)
    assert s.alpha < 0.6  # alpha only decays meanwhile


def test_cnp_ue_cuts_in_plain_dcqcn_mode():
    s = _after_some_recovery("dcqcn")
    rc = s.rc
    s.receive(UE, 2 * MS + 1)
    assert s.rc < rc and s.counters()["rate_cuts"] == 2 and s.counters()["holds"] == 0


def test_fixed_mode_counts_cnps_and_ignores_them():
    s = RateSender(P, flow=1, mode="fixed", rate_bps=100_000_000, now_ns=0)
    for t, d in enumerate((CE, UE, CE)):
        s.receive(d, t)
    c = s.counters()
    assert s.rc == 100_000_000 and (c["cnps_ce"], c["cnps_ue"], c["rate_cuts"], c["holds"]) == (2, 1, 0, 0)


def test_another_flows_cnp_changes_nothing():
    s = idle()
    s.receive(TcdCnp(2).to_bytes(), 0)
    assert s.rc == GBIT and s.counters()["cnps_foreign"] == 1 and s.check_counters() == {"cnps_foreign": 1}


@given(data=st.binary(max_size=48))
def test_garbage_raises_only_header_error(data):
    s = idle()
    try:
        s.receive(data, 0)
    except HeaderError:
        assert s.counters()["cnps_rx"] == 0


# ----------------------------------------------------------------------------- pacing
def test_pacing_at_the_rate_polled_at_the_deadlines_or_every_millisecond():
    rate = 10_000_000
    gap = line_time_exact_ns(UDP_HEADERS_BYTES + 1000, rate)
    a = RateSender(P, flow=1, mode="fixed", rate_bps=rate, now_ns=0)
    exact = drain(a, 10**9)
    assert len(exact) == math.floor(10**9 / gap) + 1
    assert all(abs(h.send_ts_ns - i * gap) <= 1 for i, (_, h, _) in enumerate(exact))
    b = RateSender(P, flow=1, mode="fixed", rate_bps=rate, now_ns=0)
    coarse = sum(len(b.poll(t)) for t in range(0, 10**9 + 1, MS))
    assert abs(coarse - len(exact)) <= 2


def test_a_late_poll_releases_a_bounded_batch():
    s = RateSender(P, flow=1, mode="fixed", rate_bps=GBIT, now_ns=0)
    batch = s.poll(100 * MS)  # 100 ms late: 2 ms of credit at most, 64 packets per call
    assert len(batch) == 64
    assert TcdData.from_bytes(batch[0]).send_ts_ns >= 98 * MS


def test_size_limit_fin_and_done():
    s = RateSender(P, flow=7, mode="fixed", rate_bps=GBIT, size_bytes=10_500, now_ns=5)
    sent = drain(s, 10**9)
    assert [n for *_, n in sent] == [1000] * 10 + [500]
    assert [h.seq for _, h, _ in sent] == list(range(11)) and [h.fin for _, h, _ in sent] == [False] * 10 + [True]
    assert all(h.flow == 7 for _, h, _ in sent)
    assert s.done and s.done_ns == sent[-1][1].send_ts_ns and s.next_deadline() is None and s.poll(10**10) == []
    assert s.counters()["bytes_sent"] == 10_500
    tiny = RateSender(P, flow=1, size_bytes=1005, now_ns=0)
    assert [n for *_, n in drain(tiny, 10**9)] == [1000, 16]  # a remainder under the header: 16 bytes


def test_duration_limit_ends_with_fin_before_the_end():
    rate = 10_000_000
    gap = line_time_exact_ns(UDP_HEADERS_BYTES + 1000, rate)
    s = RateSender(P, flow=1, mode="fixed", rate_bps=rate, duration_ns=100 * MS, start_ns=7 * MS, now_ns=0)
    assert s.poll(7 * MS - 1) == [] and s.next_deadline() == 7 * MS
    sent = drain(s, 10**9)
    assert len(sent) == math.ceil(100 * MS / gap) and sent[-1][1].fin and not any(h.fin for _, h, _ in sent[:-1])
    assert sent[-1][1].send_ts_ns < 107 * MS <= sent[-1][1].send_ts_ns + gap


def test_a_poll_after_the_end_still_sends_the_fin():
    s = RateSender(P, flow=1, mode="fixed", rate_bps=10_000_000, duration_ns=10 * MS, now_ns=0)
    s.poll(0)
    late = [TcdData.from_bytes(b) for b in s.poll(60 * MS)]
    assert late and late[-1].fin and s.done


def test_burst_mode():
    s = RateSender(P, flow=1, mode="fixed", rate_bps=GBIT, burst_bytes=5000, burst_period_ns=10 * MS,
                   duration_ns=50 * MS, now_ns=0)
    sent = drain(s, 10**9)
    times = [h.send_ts_ns for _, h, _ in sent]
    assert len(sent) == 25 and sent[-1][1].fin
    for b in range(5):
        burst = times[5 * b:5 * b + 5]
        assert burst[0] == b * 10 * MS and burst[-1] - burst[0] < 100_000  # back to back at 1 Gbit/s


def test_rate_log_records_changes_and_stays_bounded():
    s = idle()
    s.receive(CE, 0)
    assert s.rate_log == [(FAR, GBIT), (0, round(s.rc))]
    for t in range(1, 3 * RATE_LOG_MAX):
        s.receive(CE if t % 2 else UE, t * MS)
        s.on_timer(t * MS + MS // 2)
    assert len(s.rate_log) < RATE_LOG_MAX and s.rate_log[0] == (FAR, GBIT)
    assert [t for t, _ in s.rate_log[1:]] == sorted(t for t, _ in s.rate_log[1:])


# ------------------------------------------------------------------------------ invariants
ops = st.lists(st.tuples(st.sampled_from(["ce", "ue", "timer", "poll", "foreign"]), st.integers(0, 3 * MS)),
               max_size=60)


@given(ops=ops, mode=st.sampled_from(["dcqcn", "dcqcn+tcd"]), clamp=st.booleans(),
       byte_counter=st.sampled_from([1000, 5000, 10**9]))
def test_any_interleaving_keeps_the_rates_and_alpha_in_range(ops, mode, clamp, byte_counter):
    p = DcqcnParams(**{**P.to_dict(), "clamp_target": clamp, "byte_counter_bytes": byte_counter,
                       "r_min_bps": 50_000_000})
    s = RateSender(p, flow=1, mode=mode, now_ns=0)
    t = 0
    for op, dt in ops:
        t += dt
        if op == "ce":
            s.receive(CE, t)
        elif op == "ue":
            s.receive(UE, t)
        elif op == "foreign":
            s.receive(TcdCnp(9).to_bytes(), t)
        elif op == "timer":
            s.on_timer(t)
        else:
            for d in s.poll(t):
                assert len(d) == 1000
        assert p.r_min_bps <= s.rc <= p.line_rate_bps and s.rc <= s.rt <= p.line_rate_bps
        assert 0.0 <= s.alpha <= 1.0
    c = s.counters()
    assert c["cnps_rx"] == c["cnps_ce"] + c["cnps_ue"]
    assert c["rate_cuts"] + c["holds"] == c["cnps_rx"]
    assert (c["holds"] == 0) if mode == "dcqcn" else (c["rate_cuts"] == c["cnps_ce"])
