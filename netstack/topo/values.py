"""The quantities a topology file writes as text (rates, delays, sizes, clock offsets and drifts,
probabilities), parsed, and their upper bounds (docs/topology.md "Bounds"). Each parser returns
the value or raises ValueError with the text that goes after ``path: `` in the file's
:class:`~netstack.topo.classes.TopologyError`; :func:`show` quotes a value as every problem
does. The command line parses its quantities with the same functions (netstack/argtypes.py)."""

from __future__ import annotations

import re
from typing import Any

#: Resolution of the nft impairment backend (``numgen random mod 1000000``).
NFT_RESOLUTION = 1e-6

# Upper bounds (docs/topology.md "Bounds"): far above anything a test bed asks for, low
# enough that every quantity derived from them is a finite, modest integer and that no
# daemon can be told to hold more than 16 GiB for one port.
#: 10 Tbit/s: 6x the fastest Ethernet standard (1.6T); a userspace switch paces a few Gbit/s.
MAX_RATE_BPS = 10**13
#: 1 hour: a datacenter link has microseconds, a satellite hop a quarter of a second.
MAX_DELAY_NS = 3600 * 10**9
#: 16 GiB: ~780x a Tofino's whole 22 MB packet buffer; also bounds xoff/xon/ecn_threshold.
MAX_SIZE_BYTES = 16 * 2**30
#: rate x delay / 8 of one link: the bytes its sending switch holds while they propagate.
MAX_IN_FLIGHT_BYTES = MAX_SIZE_BYTES
#: A host clock's offset from the true time, either way: the bound of ``delay`` (an hour; PTP
#: keeps real clocks within a microsecond).
MAX_CLOCK_OFFSET_NS = MAX_DELAY_NS
#: A host clock's drift: 1 % (a quartz oscillator drifts by tens of ppm; beyond 1 % there is
#: no synchronised clock left). Per-host clocks are modelled with the same bound.
MAX_CLOCK_DRIFT_PPM = 10_000.0
_MAX_RATE_TEXT = f"rate of 10Tbit ({MAX_RATE_BPS} bit/s)"
_MAX_DELAY_TEXT = "delay of 1 hour (3600s)"
_MAX_SIZE_TEXT = f"size of 16GiB ({MAX_SIZE_BYTES} bytes)"

# Anchored with \A...\Z and used with fullmatch, as every validation pattern (validate/fields.py).
_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_RATE_RE = re.compile(rf"\A({_NUM})\s*([kmgt]?)bit\Z", re.IGNORECASE)
_DELAY_RE = re.compile(rf"\A({_NUM})\s*(ns|us|µs|ms|s)\Z")
_SIZE_RE = re.compile(rf"\A({_NUM})\s*(b|kb|kib|mb|mib|gb|gib)\Z", re.IGNORECASE)

_RATE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_DELAY_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "ms": 10**6, "s": 10**9}
_SIZE_UNITS = {"b": 1, "kb": 10**3, "kib": 2**10, "mb": 10**6, "mib": 2**20, "gb": 10**9, "gib": 2**30}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _at_most(value: Any, amount: float, limit: int, what: str) -> int:
    """``amount`` (parsed from ``value``) as an int, or ValueError if it is above ``limit``.
    Compared before rounding, so that inf and 1e400 are refused rather than overflowing."""
    if not amount <= limit:
        raise ValueError(f"{show(value)} is above the maximum {what}")
    return round(amount)


