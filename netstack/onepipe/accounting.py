"""Every message of a 1Pipe run by its fate: the one count ``netstack onepipe run``, ``check`` and
``status`` share (issue 31; docs/onepipe.md "Accounting").

Each message sent (its id, ``<src>.<seq>.<dst>``, from the sender's ``sent/`` log) falls in exactly
one class, first match wins:

1. ``delivered``: a receiver logged it (its delivery log, ``DIR/<dst>.jsonl``), counted once however
   often it appears. The receivers' logs are the truth: a message its sender reported as unknown
   (its ACK timeout fired) is delivered when a receiver logged it.
2. ``send_failed``: its sender *knows* it was not delivered (``send-fail/``: a NAK, the receiver's
   ACK bitmap, a destination known failed).
3. ``send_unknown``: its sender gave up waiting (``send-unknown/``: no ACK, no NAK in the ACK
   timeout) and no receiver logged it.
4. ``in_flight_at_end``: none of these: no fate learned by the end.

So ``messages_sent = delivered + send_failed + send_unknown + in_flight_at_end`` exactly, every
term at least 0. ``unaccounted`` is the part of ``in_flight_at_end`` its sender did not list as
still in flight when it stopped and its receiver did not list as received and not yet delivered
(``in-flight/``, entries with ``held``: ACKed, so the sender lists nothing): 0 unless a process
died (a killed sender lists nothing; a killed receiver's last unwritten deliveries, at most
0.1 s) or a log is incomplete.
A message a sender reported failed *and* a receiver logged is a contradiction of the protocol
(``failed_and_delivered``, counted delivered); ``unknown_delivered`` counts the unknowns a receiver
logged (late or lost ACKs); ``delivered_unlisted``, deliveries no ``sent/`` log lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the per-process and total counters, in this order in every summary (issue 31's JSON contract)
COUNTERS = ("messages_sent", "delivered", "send_failed", "send_unknown", "in_flight_at_end", "unaccounted")
#: the auxiliary logs the count reads, one file per process in each
FATE_DIRS = ("sent", "send-fail", "send-unknown", "in-flight")


@dataclass
class Tally:
    """The count of one run: ``totals`` and ``per_sender`` (:data:`COUNTERS` each), ``received``
    (per receiver, what it logged, once per id) and the cross-checks (module docstring)."""

    totals: dict[str, int]
    per_sender: dict[str, dict[str, int]]
    received: dict[str, int] = field(default_factory=dict)
    failed_and_delivered: int = 0
    unknown_delivered: int = 0
    delivered_unlisted: int = 0
    examples: list[str] = field(default_factory=list)  # up to 5 unaccounted ids

    def as_dict(self) -> dict[str, Any]:
        return {**self.totals, "failed_and_delivered": self.failed_and_delivered,
                "unknown_delivered": self.unknown_delivered, "delivered_unlisted": self.delivered_unlisted,
                "examples": list(self.examples)}


def _zero() -> dict[str, int]:
    return dict.fromkeys(COUNTERS, 0)


def classify(sent: Iterable[tuple[str, str]], delivered: set[str], failed: set[str], unknown: set[str],
             in_flight: set[str]) -> Tally:
    """The count (module docstring) from sets of message ids: ``sent`` as ``(sender, id)``."""
    totals = _zero()
    per: dict[str, dict[str, int]] = {}
    listed: set[str] = set()
    t = Tally(totals, per)
    for sender, mid in sent:
        if mid in listed:
            continue
        listed.add(mid)
        mine = per.setdefault(sender, _zero())
        if mid in delivered:
            fate = "delivered"
            t.failed_and_delivered += mid in failed
            t.unknown_delivered += mid in unknown
        elif mid in failed:
            fate = "send_failed"
        elif mid in unknown:
            fate = "send_unknown"
        else:
            fate = "in_flight_at_end"
            if mid not in in_flight:
                for d in (totals, mine):
                    d["unaccounted"] += 1
                if len(t.examples) < 5:
                    t.examples.append(mid)
        for d in (totals, mine):
            d["messages_sent"] += 1
            d[fate] += 1
    t.delivered_unlisted = len(delivered - listed)
    return t


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a log; a bad line (a killed writer's cut-off last one) counts for
    nothing here (``netstack onepipe check`` judges the format)."""
    try:
        text = path.read_text()
    except OSError:
        return
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def _ids(paths: Iterable[Path]) -> set[str]:
    return {o["id"] for p in paths for o in read_lines(p) if isinstance(o.get("id"), str)}


def tally(out: str | Path) -> Tally:
    """The count of the run whose logs are in ``out`` (docs/onepipe.md "The delivery log")."""
    from .live import message_id

    out = Path(out)
    sent: list[tuple[str, str]] = []
    for p in sorted((out / "sent").glob("*.jsonl")):
        for sc in read_lines(p):
            dsts, seq = sc.get("dsts"), sc.get("seq")
            if isinstance(dsts, list) and type(seq) is int:
                sent += [(p.stem, message_id(p.stem, seq, str(d))) for d in dsts]
    delivered: set[str] = set()
    received: dict[str, int] = {}
    for p in sorted(out.glob("*.jsonl")):
        mine = _ids([p])
        received[p.stem] = len(mine)
        delivered |= mine
    t = classify(sent, delivered, _ids((out / "send-fail").glob("*.jsonl")),
                 _ids((out / "send-unknown").glob("*.jsonl")), _ids((out / "in-flight").glob("*.jsonl")))
    t.received = received
    return t


__all__ = ["COUNTERS", "FATE_DIRS", "Tally", "classify", "read_lines", "tally"]
