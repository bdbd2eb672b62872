"""The barrier aggregation of one switch, sans-IO (1Pipe §4-§6: design topics in docs/papers.md).

A switch keeps a register ``R_be[i]`` per input and writes into every 1Pipe packet it forwards
the minimum of the registers of its live inputs; an output that carried nothing for
``T_beacon`` gets a beacon with that minimum (§5); an input silent for ``timeout_beacons`` x
``T_beacon`` leaves the minimum (§6); a link added at run time freezes the output barrier until
it catches up (§4), so that no output barrier ever decreases (§12 invariant 1).

This module is the arithmetic only: no frames, no switch. :mod:`.feature` feeds it from the
switch's ports. Inputs and outputs are any hashable ids (the feature uses a port name for a link
to another switch and ``(port, ip, udp port)`` for a process behind an edge port, "each process
is its own endpoint at the ToR", §3). Barriers are absolute integers (the caller unwraps the
48-bit wire values with ``headers.onepipe.ts_unwrap``); ``now_ns`` is the switch's clock.

**Up and down** (§3: each switch is an *up* and a *down* logical switch joined by a loopback,
which makes routing a DAG). An input is a *down input* when it comes from below: a process, or
a switch of a lower tier. An *up* output (toward a switch of the same or a higher tier) carries
the minimum over the live down inputs only: a packet that came from above never goes up again.
A *down* output carries the minimum over every live input.

**The freeze** (§4 "adding a link: freeze the output barrier until the new link's barrier
exceeds it"). Each output remembers the last barrier it was given, ``last[o]``. An input whose
``R`` is below ``last[o]`` (a new input, or one back after a timeout) is *joining* for ``o``: it
is left out, and ``o`` holds ``last[o]`` until that ``R`` catches up. In one formula, the barrier
of ``o`` is ``max(last[o], min R over its live inputs)``: when the minimum is below ``last[o]``
exactly the inputs below ``last[o]`` are joining, every other input has ``R >= last[o]`` (an
input in the minimum never falls below a barrier it helped make, since ``R`` never decreases),
so ``last[o]`` is never above the minimum over the live non-joining inputs. The output holds
rather than moves on without the joining input, which could then never catch up; while it
holds, packets of the joining input with a timestamp below ``last[o]`` reach their receivers
late and are dropped and NAKed there (§6): loss, never disorder.

**Hold** (reliable 1Pipe, design topics §7.2 and §8 step 7; the paper, *1Pipe: Scalable Total
Order Communication in Data Center Networks*, §5: §5.1 for the commit barrier, the rest of §5
for failures). A switch keeps a second register per input, ``R_commit``, aggregated exactly as
``R_be``: a second aggregator. When the switch has a controller, that commit aggregator is made
with ``hold=True``: an input that times out does not leave the minima, it becomes *held*, frozen
at its last ``R`` (updates from it are ignored), so that no commit barrier passes a failed
process until the controller has every correct process run its failure callback and *releases*
it (:meth:`BarrierAggregator.release`: it leaves the
minima as a timed-out input leaves them with ``hold=False``, and re-joins under the freeze when
heard again: a recovered process is a new process, §8). :meth:`BarrierAggregator.fence` holds an
input at once. Holding never lowers a minimum (the input stays at its ``R``) and releasing only
raises one, so output barriers still never decrease. The output *to* a held process (its
``peer_input``) keeps the barrier it had when the hold began until the process is admitted
again: a process declared failed while still alive (a stall longer than the timeout, a cut) is
fail-stop, it must not deliver what its senders recall because of its failure.

**Timer slack** (ours; docs/onepipe-reliable.md "Timers on a loaded host"). :meth:`BarrierAggregator.set_timer_slack`
lengthens the input timeout by how late the live switch daemon has recently been scheduled: the
switch's feature gives it to the commit aggregator under a controller, whose timeout declares a
process failed (§8 step 1), so that a switch that waited for a CPU (its sockets full of the
beacons it has not read yet) does not take that wait for a silent process. Virtual time never
sets it.

**Time.** Deadlines come from two lazy heaps (an output's beacon, an input's timeout): an entry
is never later than the event it stands for, and a stale one is re-filed when it comes up, so
the data path (:meth:`heard`, :meth:`note_sent`) never touches them. The minima come from two
lazy heaps of ``R`` values (all inputs, down inputs), re-built when stale entries pile up.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Any

from ..engine import ActionQueue
from ..errors import ConfigError
from .params import OnePipeParams

UP = "up"
DOWN = "down"
DIRECTIONS = (UP, DOWN)
#: Prompt beacons (ours, ``OnePipeParams.prompt_beacons``): when a minimum rises, an output that
#: uses it gets a beacon at once (unless a packet carries the barrier first), at most one per
#: ``T_beacon / PROMPT_DIVISOR``, besides the beacon its ``T_beacon`` idle timer sends. With
#: timers alone each switch hop adds up to ``T_beacon`` (half on average) to the barrier's
#: journey, three hops from one rack to another; the paper's latency model (``T_beacon / 2`` +
#: skew, the paper's §7) has barriers cross the switches at once. Measured with
#: ``netstack bench onepipe`` (docs/onepipe.md): the overhead over unordered delivery fell from
#: 1.8-5.5x the model to within 1.7x of it.
PROMPT_DIVISOR = 4

InputId = Hashable
OutputId = Hashable


@dataclass(eq=False, slots=True)
class InputCounters:
    heard: int = 0  # barrier updates from the input (data, ACK, NAK, beacon...), refused ones included
    backwards: int = 0  # ... below the input's R: the update was refused (§4), the packet still forwarded
    ahead: int = 0  # ... further ahead of the switch's clock than max_ahead_ns: refused (corrupt or buggy)
    joins: int = 0  # times it entered the minimum: first heard, or heard again after a timeout
    rejoins: int = 0  # ... of which after a timeout (§6)
    timeouts: int = 0  # times it left the minimum after input_timeout_ns of silence (§6), or (hold) became held
    holds: int = 0  # times it became held: a timeout with hold=True, or fence() (§8 step 7)
    held_updates: int = 0  # updates ignored because the input was held (counted in heard too)
    releases: int = 0  # times release() took it out of the minima (§8 step 7)


@dataclass(eq=False, slots=True)
class OutputCounters:
    barriers: int = 0  # barriers handed out for packets (barrier_for)
    beacons: int = 0  # beacons due and handed out (due_beacons)
    beacons_without_barrier: int = 0  # a beacon was due but the output had no barrier yet
    prompt_beacons: int = 0  # ... of the beacons, sent because the barrier rose on an idle output
    freezes: int = 0  # times the output began to hold its barrier above a joining input (§4)
    frozen_ns: int = 0  # time it held, over closed episodes (seen between the calls that noticed)


@dataclass(eq=False, slots=True)
class AggregatorCounters:
    """What an aggregator counts beside its inputs' and outputs' own (``BarrierAggregator.c``)."""

    unknown_inputs: int = 0  # updates for inputs never declared (refused)


class _Input:
    __slots__ = ("c", "down", "ever_live", "gen", "heard_at", "held", "id", "live", "queued", "r")

    def __init__(self, input_id: InputId, down: bool) -> None:
        self.id = input_id
        self.down = down
        self.r: int | None = None
        self.heard_at = 0
        #: in the minima (heap entries with the current gen are valid); a held input stays in them
        self.live = False
        self.ever_live = False
        #: frozen by a timeout (hold=True) or fence(): updates ignored until release()
        self.held = False
        self.gen = 0  # bumped whenever the R heaps' entries of this input go stale
        self.queued = False  # has an entry in the timeout heap
        self.c = InputCounters()


class _Output:
    __slots__ = ("beacons", "bgen", "c", "frozen_since", "id", "last", "peer", "prompt", "prompt_at", "queued",
                 "sent_at", "up")

    def __init__(self, output_id: OutputId, up: bool, now_ns: int, peer: InputId | None, beacons: bool) -> None:
        self.id = output_id
        self.up = up
        self.last: int | None = None
        self.sent_at = now_ns
        self.peer = peer
        self.beacons = beacons
        self.frozen_since: int | None = None
        self.queued = False  # has an entry in the beacon heap
        self.bgen = 0  # only the beacon heap's newest entry for this output counts
        self.prompt = False  # its barrier rose while it was idle: a beacon is due soon (PROMPT_DIVISOR)
        self.prompt_at = -(1 << 62)  # when it last sent a prompt beacon
        self.c = OutputCounters()


class BarrierAggregator:
    """``R_be`` per input, the barrier of every output, beacons and input timeouts (see the module
    docstring). Engine contract (:class:`netstack.engine.Engine`): ``actions`` stays empty (the
    beacons due are the return value of :meth:`due_beacons`), ``next_deadline`` covers both the
    beacons and the timeouts, and the shell calls :meth:`on_timer` then :meth:`due_beacons` at it.

    - :meth:`add_input` / :meth:`add_output` declare inputs and outputs (an input is not in any
      minimum until it is first heard); :meth:`remove_input` / :meth:`remove_output` forget them.
    - :meth:`heard` sets ``R`` of an input from a packet's barrier.
    - :meth:`barrier_for` is the barrier to write into a packet leaving by an output (and
      remembers it); :meth:`note_sent` says the output carried a 1Pipe packet.
    - ``hold=True`` (a commit aggregator under a controller, see the module docstring): a timed-out
      input is held, not dropped; :meth:`fence`, :meth:`release` and :meth:`held` manage holds.
    """

    def __init__(self, params: OnePipeParams | None = None, *, hold: bool = False) -> None:
        self.params = params if params is not None else OnePipeParams()
        if not isinstance(self.params, OnePipeParams):
            raise ConfigError("onepipe", f"expected OnePipeParams, got {type(self.params).__name__}")
        #: a timed-out input is held in the minima rather than dropped (§8 step 7)
        self.hold = bool(hold)
        self.actions = ActionQueue()
        self._inputs: dict[InputId, _Input] = {}
        self._outputs: dict[OutputId, _Output] = {}
        self._peers: dict[InputId, list[_Output]] = {}  # outputs beaconed only while that input is live
        self._live = 0
        self._seq = itertools.count()
        # R heaps: (r, seq, gen, input); an entry is valid while its input is live and gen matches
        self._all: list[tuple[int, int, int, _Input]] = []
        self._down: list[tuple[int, int, int, _Input]] = []
        # deadline heaps: (time, seq, item); the time is never later than the event's
        self._beacon_heap: list[tuple[int, int, int, _Output]] = []  # (time, seq, bgen, output)
        self._timeout_heap: list[tuple[int, int, _Input]] = []
        self.c = AggregatorCounters()
        #: how much longer the input timeout waits on a loaded host (set_timer_slack)
        self.timer_slack_ns = 0
        #: an idle output may be below its minimum without a prompt beacon due (_prompt_lagging)
        self._lagging = True

    # ------------------------------------------------------------------ configuration
    def set_params(self, params: OnePipeParams) -> None:
        """New ``T_beacon`` / timeout; deadlines already filed are re-filed when they come up."""
        self.params = params
        for out in self._outputs.values():
            self._file_beacon(out, force=True)
        for inp in self._inputs.values():
            if inp.live and not inp.held:
                self._file_timeout(inp, force=True)

    @property
    def timeout_ns(self) -> int:
        """The input timeout in force: ``params.input_timeout_ns`` plus the timer slack."""
        return self.params.input_timeout_ns + self.timer_slack_ns

    def set_timer_slack(self, slack_ns: int) -> None:
        """How late the live shell's process has recently been scheduled: an input is timed out
        (and, held, reported failed) only after ``timeout_ns`` = the configured timeout + this,
        from now on (module docstring). Negative values count as 0."""
        slack = max(0, int(slack_ns))
        shorter = slack < self.timer_slack_ns
        self.timer_slack_ns = slack
        if shorter:  # filed deadlines may be late now (a longer timeout re-files them when they come up)
            for inp in self._inputs.values():
                if inp.live and not inp.held:
                    self._file_timeout(inp, force=True)

    def add_input(self, input_id: InputId, *, down: bool) -> None:
        """Declare an input: ``down`` when it comes from below (a process, a lower-tier switch).
        Declaring it again changes nothing (ConfigError if ``down`` differs)."""
        inp = self._inputs.get(input_id)
        if inp is not None:
            if inp.down != bool(down):
                raise ConfigError("onepipe.input", f"input {input_id!r} is already declared with down={inp.down}")
            return
        self._inputs[input_id] = _Input(input_id, bool(down))

    def add_output(self, output_id: OutputId, direction: str, now_ns: int, *, peer_input: InputId | None = None,
                   beacons: bool = True) -> None:
        """Declare an output, ``"up"`` or ``"down"``. Its first beacon is due ``T_beacon`` after
        ``now_ns``. ``peer_input``: the output leads to that input's sender (a process), which
        gets beacons only while it is live. ``beacons=False``: never beaconed."""
        if direction not in DIRECTIONS:
            raise ConfigError("onepipe.direction", f"must be one of {', '.join(DIRECTIONS)}, got {direction!r}")
        if output_id in self._outputs:
            if self._outputs[output_id].up != (direction == UP):
                raise ConfigError("onepipe.output", f"output {output_id!r} is already declared the other way")
            return
        out = _Output(output_id, direction == UP, now_ns, peer_input, beacons)
        self._outputs[output_id] = out
        self._lagging = True
        if peer_input is not None:
            self._peers.setdefault(peer_input, []).append(out)
        self._file_beacon(out)

    def remove_input(self, input_id: InputId) -> bool:
        """Forget an input (held or not): it leaves the minima."""
        inp = self._inputs.pop(input_id, None)
        if inp is None:
            return False
        if inp.live:
            self._live -= 1
            self._lagging = True  # a minimum may rise unannounced
        inp.live = False
        inp.gen += 1
        return True

    def remove_output(self, output_id: OutputId) -> bool:
        out = self._outputs.pop(output_id, None)
        if out is None:
            return False
        if out.peer is not None:
            peers = self._peers.get(out.peer, [])
            if out in peers:
                peers.remove(out)
            if not peers:
                self._peers.pop(out.peer, None)
        return True

    @property
    def in_min(self) -> int:
        """How many inputs the minima count (live or held): 0 means no output has a barrier to
        give, so :meth:`barrier_for` would answer None (a caller may skip it on its data path)."""
        return self._live

    def has_input(self, input_id: InputId) -> bool:
        return input_id in self._inputs

    def has_output(self, output_id: OutputId) -> bool:
        return output_id in self._outputs

    def is_live(self, input_id: InputId) -> bool:
        """Heard from within the timeout and not held (a held input may still be in the minima)."""
        inp = self._inputs.get(input_id)
        return inp is not None and inp.live and not inp.held

    def held(self, input_id: InputId) -> bool:
        """The input is held: frozen, its updates ignored until :meth:`release`."""
        inp = self._inputs.get(input_id)
        return inp is not None and inp.held

    def r(self, input_id: InputId) -> int | None:
        """The input's ``R`` (None: never heard)."""
        inp = self._inputs.get(input_id)
        return None if inp is None else inp.r

    # ------------------------------------------------------------------ data path
    def heard(self, input_id: InputId, barrier: int, now_ns: int) -> bool:
        """A barrier-carrying packet from ``input_id`` (§4: ``R_be[i] = B``). False when refused:
        an undeclared input, or a barrier below ``R`` (counted ``backwards``; the input is still
        heard from, so it stays live), or a held input (counted ``held_updates``: it stays frozen
        until released). An input heard again after a timeout takes the new value whatever it
        is: it re-joins under the freeze."""
        inp = self._inputs.get(input_id)
        if inp is None:
            self.c.unknown_inputs += 1
            return False
        inp.c.heard += 1
        if inp.held:
            inp.c.held_updates += 1  # failed as far as the controller knows: frozen (§8 step 7)
            return False
        if barrier - now_ns > self.params.max_ahead_ns:
            inp.c.ahead += 1  # R never decreases: taking it would pin the input there for hours
            return False
        inp.heard_at = now_ns
        if not inp.live:
            inp.c.joins += 1
            if inp.ever_live:
                inp.c.rejoins += 1
            inp.live = inp.ever_live = True
            inp.r = barrier
            self._live += 1
            self._lagging = True  # an empty minimum may come back above an output's last barrier
            self._push(inp)
            self._file_timeout(inp)
            for out in self._peers.get(input_id, ()):
                self._file_beacon(out)
            return True
        r = inp.r
        assert r is not None  # (a live input has been heard)
        if barrier > r:
            if not self.params.prompt_beacons:
                inp.r = barrier
                self._push(inp)
                return True
            # did this input hold a minimum? Then the minimum may rise: idle outputs hear of it soon
            held_all = r == self._min(self._all)
            held_down = inp.down and r == self._min(self._down)
            inp.r = barrier
            self._push(inp)
            if held_all or held_down:
                self._rose(held_all, held_down, r, now_ns)
        elif barrier < r:
            inp.c.backwards += 1
            return False
        return True

    def barrier_for(self, output_id: OutputId, now_ns: int) -> int | None:
        """The barrier for a packet leaving by ``output_id`` now: ``max(last, min R)`` over the
        output's live inputs (the module docstring), remembered as the output's last barrier.
        None while the output has none (no live input for it, and none before)."""
        out = self._outputs[output_id]
        out.c.barriers += 1
        return self._take(out, now_ns)

    def peek(self, output_id: OutputId) -> int | None:
        """What :meth:`barrier_for` would answer, without remembering it."""
        out = self._outputs[output_id]
        m = self._min(self._down if out.up else self._all)
        last = out.last
        if self._fenced(out) or m is None or (last is not None and m < last):
            return last
        return m

    def note_sent(self, output_id: OutputId, now_ns: int) -> None:
        """``output_id`` carried a 1Pipe packet at ``now_ns``: its next beacon is ``T_beacon`` later
        (the packet carried the barrier: a prompt beacon is no longer needed)."""
        out = self._outputs.get(output_id)
        if out is not None and now_ns > out.sent_at:
            out.sent_at = now_ns
            out.prompt = False

    # ------------------------------------------------------------------ time
    def next_deadline(self) -> int | None:
        """The earliest of the next beacon and the next input timeout (a lower bound)."""
        b = self._beacon_heap[0][0] if self._beacon_heap else None
        t = self._timeout_heap[0][0] if self._timeout_heap else None
        if b is None:
            return t
        return b if t is None or b < t else t

    def on_timer(self, now_ns: int) -> list[InputId]:
        """Input timeouts (§6): every live input silent for ``timeout_ns`` (the input timeout
        plus the timer slack) leaves the minima, or, with ``hold=True``, becomes held in them at
        its last ``R`` (§8 step 7). Returns those inputs."""
        heap = self._timeout_heap
        timeout = self.timeout_ns
        out: list[InputId] = []
        dropped = False
        while heap and heap[0][0] <= now_ns:
            _, _, inp = heapq.heappop(heap)
            inp.queued = False
            if not inp.live or inp.held or self._inputs.get(inp.id) is not inp:
                continue
            due = inp.heard_at + timeout
            if due > now_ns:
                self._file_timeout(inp, at=due)
                continue
            inp.c.timeouts += 1
            out.append(inp.id)
            if self.hold:
                # stays in the minima at its R: a commit barrier must not pass a process the
                # controller has not yet dealt with (§8 step 7); nothing rose, no prompt beacon
                inp.held = True
                inp.c.holds += 1
                continue
            inp.live = False
            inp.gen += 1
            self._live -= 1
            dropped = True
        if dropped and self.params.prompt_beacons:
            self._prompt(True, True, now_ns)  # the minima may have risen without them
        return out

    # ------------------------------------------------------------------ holds (§8 step 7)
    def fence(self, input_id: InputId) -> int | None:
        """Hold ``input_id`` now, live or not: its later updates are ignored until
        :meth:`release`. A live input stays in the minima at its ``R`` (the controller fences a
        process it declared failed, so that its last commit is final); one out of the minima
        (never heard, timed out, released) stays out and cannot re-join while held (putting it
        back could lower a barrier). Returns its ``R`` (None: never heard, or not declared, in
        which case nothing changes). Idempotent."""
        inp = self._inputs.get(input_id)
        if inp is None:
            return None
        if not inp.held:
            inp.held = True
            inp.c.holds += 1
        return inp.r

    def release(self, input_id: InputId, now_ns: int = 0, *, ban: bool = False) -> bool:
        """Take ``input_id`` out of the minima and end its hold (the controller's RESUME, §8 step
        7), as a timeout does with ``hold=False``: it stays declared and, heard again, re-joins
        under the freeze as a new input (a recovered process is a new process, §8). The minima
        may rise: outputs get prompt beacons (``now_ns``: not before then). False for an
        undeclared input.

        ``ban``: it stays held out of the minima until :meth:`admit`. The controller releases a
        failed process with a ban: if it is still alive (cut off from the controller, never told
        it failed) its commit barrier, stuck on messages nobody will ACK any more, must not come
        back into the minimum; the controller admits it when it registers again (§8 "Recovery")."""
        inp = self._inputs.get(input_id)
        if inp is None:
            return False
        inp.held = ban
        inp.c.releases += 1
        if inp.live:
            inp.live = False
            inp.gen += 1
            self._live -= 1
            if self.params.prompt_beacons:
                self._prompt(True, inp.down, now_ns)
        return True

    def admit(self, input_id: InputId, now_ns: int | None = None) -> bool:
        """Lift a ban (:meth:`release`): heard again, the input re-joins under the freeze. An
        input in the minima is left as it is (a hold is ended by :meth:`release` only). False for
        an undeclared input.

        ``now_ns`` (a process registered again, §8 "Recovery"): the input re-joins the minima at
        once, at the highest barrier any output has given (``R`` never decreases, so not below
        its own), its timeout running from ``now_ns``: until it is heard, nothing passes that
        barrier. (Re-joining only when heard, the process could stamp and send before its commit
        reached the switch, or never reach it, cut off again: receivers would deliver what its
        failure, with a T_f of its old commit, then discards.)"""
        inp = self._inputs.get(input_id)
        if inp is None:
            return False
        if inp.held and not inp.live:
            inp.held = False
            if now_ns is not None:
                lasts = [o.last for o in self._outputs.values() if o.last is not None and (inp.down or not o.up)]
                r = max(lasts, default=inp.r)
                if r is not None:
                    inp.r = r if inp.r is None else max(r, inp.r)
                    inp.heard_at = now_ns
                    inp.live = inp.ever_live = True
                    inp.c.joins += 1
                    self._live += 1
                    self._lagging = True
                    self._push(inp)
                    self._file_timeout(inp, force=True)
                    for out in self._peers.get(input_id, ()):
                        self._file_beacon(out)
        return True

    def due_beacons(self, now_ns: int) -> list[tuple[OutputId, int]]:
        """``(output, barrier)`` for every output that carried nothing for ``T_beacon`` (§5);
        each counts as carrying its beacon. An output with no barrier yet is skipped (counted)
        and asked again ``T_beacon`` later."""
        heap = self._beacon_heap
        t_beacon = self.params.t_beacon_ns
        due: list[tuple[OutputId, int]] = []
        while heap and heap[0][0] <= now_ns:
            _, _, gen, out = heapq.heappop(heap)
            if gen != out.bgen:
                continue  # superseded by a newer entry
            out.queued = False
            if self._outputs.get(out.id) is not out or not self._beaconable(out):
                out.prompt = False  # (beaconable again: its next prompt comes with the next rise)
                continue
            prompt = out.prompt
            at = out.prompt_at + self._prompt_gap() if prompt else out.sent_at + t_beacon
            if at > now_ns:
                self._file_beacon(out, at=at)
                continue
            before = out.last
            b = self._take(out, now_ns)
            out.prompt = False
            if prompt and b is not None and before is not None and b <= before:
                self._file_beacon(out, at=out.sent_at + t_beacon)  # nothing new after all
                continue
            out.sent_at = now_ns
            if prompt:
                out.prompt_at = now_ns
            if b is None:
                out.c.beacons_without_barrier += 1
            else:
                out.c.beacons += 1
                out.c.prompt_beacons += prompt
                due.append((out.id, b))
            self._file_beacon(out, at=now_ns + t_beacon)
        return due

    # ------------------------------------------------------------------ state
    def counters(self) -> dict[str, Any]:
        held = [i for i in self._inputs.values() if i.held]
        return {"inputs": len(self._inputs), "inputs_live": self._live - sum(1 for i in held if i.live),
                "inputs_held": len(held), "outputs": len(self._outputs), "hold": self.hold,
                "timeout_ns": self.timeout_ns, "timer_slack_ns": self.timer_slack_ns,
                "unknown_inputs": self.c.unknown_inputs, "min_all": self._min(self._all),
                "min_down": self._min(self._down)}

    def input_state(self, input_id: InputId, now_ns: int) -> dict[str, Any]:
        """``live``: heard within the timeout and not held; ``held``: frozen until released;
        ``in_min``: counted in the minima (live, or held at its ``R``)."""
        inp = self._inputs[input_id]
        return {"down": inp.down, "live": inp.live and not inp.held, "held": inp.held, "in_min": inp.live,
                "r": inp.r,
                "silent_ns": now_ns - inp.heard_at if inp.ever_live else None, **asdict(inp.c)}

    def output_state(self, output_id: OutputId, now_ns: int) -> dict[str, Any]:
        out = self._outputs[output_id]
        c = asdict(out.c)
        if out.frozen_since is not None:
            c["frozen_ns"] += max(0, now_ns - out.frozen_since)
        return {"direction": UP if out.up else DOWN, "barrier": out.last, "frozen": out.frozen_since is not None,
                "idle_ns": now_ns - out.sent_at, **c}

    def joining(self, output_id: OutputId) -> list[InputId]:
        """The inputs in the minima of ``output_id`` below its last barrier: left out until they
        catch up (a held one catches up only by its release)."""
        out = self._outputs[output_id]
        last = out.last
        if last is None:
            return []
        return [i.id for i in self._inputs.values()
                if i.live and (i.down or not out.up) and i.r is not None and i.r < last]

    def input_ids(self) -> list[InputId]:
        return list(self._inputs)

    def output_ids(self) -> list[OutputId]:
        return list(self._outputs)

    # ------------------------------------------------------------------ internals
    def _fenced(self, out: _Output) -> bool:
        """``out`` leads to a process whose input is held (timed out under a controller, fenced,
        or released with a ban): the barrier it gets stays where it was (see :meth:`_take`)."""
        if out.peer is None:
            return False
        peer = self._inputs.get(out.peer)
        return peer is not None and peer.held

    def _take(self, out: _Output, now_ns: int) -> int | None:
        last = out.last
        if self._fenced(out):
            # fail-stop (the paper's §5, restricted failure atomicity; design topic §8): a process
            # held here has been, or is being, declared failed, maybe falsely (a stall, a cut).
            # Alive, it must deliver nothing its senders may recall because of its failure: they
            # recall only after the hold, and a recalled message only stops holding back their
            # commit once recalled, so no barrier given before the hold passes one. Later ones
            # may: the output keeps its last barrier until the process re-registers (admit())
            return last
        m = self._min(self._down if out.up else self._all)
        if m is not None and last is not None and m < last:
            if out.frozen_since is None:  # a joining input is below the last barrier: hold it (§4)
                out.frozen_since = now_ns
                out.c.freezes += 1
            return last
        if out.frozen_since is not None:
            out.c.frozen_ns += max(0, now_ns - out.frozen_since)
            out.frozen_since = None
        if m is None:
            # no live input for this output: say nothing. Repeating ``last`` would keep the next
            # switch's input from us live for ever, pinned at a barrier nobody vouches for any
            # more, and freeze every barrier downstream (a whole rack gone silent); silence lets
            # that input time out there too, and a later rejoin goes through the freeze
            return None
        out.last = m
        return m

    @staticmethod
    def _min(heap: list[tuple[int, int, int, _Input]]) -> int | None:
        while heap:
            r, _, gen, inp = heap[0]
            if inp.live and inp.gen == gen:
                return r
            heapq.heappop(heap)
        return None

    def _push(self, inp: _Input) -> None:
        inp.gen += 1
        r = inp.r
        assert r is not None
        entry = (r, next(self._seq), inp.gen, inp)
        heapq.heappush(self._all, entry)
        if inp.down:
            heapq.heappush(self._down, entry)
        if len(self._all) > 4 * self._live + 64:
            self._rebuild()

    def _rebuild(self) -> None:
        """Drop the stale entries that piled up under the minimum."""
        self._all = [e for e in self._all if e[3].live and e[3].gen == e[2]]
        self._down = [e for e in self._down if e[3].live and e[3].gen == e[2]]
        heapq.heapify(self._all)
        heapq.heapify(self._down)

    def _beaconable(self, out: _Output) -> bool:
        if not out.beacons:
            return False
        if out.peer is None:
            return True
        peer = self._inputs.get(out.peer)
        return peer is not None and peer.live and not peer.held  # no beacons to a failed process

    def _file_beacon(self, out: _Output, at: int | None = None, force: bool = False) -> None:
        if (out.queued and not force) or not self._beaconable(out):
            return
        when = out.sent_at + self.params.t_beacon_ns if at is None else at
        out.bgen += 1
        heapq.heappush(self._beacon_heap, (when, next(self._seq), out.bgen, out))
        out.queued = True

    def _prompt_gap(self) -> int:
        return max(1, self.params.t_beacon_ns // PROMPT_DIVISOR)

    def _prompt(self, rose_all: bool, rose_down: bool, now_ns: int) -> None:
        """A minimum rose: every output that uses it gets a beacon now, unless a packet carries
        the barrier first, and at most one such beacon per ``T_beacon / PROMPT_DIVISOR`` (ours,
        see :data:`PROMPT_DIVISOR`; the ``T_beacon`` timer beacons come on top, for liveness)."""
        gap = self._prompt_gap()
        for out in self._outputs.values():
            if out.prompt or not (rose_down if out.up else rose_all) or not self._beaconable(out):
                continue  # (not beaconable: it hears of the minimum at its timer once it is again)
            out.prompt = True
            self._file_beacon(out, at=max(now_ns, out.prompt_at + gap), force=True)

    def _rose(self, held_all: bool, held_down: bool, r: int, now_ns: int) -> None:
        """An input that held a minimum at ``r`` rose. The outputs of a minimum that rose get
        prompt beacons (:meth:`_prompt`); when another input at ``r`` keeps it there, only the
        outputs whose last barrier is below it (see :meth:`_prompt_lagging`) do: the others'
        beacon would say nothing new (issue 31: with many processes at one clock, such ties are
        the rule, and prompting every output for each of them made the work per packet grow with
        the number of outputs)."""
        rose_all = held_all and self._min(self._all) != r
        rose_down = held_down and self._min(self._down) != r
        if rose_all or rose_down:
            self._prompt(rose_all, rose_down, now_ns)
        if self._lagging and ((held_all and not rose_all) or (held_down and not rose_down)):
            self._prompt_lagging(held_all and not rose_all, held_down and not rose_down, now_ns)

    def _prompt_lagging(self, tie_all: bool, tie_down: bool, now_ns: int) -> None:
        """A minimum did not rise (a tie), but outputs below it (never given a barrier, or left
        behind while it could rise unannounced: a join when it was empty, an input removed) get a
        prompt beacon with something new in it. ``_lagging`` is cleared once none is left, so
        that a tie costs O(1) after the first beacons."""
        gap = self._prompt_gap()
        ma = self._min(self._all)
        md = self._min(self._down)
        left = False
        for out in self._outputs.values():
            if out.prompt:
                continue
            m = md if out.up else ma
            last = out.last
            if last is not None and (m is None or m <= last):
                continue
            if not self._beaconable(out):
                continue  # its peer's join sets _lagging again
            if not (tie_down if out.up else tie_all):
                left = True
                continue
            out.prompt = True
            self._file_beacon(out, at=max(now_ns, out.prompt_at + gap), force=True)
        self._lagging = left

    def _file_timeout(self, inp: _Input, at: int | None = None, force: bool = False) -> None:
        if inp.queued and not force:
            return
        when = inp.heard_at + self.timeout_ns if at is None else at
        heapq.heappush(self._timeout_heap, (when, next(self._seq), inp))
        inp.queued = True


__all__ = ["DIRECTIONS", "DOWN", "PROMPT_DIVISOR", "UP", "AggregatorCounters", "BarrierAggregator", "InputCounters",
           "InputId", "OutputCounters", "OutputId"]
