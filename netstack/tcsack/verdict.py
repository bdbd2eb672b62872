"""Is a transfer a result? The checks of ``netstack tcsack transfer`` and the ``tcsack-transfer``
scenario (:mod:`netstack.validity`; docs/tcsack.md "Is a transfer valid?").

A transfer measures how a transport recovers from loss at a preset rate (T/C-SACK draft §2:
"the sender only needs to keep sending packets at the preset sending rate"). Its numbers
(goodput, resends, probes) are a result only if

- **it completed**: the sender saw everything acknowledged and the receiver delivered it all;
- **the bytes are the ones sent**: the receiver's count and SHA-256 equal the sender's;
- **the sender paced at its preset rate** (T/C-SACK and go-back-N; kernel TCP has no preset
  rate): until its last new packet a paced sender has a packet for every slot, so the line rate
  of what it sent by then (retransmissions included, counted as a NIC's rate limiter counts
  them: ``TcsParams.packet_ns``) must be the preset rate within :data:`RATE_TOLERANCE`. The pacer
  gives back every slot a late timer cost, up to ``SenderBase.BURST_CAP_NS`` (10 ms) at once, so
  only a sender the machine starved beyond that falls behind its slots;
- **no process was starved**: both ends' own scheduling delay and the switch daemons', p99
  within T, or 5 ms where T is shorter (:data:`MIN_P99_MS`) (the receiver's ACK clock: a
  receiver late by T sends its ACKs twice as late as the draft's T asks, and every probe and
  loss decision waits on ACKs) and the largest within the
  generic limit (the 2T probe follows the delay, ``SenderBase.set_timer_slack``, so no protocol
  timer bounds one stall; what a stall costs, the rate check sees).

In virtual time nothing can starve a process: the same checks, the scheduling-delay one saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..ethernet import UDP_HEADERS_BYTES, WIRE_OVERHEAD_BYTES
from ..validity import DEFAULT_MAX_MS, Validity

#: how far the paced line rate may be from the preset rate: issue 33's "within 5 %" (the token
#: bucket keeps the long-run rate; what is left is the 1 us stamps and a stall beyond the bucket's cap)
RATE_TOLERANCE = 0.05


def paced_rate_bps(counters: Mapping[str, Any]) -> float | None:
    """The line rate the sender paced at until its last new packet (``SenderBase.paced_*``): every
    datagram with its UDP/IP/Ethernet headers and the wire's preamble, gap and FCS; None when it
    never sent its last packet or did it at once (one slot: no rate to speak of)."""
    ns = int(counters.get("paced_ns") or 0)
    n, nbytes = int(counters.get("paced_datagrams") or 0), int(counters.get("paced_bytes") or 0)
    if not ns or n < 2:
        return None
    wire = nbytes + n * (UDP_HEADERS_BYTES + WIRE_OVERHEAD_BYTES)
    # n datagrams take n slots, the last one starting at paced_ns: the time is (n - 1) slots, so
    # count what left before the last one
    return (wire - wire / n) * 8e9 / ns


#: the smallest p99 limit that can be told from the live runtime's own timer granularity: its
#: timers fire within about a millisecond (docs/architecture.md "The live runtime"), and a p99 of
#: 2-5 ms (the scheduling-delay histogram's buckets, netstack.looplag) is what an unloaded 2-core
#: machine running four live processes measures
MIN_P99_MS = 5.0


def lag_limits(t_ns: int) -> dict[str, float]:
    """p99 <= T (at least :data:`MIN_P99_MS`), max <= the generic limit (module docstring)."""
    return {"p99_ms": max(t_ns / 1e6, MIN_P99_MS), "max_ms": DEFAULT_MAX_MS}


def transfer_validity(proto: str, nbytes: int, send: Mapping[str, Any], recv: Mapping[str, Any], *,
                      rate_bps: int | None, t_ns: int,
                      lags: Mapping[str, Mapping[str, Any] | None] | None) -> Validity:
    """The checks of one transfer of ``nbytes`` with ``proto``: ``send`` / ``recv`` are the ends'
    reports (``done``, ``complete``, ``bytes``, ``sha256``, ``counters``: the live tools' JSON, or
    the same fields from virtual time), ``rate_bps`` the preset rate (None: kernel TCP), ``lags``
    every process's scheduling delay (None: virtual time)."""
    v = Validity()
    done, complete = bool(send.get("done")), bool(recv.get("complete"))
    v.happened("transfer completed", done and complete, {"sender_done": done, "receiver_complete": complete},
               "the sender saw everything acknowledged, the receiver delivered everything")
    got = int(recv.get("bytes") or 0)
    same = send.get("sha256") is not None and recv.get("sha256") == send.get("sha256")
    v.happened("bytes delivered intact", got == nbytes and same, {"bytes": got, "sha256_equal": same},
               f"{nbytes} bytes, SHA-256 equal to the sender's")
    if proto != "tcp" and rate_bps:
        paced = paced_rate_bps(send.get("counters") or {})
        if paced is None:
            v.add("sending rate", False, f"{rate_bps / 1e6:g} +/- {RATE_TOLERANCE:.0%} (Mbit/s, line rate)",
                  "not measured (the last packet was never sent)")
        else:
            v.near("sending rate", round(paced / 1e6, 3), rate_bps / 1e6, RATE_TOLERANCE)
    if lags is None:
        v.add("scheduling delay", True, "none: virtual time", "virtual time")
    else:
        v.not_starved(lags, **lag_limits(t_ns))
    return v


__all__ = ["RATE_TOLERANCE", "lag_limits", "paced_rate_bps", "transfer_validity"]