def parse_rate(value: Any) -> int:
    """``"100Mbit"``, ``"1Gbit"``, ``"1.5kbit"`` or an int in bit/s -> bit/s (SI prefixes),
    at most :data:`MAX_RATE_BPS`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"{show(value)} is not a positive rate in bit/s")
        return _at_most(value, value, MAX_RATE_BPS, _MAX_RATE_TEXT)
    if isinstance(value, str):
        m = _RATE_RE.fullmatch(value.strip())
        if m:
            bps = float(m.group(1)) * _RATE_UNITS[m.group(2).lower()]
            if bps >= 1:
                return _at_most(value, bps, MAX_RATE_BPS, _MAX_RATE_TEXT)
    raise ValueError(f"{show(value)} is not a rate (use e.g. \"100Mbit\")")


def parse_delay(value: Any) -> int:
    """``"10us"``, ``"1ms"``, ``"1.5ms"``, ``"0"`` or ``0`` -> nanoseconds, at most :data:`MAX_DELAY_NS`."""
    if _is_number(value) and value == 0:
        return 0
    if isinstance(value, str):
        text = value.strip()
        if text == "0":
            return 0
        m = _DELAY_RE.fullmatch(text)
        if m:
            return _at_most(value, float(m.group(1)) * _DELAY_UNITS[m.group(2)], MAX_DELAY_NS, _MAX_DELAY_TEXT)
    raise ValueError(f"{show(value)} is not a delay (use e.g. \"10us\" or \"1ms\")")


def parse_size(value: Any) -> int:
    """``"200KB"`` (1000-based), ``"256KiB"`` (1024-based), ``"1MB"`` or an int in bytes -> bytes,
    at most :data:`MAX_SIZE_BYTES`."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value <= 0:
            raise ValueError(f"{show(value)} is not a positive size in bytes")
        return _at_most(value, value, MAX_SIZE_BYTES, _MAX_SIZE_TEXT)
    if isinstance(value, str):
        m = _SIZE_RE.fullmatch(value.strip())
        if m:
            n = _at_most(value, float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()], MAX_SIZE_BYTES, _MAX_SIZE_TEXT)
            if n > 0:
                return n
    raise ValueError(f"{show(value)} is not a size in bytes (use e.g. \"200KB\", \"256KiB\" or 200000)")


def parse_clock_offset(value: Any) -> int:
    """A host clock's offset, a delay that may be negative: ``"2us"``, ``"-1.5us"``, ``"+1ms"``,
    ``"0"`` or ``0`` -> nanoseconds, at most :data:`MAX_CLOCK_OFFSET_NS` either way."""
    if _is_number(value) and value == 0:
        return 0
    if isinstance(value, str):
        text = value.strip()
        body = text[1:] if text[:1] in ("+", "-") else text
        sign = -1 if text[:1] == "-" else 1
        if body == "0":
            return 0
        m = _DELAY_RE.fullmatch(body)
        if m:
            amount = float(m.group(1)) * _DELAY_UNITS[m.group(2)]
            if not amount <= MAX_CLOCK_OFFSET_NS:  # (inf and 1e400 too, before rounding)
                raise ValueError(f"{show(value)} is beyond the maximum clock offset of 1 hour (3600s) either way")
            return sign * round(amount)
    raise ValueError(f"{show(value)} is not a clock offset (use e.g. \"2us\" or \"-1.5us\")")


def parse_drift_ppm(value: Any) -> float:
    """A host clock's drift in parts per million: a number, at most :data:`MAX_CLOCK_DRIFT_PPM` either way."""
    if _is_number(value):
        try:
            ppm = float(value)
        except OverflowError:  # an int beyond float's range
            ppm = float("inf")
        if abs(ppm) <= MAX_CLOCK_DRIFT_PPM:
            return ppm
        if ppm == ppm:  # (nan is no number of ppm)
            raise ValueError(f"{show(value)} is beyond the maximum drift of {MAX_CLOCK_DRIFT_PPM:g} ppm either way")
    raise ValueError(f"{show(value)} is not a drift in ppm (a number such as 20 or -3.5)")


def parse_probability(value: Any) -> float:
    """A per-frame probability: a number in [0, 1] (``1e-3``) or a percentage string (``"0.1%"``)."""
    p: float | None = None
    if _is_number(value):
        try:
            p = float(value)
        except OverflowError:  # an int beyond float's range
            p = None
    elif isinstance(value, str) and value.strip().endswith("%"):
        try:
            p = float(value.strip()[:-1]) / 100.0
        except ValueError:
            p = None
    if p is None or not (0.0 <= p <= 1.0) or p != p:
        raise ValueError(f"{show(value)} is not a probability (use a number in [0, 1] such as 1e-3, or \"0.1%\")")
    return p


def show(value: Any) -> str:
    """``value`` as a problem quotes it: a string in double quotes (control characters escaped,
    so that a message stays one line), anything else as its repr."""
    if isinstance(value, str):
        return f'"{value}"' if value.isprintable() else f'"{repr(value)[1:-1]}"'
    try:
        return repr(value)
    except ValueError:  # an int of more digits than str() converts (sys.get_int_max_str_digits)
        return f"a {'negative ' if value < 0 else ''}{value.bit_length()}-bit integer"


def show_delay(ns: int) -> str:
    """Nanoseconds in the largest unit that divides them: 3600000000000 -> "3600s"."""
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"
