"""Serial-number arithmetic (RFC 1982): the one home of every wrapping counter's arithmetic.

A counter that travels in ``W`` bits wraps every ``2^W``; whoever reads it interprets it
relative to a reference it trusts (its own absolute counter, its clock), so the wire value can
wrap while the engines keep plain, ever-increasing integers. The widths the protocols use:

===== ============================================================ ==============================
width what travels                                                 read by
===== ============================================================ ==============================
8     DTA report ``seqnum``                                        ``netstack.dta.reporter``
16    LinkGuardian ``seq_no`` without its era (``first_lost_seq``) ``headers.linkguardian``
17    LinkGuardian era bit + ``seq_no`` (§3.5)                     ``headers.linkguardian``
24    RoCE PSN                                                     ``headers.roce``, DTA
32    T/C-SACK seq, ack_seq and µs stamps; 1Pipe PSN               ``headers.tcsack``, the engines
48    1Pipe timestamps (ns)                                        ``headers.onepipe``
===== ============================================================ ==============================

The data path calls these on every frame, so each width's operations are plain closures over
its constants, built once (:func:`width`, and :data:`W8` ... :data:`W48` for the widths above):
a caller binds the one it needs, ``_unwrap32 = W32.unwrap``, and pays one Python call with no
shift or lookup inside. The module-level :func:`diff`, :func:`unwrap`, :func:`lt`... take the
width as an argument, for code off the data path and for tests. None of them validates its
arguments (data-path code; the records validate): values are any ints, reduced mod ``2^W``.

The half-way point
------------------
RFC 1982 leaves the comparison of two values exactly ``H = 2^(W-1)`` apart undefined. Here the
rule is one for every width and every caller: **the half-way point is behind**. So

- ``diff(a, b)`` is the signed distance from ``b`` to ``a`` in ``[-H, H)``, the true
  difference whenever ``|a - b| < H``; at exactly ``H`` apart it is ``-H`` *both ways*
  (``diff(a, b) == diff(b, a) == -H``: the one exception to antisymmetry);
- ``unwrap(wire, r)`` is ``r + diff(wire, r)``: the value congruent to ``wire`` in
  ``[r - H, r + H - 1]``, exact whenever the true value is in that window;
- ``lt(a, b)`` is ``diff(a, b) < 0`` and ``le(a, b)`` is ``diff(a, b) <= 0``; ``gt(a, b)`` is
  ``lt(b, a)`` and ``ge(a, b)`` is ``le(b, a)``. Two values ``H`` apart are each before the
  other, so ``lt`` (and ``gt``) hold both ways: a caller that must not take the half-way point
  as "ahead" asks ``diff(a, b) > 0`` (the DTA translator moving its PSN up to ``una``).

Why "behind" is what each caller needs (and what each did before this module):

- LinkGuardian: a data tag, leading ACK or ``first_lost_seq`` can be ahead of the reference
  by no more than the Tx buffer; one at the half-way point is an old frame (a duplicate the
  receiver drops), never a jump that would open a hole of ``2^16`` frames.
- T/C-SACK: a sequence number ``2^31`` from ``cum`` is a stale duplicate, not a packet
  ``2^31`` ahead; an RTT sample whose µs difference reaches ``2^31`` is negative, so dropped.
- RoCE (DTA's collector): the half of the PSN space behind ePSN, the half-way point
  included, is the duplicate region; ePSN + 1 .. ePSN + 2^23 - 1 is a sequence error.
- 1Pipe (PAWS, RFC 7323 §5): a timestamp half the space away is old, so late.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import NamedTuple


class Width(NamedTuple):
    """The arithmetic of one width, as plain functions on ints (built by :func:`width`)."""

    bits: int
    #: ``2^bits``, the size of the circle; ``mask`` reduces onto it; ``half`` = ``2^(bits-1)``
    space: int
    mask: int
    half: int
    #: signed distance from ``b`` to ``a`` in ``[-half, half)``
    diff: Callable[[int, int], int]
    #: the value congruent to ``wire`` in ``[reference - half, reference + half - 1]``
    unwrap: Callable[[int, int], int]
    #: ``unwrap`` for a counter whose top bit travels apart from its low ``bits - 1`` bits
    #: (LinkGuardian's era bit over its 16-bit seq_no, §3.5): ``(era, low, reference)``
    unwrap_era: Callable[[int, int, int], int]
    lt: Callable[[int, int], bool]
    le: Callable[[int, int], bool]
    gt: Callable[[int, int], bool]
    ge: Callable[[int, int], bool]
    #: ``a + n`` on the circle (``n`` may be negative); the result is reduced
    add: Callable[[int, int], int]
    #: the later / earlier of two values (``b`` / ``a`` when they are half apart), reduced
    later: Callable[[int, int], int]
    earlier: Callable[[int, int], int]


@lru_cache(maxsize=None, typed=True)  # typed: width(True) is refused, not width(1)
def width(bits: int) -> Width:
    """The operations on ``bits``-bit serial numbers (cached: one set per width)."""
    if type(bits) is not int or bits < 1:
        raise ValueError(f"a serial-number width is a positive int, got {bits!r}")
    space = 1 << bits
    mask = space - 1
    half = space >> 1
    low_bits = bits - 1

    # Each body is written out rather than calling diff(): one call per use on the data path.
    def diff(a: int, b: int) -> int:
        d = (a - b) & mask
        return d - space if d >= half else d

    def unwrap(wire: int, reference: int) -> int:
        d = (wire - reference) & mask
        return reference + (d - space if d >= half else d)

    def unwrap_era(era: int, low: int, reference: int) -> int:
        d = ((era << low_bits | low) - reference) & mask
        return reference + (d - space if d >= half else d)

    def lt(a: int, b: int) -> bool:
        return (a - b) & mask >= half

    def le(a: int, b: int) -> bool:
        d = (a - b) & mask
        return d == 0 or d >= half

    def gt(a: int, b: int) -> bool:
        return (b - a) & mask >= half

    def ge(a: int, b: int) -> bool:
        d = (b - a) & mask
        return d == 0 or d >= half

    def add(a: int, n: int) -> int:
        return (a + n) & mask

    def later(a: int, b: int) -> int:
        return (b if (a - b) & mask >= half else a) & mask

    def earlier(a: int, b: int) -> int:
        return (a if (a - b) & mask >= half else b) & mask

    fns: list[Callable[..., object]] = [diff, unwrap, unwrap_era, lt, le, gt, ge, add, later, earlier]
    for fn in fns:  # tracebacks and reprs say which width: serial.unwrap32
        fn.__name__ = fn.__qualname__ = f"{fn.__name__}{bits}"
    return Width(bits, space, mask, half, diff, unwrap, unwrap_era, lt, le, gt, ge, add, later, earlier)


W8 = width(8)
W16 = width(16)
W17 = width(17)
W24 = width(24)
W32 = width(32)
W48 = width(48)


# --- any width, for code off the data path ----------------------------------------------------


def diff(a: int, b: int, bits: int) -> int:
    """Signed distance from ``b`` to ``a`` in ``[-2^(bits-1), 2^(bits-1))`` (half-way: behind)."""
    return width(bits).diff(a, b)


def unwrap(wire: int, reference: int, bits: int) -> int:
    """The value congruent to ``wire`` mod ``2^bits`` nearest ``reference`` (half-way: below)."""
    return width(bits).unwrap(wire, reference)


def lt(a: int, b: int, bits: int) -> bool:
    """``a`` is before ``b``: ``diff(a, b, bits) < 0`` (true both ways at half-way)."""
    return width(bits).lt(a, b)


def le(a: int, b: int, bits: int) -> bool:
    """``a`` is before or equal to ``b``: ``diff(a, b, bits) <= 0``."""
    return width(bits).le(a, b)


def gt(a: int, b: int, bits: int) -> bool:
    """``lt(b, a, bits)``."""
    return width(bits).gt(a, b)


def ge(a: int, b: int, bits: int) -> bool:
    """``le(b, a, bits)``."""
    return width(bits).ge(a, b)


def add(a: int, n: int, bits: int) -> int:
    """``a + n`` mod ``2^bits``."""
    return width(bits).add(a, n)


__all__ = ["W8", "W16", "W17", "W24", "W32", "W48", "Width", "add", "diff", "ge", "gt", "le", "lt", "unwrap",
           "width"]
