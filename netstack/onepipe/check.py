"""The delivery log of a 1Pipe run, and the checker that verifies the order in it
(``netstack onepipe check LOG...``).

The log format (version 1)
--------------------------

Each process writes ``DIR/<process>.jsonl``: one JSON object per line (JSON Lines, UTF-8, ``\\n``
after every line, no blank lines), one line per message it delivered, in delivery order. Keys:

=========  ======  =====================================================================
key        type    meaning
=========  ======  =====================================================================
receiver   str     the delivering process's name (the same on every line of one file)
src        str     the sending process's name
ts         int     the message's timestamp in ns: its scattering's, the same for every
                   message of that scattering at every receiver
seq        int     the sender's scattering counter (>= 0, increasing by scattering): the
                   messages of one scattering share it
id         str     unique per message in the run
at         int     the receiver's host clock in ns when it delivered the message
v          int     optional; the format version, 1
=========  ======  =====================================================================

Other keys are allowed and ignored, so a writer may add its own (payload size, latency...).
Times are in the host time of the process that took them, the same clock the timestamps come
from (1Pipe §2: per-host clocks, synchronised but not equal). :func:`log_record` writes a line.

What ``check`` verifies (the guarantees of 1Pipe §1; the invariants of 1Pipe §12, items 2-4)
------------------------------------------------------------------------------------------

Messages of one scattering are identified by ``(src, seq)``; "common messages" of two
receivers are messages of the same scattering.

- ``duplicate``: nothing is delivered twice: ``id`` is unique within each receiver's log;
- ``causality``: a process delivers a message only once its clock has passed it: ``at > ts``;
- ``ts_order``: each receiver's sequence is non-decreasing in ``ts``;
- ``fifo``: per-sender FIFO: at each receiver, the messages from one sender come in
  non-decreasing ``seq`` (equal ``seq``: the same scattering);
- ``one_ts``: one timestamp per scattering: every message with the same ``(src, seq)`` has the
  same ``ts`` at every receiver;
- ``total_order``: equal timestamps are broken by sender, in one fixed order of the senders (the
  sender's ID, lower first; the log does not carry the IDs, so the checker infers the order):
  at each receiver the messages with one ``ts`` come grouped by sender, and the order of two
  senders at a tie is the same at every receiver and every ``ts``.

Together these say that one total order, by ``(ts, sender, seq)``, fits every receiver's log:
any two receivers deliver their common messages in the same relative order. The check streams
each file once and keeps per file the receiver's last entry, its last ``seq`` per sender and
its ids; across files only one timestamp per scattering and the first place each tie between
two senders was seen. So it is linear in the lines, and millions of lines take seconds.

Atomicity (design topic §12 item 8: restricted failure atomicity)
-----------------------------------------------------------------

When the run directory (the directory given, or the one directory every log given is in;
``--run-dir``) has ``sent/`` logs and the run was reliable, ``atomicity`` is checked too: each
scattering is delivered by every correct or recovered receiver, or by none. Besides the
delivery logs it reads (JSON Lines, one file per process ``p``, written by
:mod:`netstack.onepipe.live`):

- ``sent/p.jsonl``: one line per scattering ``p`` sent: ``seq`` (the ``seq`` its messages
  carry), ``dsts`` (receiver names); ``ts`` (an integer or null) and ``at`` are not used;
- ``send-fail/p.jsonl``: ``dst``, ``seq``, ``ts`` per message ``p``'s send-fail callback
  reported; ``ts`` 0 means it never left because its receiver was known failed (reliable 1Pipe
  fails a message to a failed process at once);
- ``proc-fail/p.jsonl``: ``{"proc": "ip:port", "name", "incarnation", "t_f", "at"}`` per
  process-fail callback at ``p`` (incarnation ``incarnation`` of ``proc`` failed at ``t_f``),
  ``{"proc", "name", "registered": k, "at"}`` each time ``p`` itself registered with the
  controller as incarnation ``k``, and ``{"proc", "name", "stopped": k or null, "at"}`` when
  ``p`` ended normally, registered as ``k`` (null: it was not registered then);
- ``run.json``: ``mode`` (``best_effort`` or ``reliable``; older ones say ``reliable`` true or
  false; neither: best effort, which promises no atomicity, so none is checked), ``killed`` (the
  processes that died of SIGKILL), ``addresses`` (name -> ``ip:port``). Without ``run.json`` the
  mode must be given (``--mode``, ``check_logs(mode=...)``): the checker does not guess (judging
  best-effort logs as reliable reports every lost message as an atomicity violation), it refuses
  (:class:`ModeUnknown`, bad input, exit 2). ``--mode`` also overrides what ``run.json`` says.

A receiver ``q`` of a scattering is judged unless:

- ``q`` was **killed**, or **failed**: a process-fail entry names an incarnation of ``q`` at or
  above the last one ``q`` registered (or names none, or ``q`` registered none), other than the
  one ``q`` stopped as (when a process ends, its input times out and the controller declares it
  failed: that is its end, not a crash; a process declared failed while alive that never heard
  of it ends as that incarnation too, and is judged: fenced by its ToR, it delivers nothing the
  others did not, and its log ends before what it missed). A failure of an earlier incarnation
  followed by a later registration is a **recovery**: ``q`` is judged, as a recovered process delivers what it had
  acknowledged (design topic §8); a failure of an incarnation that ran before this run on
  ``q``'s address is ignored the same way;
- the sender reported ``q``'s message with ts 0 (it never left: ``q`` was known failed then);
- ``q`` did not deliver it and its log ends at or before the scattering's ts: it stopped (the
  run ended) before its commit barrier passed it. Counted as ``undecided``.

A violation: a judged receiver delivered the scattering and another did not. Every such
scattering is listed (up to :data:`MAX_LISTED`). Delivered scatterings no ``sent/`` log lists
(a killed sender's last) are counted as ``unlisted``. In an auxiliary log, a last line cut
short without its newline (its writer was killed) is skipped; any other bad line is a
:class:`CheckError`.


Bad input (unreadable file, not JSON, a missing key, a wrong type, an empty file, two receivers
in one file, one receiver in two files) raises :class:`CheckError` naming ``file:line``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from .graph import find_cycle

#: the format version :func:`log_record` writes; a line that says another is refused
FORMAT_VERSION = 1
#: the required keys of a log line, with their meaning (the module docstring has the format)
FIELDS: dict[str, str] = {
    "receiver": "str: the delivering process (the same on every line of one file)",
    "src": "str: the sending process",
    "ts": "int, ns: the scattering's timestamp",
    "seq": "int >= 0: the sender's scattering counter",
    "id": "str: unique per message in the run",
    "at": "int, ns: the receiver's host clock when it delivered",
}
#: the kinds of violation, in the order one line is checked
KINDS = ("duplicate", "causality", "ts_order", "fifo", "one_ts", "total_order", "atomicity")
#: atomicity violations listed one by one (the rest are counted)
MAX_LISTED = 20

CHECK_HELP = "check delivery logs: total order, per-sender FIFO, one ts per scattering, causality"
CHECK_DESCRIPTION = (
    "Verify the delivery logs of a 1Pipe run (DIR/<process>.jsonl, one JSON object per delivered "
    "message: receiver, src, ts, seq, id, at; the format is in netstack/onepipe/check.py): total order "
    "(ties in ts broken by sender, in one order everywhere), each receiver non-decreasing in ts, "
    "per-sender FIFO, one timestamp per scattering, causality (at > ts) and no message delivered twice. "
    "A directory stands for its *.jsonl files. When the run directory has sent/ logs (netstack onepipe run) "
    "and the run was reliable, atomicity too: every scattering delivered by all its correct or recovered "
    "receivers, or by none (killed and failed receivers excluded, from run.json and proc-fail/). Exit 0: ok; "
    "1: a violation (the first is named with file:line; atomicity lists the scatterings); 2: bad input."
)


class CheckError(ValueError):
    """A log cannot be checked (unreadable, not the format); the message names ``file:line``."""


class ModeUnknown(CheckError):
    """The run directory has ``sent/`` logs but no ``run.json``, and no mode was given."""


#: the modes a run has (``run.json``'s ``mode``; ``--mode``)
MODES = ("best_effort", "reliable")


@dataclass(frozen=True)
class Violation:
    """One broken guarantee: its kind (one of :data:`KINDS`) and a sentence naming the entries."""

    kind: str
    message: str


@dataclass
class CheckResult:
    """What :func:`check_logs` found. ``counts``: messages, receivers, senders, scatterings;
    ``violations``: how many of each kind; ``first``: the first found, in file and line order
    (a cycle among the senders' tie orders is only found at the end)."""

    ok: bool
    counts: dict[str, int]
    violations: dict[str, int] = field(default_factory=dict)
    first: Violation | None = None
    #: the scatterings that broke atomicity, one sentence each (up to :data:`MAX_LISTED`)
    broken: list[str] = field(default_factory=list)
    #: the receivers the atomicity check left out: name -> "killed" or "failed"
    excluded: dict[str, str] = field(default_factory=dict)
    #: the run's count of every message by its fate (:func:`.accounting.tally`), with ``sent/`` logs
    accounting: dict[str, Any] | None = None

    @property
    def first_violation(self) -> str | None:
        return None if self.first is None else self.first.message

    def summary(self) -> str:
        c = self.counts
        what = (f"{c['messages']} messages from {c['senders']} senders at {c['receivers']} receivers, "
                f"{c['scatterings']} scatterings")
        a = self.accounting
        fates = "" if a is None else (
            f"\nthe run (as netstack onepipe run counts): {a['messages_sent']} messages sent, {a['delivered']} "
            f"delivered, {a['send_failed']} send-failed, {a['send_unknown']} send-unknown, {a['in_flight_at_end']} in "
            f"flight at the end ({a['unaccounted']} unaccounted)")
        atom = ""
        if "atomicity_checked" in c:
            out = ", ".join(f"{q} ({why})" for q, why in self.excluded.items()) or "none"
            atom = (f"\natomicity: {c['atomicity_checked']} delivered scatterings judged; receivers excluded: {out}; "
                    f"{c['undecided']} undecided (their logs end before the scattering), {c['unlisted']} delivered "
                    "scatterings in no sent/ log")
        if self.ok:
            return (f"ok: {what}: total order, per-sender FIFO, one timestamp per scattering, causality, "
                    f"no duplicates{', atomicity' if atom else ''}{atom}{fates}")
        assert self.first is not None
        kinds = ", ".join(f"{k} {self.violations[k]}" for k in KINDS if self.violations.get(k))
        listed = "".join(f"\n  broke atomicity: {b}" for b in self.broken)
        more = self.violations.get("atomicity", 0) - len(self.broken)
        listed += f"\n  ... and {more} more scatterings" if more > 0 else ""
        return f"violation ({self.first.kind}): {self.first.message}{listed}\n{what}; violations: {kinds}{atom}{fates}"

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "counts": dict(self.counts), "violations": dict(self.violations),
                "first": None if self.first is None else {"kind": self.first.kind, "message": self.first.message},
                "atomicity": list(self.broken), "excluded": dict(self.excluded),
                **({"accounting": self.accounting} if self.accounting is not None else {})}


