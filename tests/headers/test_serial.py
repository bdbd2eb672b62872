"""headers/serial.py: RFC 1982 serial-number arithmetic, once, for every width the protocols use.

The properties hold for any width; each runs per width so that every one gets its own examples,
with strategies leaning on the points that matter (0, the half-way point, the wrap). The last
part checks every former copy's public name against the code it replaced, for that caller's
width: the old bodies are kept below as the oracles (headers.tcsack's and headers.onepipe's, the
same functions over their own constants, once with the constants as arguments).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headers import linkguardian, onepipe, serial, tcsack
from headers.serial import W8, W16, W17, W24, W32, W48, width
from netstack.onepipe import endpoint
from netstack.tcsack import common

#: the widths in use (module docstring of headers/serial.py), and a few odd ones
WIDTHS = (8, 16, 17, 24, 32, 48)
ODD = (1, 2, 3, 5, 64)


def _near(bits: int) -> st.SearchStrategy[int]:
    """Ints near 0, the half-way point and the wrap, on any turn of the circle (unreduced too)."""
    space = 1 << bits
    anchors = st.sampled_from((0, space >> 1, space, -space, -(space >> 1)))
    close = st.builds(lambda a, turn, d: a + turn * space + d, anchors, st.integers(-3, 3), st.integers(-3, 3))
    return close | st.integers(-(4 << bits), 4 << bits)


def _offset(bits: int) -> st.SearchStrategy[int]:
    """A distance in the unwrap window ``[-half, half)``, its edges included."""
    half = 1 << (bits - 1)
    return st.sampled_from((-half, -half + 1, -1, 0, 1, half - 2, half - 1)).filter(
        lambda d: -half <= d < half) | st.integers(-half, half - 1)


def _draw_pair(data: st.DataObject, bits: int) -> tuple[serial.Width, int, int]:
    return width(bits), data.draw(_near(bits)), data.draw(_near(bits))


def _interesting(bits: int) -> list[int]:
    """The edges (0, 1, half - 1, half, half + 1, the wrap) and their negatives, on a few turns."""
    space, half = 1 << bits, 1 << (bits - 1)
    return sorted({v % (4 * space) - 2 * space
                   for c in (0, 1, half - 1, half, half + 1, space - 1, space, 3 * space + 5)
                   for v in (c, -c)})


@pytest.mark.parametrize("bits", WIDTHS + ODD)
def test_the_constants(bits):
    w = width(bits)
    assert (w.bits, w.space, w.mask, w.half) == (bits, 2 ** bits, 2 ** bits - 1, 2 ** (bits - 1))
    assert width(bits) is w  # one set of functions per width
    assert w.unwrap.__name__ == f"unwrap{bits}" and w.lt.__qualname__ == f"lt{bits}"


def test_the_named_widths_are_the_cached_ones():
    assert [w.bits for w in (W8, W16, W17, W24, W32, W48)] == list(WIDTHS)
    assert all(width(w.bits) is w for w in (W8, W16, W17, W24, W32, W48))


@pytest.mark.parametrize("bad", [0, -1, 2.0, "8", True, None])
def test_a_width_is_a_positive_int(bad):
    with pytest.raises(ValueError):
        width(bad)


@pytest.mark.parametrize("bits", WIDTHS + ODD)
@given(data=st.data())
def test_unwrap_recovers_every_value_in_the_window(bits, data):
    x, d = data.draw(_near(bits)), data.draw(_offset(bits))
    w = width(bits)
    r = x - d  # x lies d from r, d in [-half, half): the window, both edges
    assert w.unwrap(x & w.mask, r) == x
    assert w.unwrap(x, r) == x  # unreduced wire values too
    assert w.diff(x, r) == d
    # and the era form: the top bit apart from the rest
    assert w.unwrap_era((x & w.mask) >> (bits - 1), x & (w.half - 1), r) == x


@pytest.mark.parametrize("bits", WIDTHS + ODD)
@given(data=st.data())
def test_diff_is_antisymmetric_but_at_the_half_way_point(bits, data):
    w, a, b = _draw_pair(data, bits)
    d = w.diff(a, b)
    assert -w.half <= d < w.half and (d - (a - b)) % w.space == 0
    if (a - b) % w.space == w.half:
        assert d == w.diff(b, a) == -w.half  # behind, both ways
    else:
        assert w.diff(b, a) == -d


@pytest.mark.parametrize("bits", WIDTHS + ODD)
@given(data=st.data())
def test_the_comparisons_follow_diff_and_unwrap(bits, data):
    w, a, b = _draw_pair(data, bits)
    d = w.diff(a, b)
    assert w.lt(a, b) == (d < 0) and w.le(a, b) == (d <= 0)
    assert w.gt(a, b) == w.lt(b, a) and w.ge(a, b) == w.le(b, a)
    # as absolute values: unwrap a near b and compare plainly
    u = w.unwrap(a, b)
    assert w.lt(a, b) == (u < b) and w.le(a, b) == (u <= b)
    assert w.later(a, b) == (b if u < b else a) % w.space
    assert w.earlier(a, b) == (a if u < b else b) % w.space
    assert w.add(a, b) == (a + b) % w.space


@pytest.mark.parametrize("bits", WIDTHS)
@given(data=st.data())
def test_comparisons_are_exact_on_absolute_values_less_than_half_apart(bits, data):
    x, d = data.draw(_near(bits)), data.draw(_offset(bits))
    w = width(bits)
    y = x + d
    if d == -w.half:
        return  # the half-way point: the rule, pinned in its own test
    m = w.mask
    assert w.lt(y & m, x & m) == (y < x) and w.le(y & m, x & m) == (y <= x)
    assert w.gt(y & m, x & m) == (y > x) and w.ge(y & m, x & m) == (y >= x)
    assert w.diff(w.add(x & m, d), x) == d


@pytest.mark.parametrize("bits", WIDTHS + ODD)
def test_the_half_way_point_is_behind(bits):
    w = width(bits)
    for r in (0, 1, w.half, w.mask, w.space, -7 * w.space - 1):
        a = r + w.half
        assert w.diff(a, r) == w.diff(r, a) == -w.half
        assert w.lt(a, r) and w.lt(r, a) and w.gt(a, r) and w.gt(r, a)
        assert w.le(a, r) and w.le(r, a) and w.ge(a, r) and w.ge(r, a)
        assert w.unwrap(a, r) == r - w.half  # below, never r + half
        assert w.later(a, r) == r % w.space and w.earlier(a, r) == a % w.space


@pytest.mark.parametrize("bits", WIDTHS + ODD)
def test_wrap_around_at_the_boundaries(bits):
    w = width(bits)
    top = w.mask
    assert w.unwrap(top, 0) == -1 and w.unwrap(top, w.space) == w.space - 1
    assert w.add(top, 1) == 0 and w.add(0, -1) == top
    if bits > 1:  # one bit: 0 and 1 are half apart, the rule above
        assert w.unwrap(0, top) == w.space and w.diff(0, top) == 1 and w.diff(top, 0) == -1
        assert w.lt(top, 0) and w.gt(0, top) and w.later(top, 0) == 0 and w.earlier(0, top) == top
    assert w.unwrap(w.half - 1, 0) == w.half - 1 and w.unwrap(w.half, 0) == -w.half


@pytest.mark.parametrize("bits", (1, 2, 3, 4, 5, 6))
def test_small_widths_exhaustively(bits):
    w = width(bits)
    for a, b in itertools.product(range(-w.space, 2 * w.space), repeat=2):
        d = (a - b) % w.space
        assert w.diff(a, b) == (d - w.space if d >= w.half else d)
        assert w.unwrap(a, b) == b + w.diff(a, b)


@pytest.mark.parametrize("bits", WIDTHS + ODD)
@given(data=st.data())
def test_the_module_functions_are_the_widths(bits, data):
    w, a, b = _draw_pair(data, bits)
    assert serial.diff(a, b, bits) == w.diff(a, b) and serial.unwrap(a, b, bits) == w.unwrap(a, b)
    assert (serial.lt(a, b, bits), serial.le(a, b, bits), serial.gt(a, b, bits), serial.ge(a, b, bits)) \
        == (w.lt(a, b), w.le(a, b), w.gt(a, b), w.ge(a, b))
    assert serial.add(a, b, bits) == w.add(a, b)


# --- agreement with the code each caller had before (the oracles, as they were) -----------------

_LG_SEQ_SPACE = 65536
_LG_HALF = _LG_SEQ_SPACE // 2
_LG_MASK = _LG_SEQ_SPACE - 1
_LG_ERA_SPACE = 2 * _LG_SEQ_SPACE
_LG_ERA_MASK = _LG_ERA_SPACE - 1


def _old_lg_unwrap(era: int, seq: int, reference: int) -> int:
    d = ((era << 16 | seq) - reference) & _LG_ERA_MASK
    if d >= _LG_SEQ_SPACE:
        d -= _LG_ERA_SPACE
    return reference + d


def _old_lg_unwrap_seq(seq: int, reference: int) -> int:
    d = (seq - reference) & _LG_MASK
    if d >= _LG_HALF:
        d -= _LG_SEQ_SPACE
    return reference + d


def _old_lg_seq_distance(from_era: int, from_seq: int, to_era: int, to_seq: int) -> int:
    d = ((to_era << 16 | to_seq) - (from_era << 16 | from_seq)) & _LG_ERA_MASK
    return d - _LG_ERA_SPACE if d >= _LG_SEQ_SPACE else d


@given(era=st.integers(0, 1), seq=st.integers(0, _LG_MASK), era2=st.integers(0, 1), seq2=st.integers(0, _LG_MASK),
       reference=_near(17))
def test_linkguardian_as_before(era, seq, era2, seq2, reference):
    assert linkguardian.unwrap(era, seq, reference) == _old_lg_unwrap(era, seq, reference)
    assert linkguardian.unwrap_seq(seq, reference) == _old_lg_unwrap_seq(seq, reference)
    assert linkguardian.seq_distance(era, seq, era2, seq2) == _old_lg_seq_distance(era, seq, era2, seq2)


def test_linkguardian_as_before_at_the_edges():
    for r in _interesting(17):
        for era, seq in itertools.product((0, 1), (0, 1, _LG_HALF - 1, _LG_HALF, _LG_HALF + 1, _LG_MASK)):
            assert linkguardian.unwrap(era, seq, r) == _old_lg_unwrap(era, seq, r)
            assert linkguardian.unwrap_seq(seq, r) == _old_lg_unwrap_seq(seq, r)


def _old_family(mod: int) -> dict[str, Callable[[int, int], int]]:
    """headers.tcsack's ``seq_*`` (mod 2^32) and headers.onepipe's ``ts_*`` (mod 2^48) as they
    were: the same functions, each module over its own MOD, MASK = MOD - 1 and HALF."""
    mask, half = mod - 1, mod >> 1

    def diff(a: int, b: int) -> int:
        d = (a - b) & mask
        return d - mod if d >= half else d

    def lt(a: int, b: int) -> bool:
        return ((a - b) & mask) >= half

    def le(a: int, b: int) -> bool:
        d = (a - b) & mask
        return d == 0 or d >= half

    return {"add": lambda seq, delta: (seq + delta) & mask, "diff": diff, "lt": lt, "le": le,
            "gt": lambda a, b: lt(b, a), "ge": lambda a, b: le(b, a),
            "max": lambda a, b: (b if lt(a, b) else a) & mask, "min": lambda a, b: (a if lt(a, b) else b) & mask,
            "unwrap": lambda ts, reference: reference + diff(ts, reference)}  # (ts_unwrap; no seq_unwrap)


def _check_family(module: object, prefix: str, old: dict[str, Callable[[int, int], int]], a: int, b: int) -> None:
    for op, was in old.items():
        now = getattr(module, prefix + op, None)
        assert (now is None and op == "unwrap") or now(a, b) == was(a, b), (prefix + op, a, b)


_FAMILIES = pytest.mark.parametrize(("module", "prefix", "bits"), [(tcsack, "seq_", 32), (onepipe, "ts_", 48)])


@_FAMILIES
@given(data=st.data())
def test_the_seq_and_ts_helpers_as_before(module, prefix, bits, data):
    _check_family(module, prefix, _old_family(1 << bits), data.draw(_near(bits)), data.draw(_near(bits)))


@_FAMILIES
def test_the_seq_and_ts_helpers_as_before_at_the_edges(module, prefix, bits):
    old = _old_family(1 << bits)
    for a, b in itertools.product(_interesting(bits), repeat=2):
        _check_family(module, prefix, old, a, b)


_SEQ_MOD = 1 << 32
_SEQ_MASK = _SEQ_MOD - 1
_SEQ_HALF = 1 << 31
_old_seq_diff = _old_family(_SEQ_MOD)["diff"]


def _old_tcsack_unwrap(wire: int, ref: int) -> int:
    return ref + _old_seq_diff(wire, ref & _SEQ_MASK)


def _old_us_before(a: int, b: int) -> bool:
    return a != b and ((a - b) & 0xFFFFFFFF) >= 1 << 31


def _old_psn_unwrap(wire: int, ref: int) -> int:
    d = (wire - ref) & _SEQ_MASK
    return ref + (d - _SEQ_MOD if d >= _SEQ_HALF else d)


def _old_rtt(now_us: int, tsecr: int, ack_delay: int) -> int | None:
    rtt = (now_us - tsecr - ack_delay) & 0xFFFFFFFF
    return rtt if rtt < 1 << 31 else None


def _new_rtt(now_us: int, tsecr: int, ack_delay: int) -> int | None:  # what SenderBase.receive writes out
    rtt = W32.diff(now_us, tsecr + ack_delay)
    return rtt if rtt >= 0 else None


def _check_32(a: int, b: int) -> None:
    assert common.unwrap(a, b) == _old_tcsack_unwrap(a, b)
    assert common.us_before(a, b) == _old_us_before(a, b)
    assert endpoint.psn_unwrap(a, b) == _old_psn_unwrap(a, b)
    assert _new_rtt(a, b, 7) == _old_rtt(a, b, 7)
    if (a - b) % _SEQ_MOD:  # DTA's sketch columns: a column ahead of the expected one is a gap
        assert (W32.diff(a, b) > 0) == ((a - b) & 0xFFFFFFFF < 1 << 31)


_PSN_MASK = 0xFFFFFF
_PSN_HALF = 1 << 23


def _old_collector_verdict(psn: int, epsn: int) -> str:
    d = (psn - epsn) & _PSN_MASK
    if d:
        return "sequence error" if d < _PSN_HALF else "duplicate"
    return "execute"


def _new_collector_verdict(psn: int, epsn: int) -> str:  # RoceResponder's request check
    d = W24.diff(psn, epsn)
    if d:
        return "sequence error" if d > 0 else "duplicate"
    return "execute"


def _check_24(a: int, b: int) -> None:
    assert _new_collector_verdict(a, b) == _old_collector_verdict(a, b)
    # the requester moving its PSN up to una: "una strictly ahead", never at the half-way point
    assert (W24.diff(a, b) > 0) == (0 < (a - b) & _PSN_MASK < _PSN_HALF)



#: the engines' 32-bit numbers (T/C-SACK, 1Pipe PSNs, DTA sketch columns) and DTA's 24-bit PSNs
_ENGINES = pytest.mark.parametrize(("check", "bits"), [(_check_32, 32), (_check_24, 24)])


@_ENGINES
@given(data=st.data())
def test_the_engines_numbers_as_before(check, bits, data):
    check(data.draw(_near(bits)), data.draw(_near(bits)))


@_ENGINES
def test_the_engines_numbers_as_before_at_the_edges(check, bits):
    for a, b in itertools.product(_interesting(bits), repeat=2):
        check(a, b)


def test_dta_report_seqnums_as_before():
    for a, b in itertools.product(range(256), repeat=2):  # the reporter's 8-bit "after the NACK's seqnum"
        assert (W8.diff(a, b) > 0) == (0 < (a - b) & 0xFF < 128)


def test_the_callers_use_the_shared_functions():
    """Aliases, not copies: the data path pays one call, as before."""
    assert linkguardian.unwrap is W17.unwrap_era and linkguardian.unwrap_seq is W16.unwrap
    assert common.unwrap is W32.unwrap and common.us_before is W32.lt and endpoint.psn_unwrap is W32.unwrap
    assert tcsack.seq_diff is W32.diff and onepipe.ts_unwrap is W48.unwrap and onepipe.ts_lt is W48.lt