def log_record(receiver: str, src: str, ts: int, seq: int, msg_id: str, at: int) -> str:
    """One line of a delivery log, newline included (keys in :data:`FIELDS` order, then ``v``)."""
    return json.dumps({"receiver": receiver, "src": src, "ts": ts, "seq": seq, "id": msg_id, "at": at,
                       "v": FORMAT_VERSION}, separators=(",", ":")) + "\n"


# --------------------------------------------------------------------------- parsing


_decode = json.JSONDecoder().decode


def _parse(raw: bytes, path: str, line: int) -> tuple[str, str, int, int, str, int]:
    """``(receiver, src, ts, seq, id, at)`` of line ``line`` of ``path``, or CheckError."""
    try:
        obj = _decode(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CheckError(f"{path}:{line}: not UTF-8 (byte {exc.start + 1})") from None
    except json.JSONDecodeError as exc:
        if not raw.strip():
            raise CheckError(f"{path}:{line}: blank line (one JSON object per line)") from None
        raise CheckError(f"{path}:{line}: not JSON: {exc.msg} (column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:  # an integer of too many digits, too deep a nesting
        raise CheckError(f"{path}:{line}: not JSON: {exc}") from None
    if type(obj) is dict:
        try:
            receiver, src, ts, seq, mid, at = (obj["receiver"], obj["src"], obj["ts"], obj["seq"], obj["id"],
                                               obj["at"])
        except KeyError:
            pass
        else:  # the common case in one test; type() is, because a bool is an int
            if (type(receiver) is str and type(src) is str and type(mid) is str and receiver and src and mid
                    and type(ts) is int and type(seq) is int and type(at) is int and seq >= 0
                    and ("v" not in obj or (type(obj["v"]) is int and obj["v"] == FORMAT_VERSION))):
                return receiver, src, ts, seq, mid, at
    _refuse(obj, f"{path}:{line}")


def _refuse(obj: Any, where: str) -> NoReturn:
    """Name what is wrong with a line :func:`_parse` did not accept."""
    if not isinstance(obj, dict):
        raise CheckError(f"{where}: a JSON {type(obj).__name__}, not an object")
    missing = [k for k in FIELDS if k not in obj]
    if missing:
        raise CheckError(f"{where}: missing {', '.join(repr(k) for k in missing)} "
                         f"(each line needs {', '.join(FIELDS)})")
    for key in ("receiver", "src", "id"):
        if type(obj[key]) is not str or not obj[key]:
            raise CheckError(f"{where}: {key!r} is {_show(obj[key])}, not a non-empty string")
    for key in ("ts", "seq", "at"):
        if type(obj[key]) is not int:
            raise CheckError(f"{where}: {key!r} is {_show(obj[key])}, not an integer")
    if obj["seq"] < 0:
        raise CheckError(f"{where}: 'seq' is {obj['seq']}, below 0")
    raise CheckError(f"{where}: format version {_show(obj['v'])}; this checker reads version {FORMAT_VERSION}")


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _files(paths: Iterable[str | Path]) -> Iterator[Path]:
    """Each path, a directory standing for its ``*.jsonl`` files (sorted)."""
    for p in map(Path, paths):
        if p.is_dir():
            logs = sorted(p.glob("*.jsonl"))
            if not logs:
                raise CheckError(f"{p}: a directory with no *.jsonl delivery logs")
            yield from logs
        else:
            yield p


# --------------------------------------------------------------------------- checking


@dataclass
class _Receiver:
    """What the checker keeps of the file it is reading: one receiver's deliveries so far."""

    path: str
    name: str = ""
    lines: int = 0
    prev: tuple[int, str, int, int] | None = None  # (ts, src, seq, line) of the last entry
    last_seq: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # src -> (seq, ts, line)
    ids: dict[str, int] = field(default_factory=dict)  # id -> line
    #: the current run of equal ts: its ts, the sender of the block being read, and the senders
    #: whose blocks in this run are over -> the line their block ended on
    run_ts: int | None = None
    run_sender: str = ""
    closed: dict[str, int] = field(default_factory=dict)
    max_ts: int | None = None  # the largest ts delivered (atomicity: how far the log got)

    def at(self, line: int) -> str:
        return f"{self.path}:{line}"


@dataclass(frozen=True)
class _Tie:
    """Where a receiver first delivered one sender's message right before another's, at one ts."""

    receiver: str
    path: str
    line_before: int
    line_after: int
    ts: int


class _Checker:
    def __init__(self) -> None:
        #: src -> seq -> (ts, path, line) of the first message of that scattering seen
        self.scatterings: dict[str, dict[int, tuple[int, str, int]]] = {}
        #: (a, b) -> the first place a's message came right before b's at one ts
        self.ties: dict[tuple[str, str], _Tie] = {}
        self.receivers: dict[str, str] = {}  # receiver -> its file
        self.messages = 0
        self.violations: Counter[str] = Counter()
        self.first: Violation | None = None
        #: atomicity only: (src, seq) -> the receivers that delivered it; receiver -> largest ts
        self.track: dict[tuple[str, int], list[str]] | None = None
        self.reach: dict[str, int | None] = {}
        self.broken: list[str] = []
        self.excluded: dict[str, str] = {}
        self.extra: dict[str, int] = {}

    def violation(self, kind: str, message: str) -> None:
        self.violations[kind] += 1
        if self.first is None:
            self.first = Violation(kind, message)

    def read(self, path: Path, allow_empty: bool) -> None:
        r = _Receiver(str(path))
        try:
            with path.open("rb") as f:
                for raw in f:
                    r.lines += 1
                    receiver, src, ts, seq, mid, at = _parse(raw, r.path, r.lines)
                    if not r.name:
                        where = r.at(r.lines)
                        if receiver in self.receivers:
                            raise CheckError(f"{where}: receiver {receiver!r} also has {self.receivers[receiver]} "
                                             "(one log per receiver)")
                        r.name = receiver
                        self.receivers[receiver] = r.path
                    elif receiver != r.name:
                        raise CheckError(f"{r.at(r.lines)}: receiver {receiver!r}, but {r.at(1)} says {r.name!r} "
                                         "(one log per receiver)")
                    self.entry(r, src, ts, seq, mid, at)
        except OSError as exc:
            raise CheckError(f"{path}: cannot read: {exc.strerror or exc}") from None
        if not r.lines and not allow_empty:
            raise CheckError(f"{path}: empty (no deliveries; --allow-empty accepts that)")
        if self.track is not None:
            self.reach[r.name or path.stem] = r.max_ts  # (an empty log: its file names the receiver)

    def entry(self, r: _Receiver, src: str, ts: int, seq: int, mid: str, at: int) -> None:
        """One delivery, checked in the order of :data:`KINDS`."""
        line = r.lines
        self.messages += 1
        if mid in r.ids:
            self.violation("duplicate", f"{r.name} delivers message {mid!r} twice: {r.at(r.ids[mid])} and "
                                        f"{_entry(r, line, src, seq, ts)}")
            return  # the copy says nothing new about the order
        r.ids[mid] = line
        if at <= ts:
            self.violation("causality", f"{r.name} delivers {_entry(r, line, src, seq, ts)} at host time {at}, "
                                        f"not after its ts ({ts - at} ns early)")
        in_order = r.prev is None or r.prev[0] <= ts
        if not in_order:
            assert r.prev is not None
            pts, psrc, pseq, pline = r.prev
            self.violation("ts_order", f"{r.name} delivers {_entry(r, line, src, seq, ts)} after "
                                       f"{_entry(r, pline, psrc, pseq, pts)}: its timestamp goes backwards")
        last = r.last_seq.get(src)
        if last is not None and seq < last[0]:
            self.violation("fifo", f"{r.name} delivers {_entry(r, line, src, seq, ts)} after "
                                   f"{_entry(r, last[2], src, last[0], last[1])}: {src}'s scatterings out of order")
        self.one_ts(r, src, ts, seq)
        if in_order:
            self.tie(r, src, ts, line)
        else:
            r.run_ts, r.run_sender, r.closed = ts, src, {}
        r.prev = (ts, src, seq, line)
        r.last_seq[src] = (seq, ts, line)
        if self.track is not None:
            self.track.setdefault((src, seq), []).append(r.name)
            if r.max_ts is None or ts > r.max_ts:
                r.max_ts = ts

    def one_ts(self, r: _Receiver, src: str, ts: int, seq: int) -> None:
        by_seq = self.scatterings.get(src)
        if by_seq is None:
            by_seq = self.scatterings[src] = {}
        first = by_seq.get(seq)
        if first is None:
            by_seq[seq] = (ts, r.path, r.lines)
        elif first[0] != ts:
            self.violation("one_ts", f"{r.name} delivers {_entry(r, r.lines, src, seq, ts)}, but {first[1]}:{first[2]} "
                                     f"has the same scattering ({src} seq {seq}) with ts {first[0]}: "
                                     "one timestamp per scattering")

    def tie(self, r: _Receiver, src: str, ts: int, line: int) -> None:
        """Equal ts: the messages come grouped by sender, in one order of the senders."""
        if ts != r.run_ts:
            r.run_ts, r.run_sender, r.closed = ts, src, {}
            return
        before = r.run_sender
        if src == before:
            return
        assert r.prev is not None
        r.closed[before] = r.prev[3]
        r.run_sender = src
        if src in r.closed:
            self.violation("total_order", f"{r.name} delivers {r.at(line)} ({src}'s, ts {ts}) after "
                                          f"{r.at(r.prev[3])} ({before}'s, same ts), but {src}'s messages with "
                                          f"that ts came before {before}'s up to {r.at(r.closed[src])}: "
                                          "a tie in ts is broken by sender, so they come grouped by sender")
            return
        tie = _Tie(r.name, r.path, r.prev[3], line, ts)
        self.ties.setdefault((before, src), tie)
        other = self.ties.get((src, before))
        if other is not None:
            self.violation("total_order", f"{_tie_text(before, src, tie)}, but {_tie_text(src, before, other)}: "
                                          "ties in ts are broken by sender, in one order at every receiver")

    def cycle(self) -> None:
        """A cycle of three or more senders in the tie orders (two were caught as they came)."""
        if self.violations["total_order"]:
            return
        graph: dict[str, list[str]] = {}
        for a, b in self.ties:
            graph.setdefault(a, []).append(b)
        path = find_cycle(graph)
        if path:
            steps = [_tie_text(a, b, self.ties[(a, b)]) for a, b in zip(path, path[1:] + path[:1], strict=True)]
            self.violation("total_order", "; ".join(steps) + ": no one order of the senders fits these ties in ts")

    def result(self) -> CheckResult:
        counts = {"messages": self.messages, "receivers": len(self.receivers),
                  "senders": len(self.scatterings), "scatterings": sum(map(len, self.scatterings.values())),
                  **self.extra}
        return CheckResult(not self.violations, counts, {k: self.violations[k] for k in KINDS if self.violations[k]},
                           self.first, self.broken, self.excluded)


def _entry(r: _Receiver, line: int, src: str, seq: int, ts: int) -> str:
    return f"{r.path}:{line} ({src} seq {seq}, ts {ts})"


def _tie_text(a: str, b: str, tie: _Tie) -> str:
    return (f"{tie.receiver} delivers {a}'s message before {b}'s at ts {tie.ts} "
            f"({tie.path}:{tie.line_before} then {tie.path}:{tie.line_after})")


def check_logs(paths: Iterable[str | Path], *, allow_empty: bool = False,
               run_dir: str | Path | None = None, mode: str | None = None) -> CheckResult:
    """Check the delivery logs ``paths`` (files, or directories of ``*.jsonl``), one per receiver.

    Returns the verdict; raises :class:`CheckError` on bad input (``file:line: what is wrong``).
    ``allow_empty``: accept a log with no deliveries (a process that received nothing).
    ``run_dir``: where the run's ``sent/``, ``send-fail/``, ``proc-fail/`` and ``run.json`` are
    (default: the directory given, or the one directory of every file given); atomicity is
    checked when it has ``sent/`` logs of a reliable run (module docstring). ``mode``
    (``best_effort`` or ``reliable``): the run's, over what ``run.json`` says; needed when there is
    no ``run.json`` (:class:`ModeUnknown`). Counts: ``delivered``, each message once (as ``netstack
    onepipe run`` counts), and with ``sent/`` logs the run's whole :func:`.accounting.tally`.
    """
    if mode is not None and mode not in MODES:
        raise CheckError(f"mode {mode!r}: one of {', '.join(MODES)}")
    paths = list(paths)
    run = _run_dir(paths) if run_dir is None else Path(run_dir)
    info = _run_info(run, mode) if run is not None and (run / "sent").is_dir() else None
    checker = _Checker()
    if info is not None and info.reliable:
        checker.track = {}
    n = 0
    for path in _files(paths):
        checker.read(path, allow_empty)
        n += 1
    if not n:
        raise CheckError("no delivery logs given")
    checker.cycle()
    if info is not None and checker.track is not None:
        _atomicity(checker, info)
    result = checker.result()
    result.counts["delivered"] = checker.messages - checker.violations["duplicate"]
    if info is not None:
        from .accounting import tally

        result.accounting = tally(info.path).as_dict()
    return result


# --------------------------------------------------------------------------- atomicity


@dataclass
class _RunInfo:
    """What the atomicity check reads besides the delivery logs (module docstring)."""

    path: Path
    reliable: bool
    killed: set[str]
    names: dict[str, str]  # "ip:port" -> process name (run.json's addresses)


def _run_dir(paths: list[str | Path]) -> Path | None:
    """The directory given, or the one directory every file given is in (None: several)."""
    dirs = {Path(p) if Path(p).is_dir() else Path(p).parent for p in paths}
    return dirs.pop() if len(dirs) == 1 else None


def _run_info(run: Path, mode: str | None = None) -> _RunInfo:
    path = run / "run.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        if mode is None:
            raise ModeUnknown(f"{run}: sent/ logs but no run.json: was the run best effort or reliable? "
                              "Say it with --mode best_effort|reliable (not guessed: best effort promises no "
                              "atomicity, and judging it as reliable reports every lost message as a "
                              "violation)") from None
        return _RunInfo(run, mode == "reliable", set(), {})
    except OSError as exc:
        raise CheckError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CheckError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CheckError(f"{path}: a JSON {type(doc).__name__}, not an object")
    killed, addresses = doc.get("killed", []), doc.get("addresses", {})
    if not isinstance(killed, list) or not all(isinstance(k, str) for k in killed):
        raise CheckError(f"{path}: 'killed' is {_show(killed)}, not a list of process names")
    if not isinstance(addresses, dict) or not all(isinstance(a, str) for a in addresses.values()):
        raise CheckError(f"{path}: 'addresses' is {_show(addresses)}, not an object of process -> ip:port")
    said = doc.get("mode")
    if said is not None and said not in MODES:
        raise CheckError(f"{path}: 'mode' is {_show(said)}, not one of {', '.join(MODES)}")
    # a run.json with neither predates reliable runs: best effort, which promises no atomicity
    reliable = mode == "reliable" if mode is not None else (said == "reliable" if said else doc.get("reliable") is True)
    return _RunInfo(run, reliable, set(killed), {a: n for n, a in addresses.items()})


def _aux(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(file:line, object)`` per line of an auxiliary log. A last line without its newline
    that does not parse was cut short by a killed writer: skipped."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CheckError(f"{path}: cannot read: {exc.strerror or exc}") from None
    *whole, tail = raw.split(b"\n")
    for i, line in enumerate(whole, 1):
        where = f"{path}:{i}"
        try:
            obj = json.loads(line)
        except ValueError:
            raise CheckError(f"{where}: {'blank line' if not line.strip() else 'not JSON'} "
                             "(one JSON object per line)") from None
        if not isinstance(obj, dict):
            raise CheckError(f"{where}: a JSON {type(obj).__name__}, not an object")
        yield where, obj
    if tail:
        try:
            obj = json.loads(tail)
        except ValueError:
            return
        if isinstance(obj, dict):
            yield f"{path}:{len(whole) + 1}", obj


def _sent(info: _RunInfo) -> Iterator[tuple[str, int, list[str], str]]:
    """``(sender, seq, receivers, file:line)`` per scattering the ``sent/`` logs list."""
    for path in sorted((info.path / "sent").glob("*.jsonl")):
        for where, obj in _aux(path):
            src, seq, dsts = obj.get("src", path.stem), obj.get("seq"), obj.get("dsts")
            if type(seq) is not int or seq < 0:
                raise CheckError(f"{where}: 'seq' is {_show(seq)}, not an integer >= 0")
            if not isinstance(dsts, list) or not all(type(d) is str and d for d in dsts):
                raise CheckError(f"{where}: 'dsts' is {_show(dsts)}, not a list of process names")
            if type(src) is not str or not src:
                raise CheckError(f"{where}: 'src' is {_show(src)}, not a process name")
            yield src, seq, dsts, where


def _never_left(info: _RunInfo) -> set[tuple[str, int, str]]:
    """``(sender, seq, receiver)`` of every message reported with ts 0: its receiver had failed."""
    out = set()
    for path in sorted((info.path / "send-fail").glob("*.jsonl")):
        for where, obj in _aux(path):
            dst, seq, ts = obj.get("dst"), obj.get("seq"), obj.get("ts")
            if type(dst) is not str or type(seq) is not int or type(ts) is not int:
                raise CheckError(f"{where}: a send-fail entry needs 'dst' (a string), 'seq' and 'ts' (integers)")
            if ts == 0:
                out.add((path.stem, seq, dst))
    return out


def _failed(info: _RunInfo) -> set[str]:
    """The processes failed for good: a process-fail entry names their last registered
    incarnation or a later one (module docstring)."""
    regs: dict[str, list[int]] = {}
    fails: dict[str, list[int | None]] = {}
    stopped: dict[str, int | None] = {}
    for path in sorted((info.path / "proc-fail").glob("*.jsonl")):
        for where, obj in _aux(path):
            proc, name = obj.get("proc"), obj.get("name")
            if type(proc) is not str or (name is not None and type(name) is not str):
                raise CheckError(f"{where}: 'proc' is {_show(proc)}, not ip:port (and 'name' a string or absent)")
            if "registered" in obj:  # the log's own process joined as that incarnation
                if type(obj["registered"]) is not int:
                    raise CheckError(f"{where}: 'registered' is {_show(obj['registered'])}, not an incarnation")
                regs.setdefault(path.stem, []).append(obj["registered"])
            elif "stopped" in obj:  # ... ended normally as that incarnation (null: not registered then)
                if obj["stopped"] is not None and type(obj["stopped"]) is not int:
                    raise CheckError(f"{where}: 'stopped' is {_show(obj['stopped'])}, not an incarnation or null")
                stopped[path.stem] = obj["stopped"]
            elif "t_f" in obj:
                inc = obj.get("incarnation")
                if type(obj["t_f"]) is not int or (inc is not None and type(inc) is not int):
                    raise CheckError(f"{where}: 't_f' must be an integer and 'incarnation' an integer or null")
                fails.setdefault(name or info.names.get(proc, proc), []).append(inc)
            else:
                raise CheckError(f"{where}: neither 't_f' (a process-fail callback), 'registered' nor 'stopped'")
    out = set()
    for name, incs in fails.items():
        mine, end = regs.get(name), stopped.get(name)
        # the failure of the incarnation a process ended as is its end: its input timed out after
        if not mine or any((k is None or k >= max(mine)) and (end is None or k != end) for k in incs):
            out.add(name)
    return out


def _atomicity(checker: _Checker, info: _RunInfo) -> None:
    """Every listed scattering: delivered by all its judged receivers or by none (module docstring)."""
    track = checker.track
    assert track is not None
    failed = _failed(info)
    excluded = info.killed | failed
    never = _never_left(info)
    reach = checker.reach
    seen: set[tuple[str, int]] = set()
    judged = undecided = 0
    for src, seq, dsts, where in _sent(info):
        seen.add((src, seq))
        got = track.get((src, seq))
        if not got:
            continue  # delivered nowhere: atomic
        judged += 1
        ts = checker.scatterings[src][seq][0]
        have = set(got)
        judges = [q for q in dsts if q in reach and q not in excluded and (src, seq, q) not in never]
        took = [q for q in judges if q in have]
        missing = [q for q in judges if q not in have and (r := reach[q]) is not None and r > ts]
        undecided += sum(1 for q in judges if q not in have) - len(missing)
        if took and missing:
            msg = (f"{src} seq {seq} (ts {ts}; {where}) was delivered by {', '.join(took)} but not by "
                   f"{', '.join(f'{q} (delivered up to ts {reach[q]})' for q in missing)}")
            checker.violation("atomicity", msg)
            if len(checker.broken) < MAX_LISTED:
                checker.broken.append(msg)
    checker.extra = {"atomicity_checked": judged, "undecided": undecided, "excluded": len(excluded & set(reach)),
                     "unlisted": sum(1 for k in track if k not in seen)}
    checker.excluded = {q: "killed" if q in info.killed else "failed" for q in sorted(excluded & set(reach))}


# --------------------------------------------------------------------------- command line


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``netstack onepipe check`` (set ``func=run_check`` on the parser)."""
    parser.add_argument("logs", nargs="+", metavar="LOG",
                        help="delivery logs (DIR/<process>.jsonl), or a directory standing for its *.jsonl")
    parser.add_argument("--allow-empty", action="store_true",
                        help="accept a log with no deliveries (default: an empty log is bad input)")
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.add_argument("--mode", choices=MODES,
                        help="the run's mode, over run.json's; needed for a run directory with sent/ logs and no "
                             "run.json (the checker does not guess; without it: exit 2)")
    parser.add_argument("--run-dir", metavar="DIR",
                        help="where sent/, send-fail/, proc-fail/ and run.json are, for the atomicity check "
                             "(default: the directory given, or the one directory of the logs given)")


def run_check(args: argparse.Namespace) -> int:
    """Check ``args.logs`` and print the verdict: 0 ok, 1 a violation, 2 bad input."""
    try:
        result = check_logs(args.logs, allow_empty=args.allow_empty, run_dir=args.run_dir,
                            mode=getattr(args, "mode", None))
    except CheckError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc)}))
        print(f"netstack onepipe check: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result.as_dict(), indent=2) if args.json else result.summary())
    return 0 if result.ok else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m netstack.onepipe.check LOG...``, the same as ``netstack onepipe check``."""
    parser = argparse.ArgumentParser(prog="netstack onepipe check", description=CHECK_DESCRIPTION)
    add_check_arguments(parser)
    return run_check(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
