"""The contract every sans-IO protocol engine keeps, and the actions engines hand to their shell.

An engine (LinkGuardian's sender and receiver, the T/C-SACK and go-back-N endpoints, DTA's
translator and responder, the TCP model) never touches a socket, a clock or asyncio, after
h11 and aioquic: time comes in as ``now_ns``, bytes come in as arguments, and what the engine
wants done comes out as return values and *actions*. The shell (a switch feature, a live
daemon, a simulated host) carries actions out; tests and hypothesis drive engines directly.

- The primary output of a call is its return value (the frames a receiver delivers in order,
  the datagrams a sender's ``poll`` releases).
- Everything else an engine wants done goes into its ``actions`` (an :class:`ActionQueue`), as
  typed :data:`Action` objects from this module, in the order the engine decided them. The
  shell takes them with ``engine.actions.take_all()`` after each call (one place to drain, no
  side lists per kind of output). A shell may take them by kind instead (``take(Transmit)``)
  when the protocol fixes an order between kinds: LinkGuardian's receiver feature puts every
  loss notification on the wire before it acts on a pause or resume decided in the same call.
  Engines whose outputs are all return values (the senders, the TCP model) keep an empty queue.
- ``next_deadline()`` says when to call the engine's timer next (None: nothing pending).

Actions are NamedTuples: two actions of different kinds with equal fields compare equal as
tuples (``Transmit(True) == Backpressure(True)``), so tell kinds apart with ``isinstance``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, TypeVar

# Actions are NamedTuples: immutable, typed, and created at C speed (an engine emits one per
# ACK or control frame, on the data path).


class Transmit(NamedTuple):
    """Bytes to send back toward the engine's peer: a control frame (LinkGuardian's loss
    notification or leading ACK), an ACK datagram (T/C-SACK), a NACK (DTA)."""

    data: bytes


class Backpressure(NamedTuple):
    """Ask the upstream sender to pause (True) or resume (False) its normal traffic: the shell
    turns it into 802.1Qbb frames on the data classes ("Masking Corruption Packet Losses in
    Datacenter Networks with Link-local Retransmission", §3.3 Algorithm 2)."""

    paused: bool


class SendTo(NamedTuple):
    """A datagram for an addressed peer: a 1Pipe endpoint's data, ACK or NAK to another process
    (``dst``), or its beacon to the switch it hangs off (``dst`` is the endpoint's
    ``UPLINK`` address: hop by hop, consumed by that switch, never forwarded)."""

    dst: Any
    data: bytes


#: the actions of this module; a protocol whose engine decides kinds of its own defines them in its
#: package and queues them in an :class:`ActionQueueOf` over its own union (1Pipe's endpoints and
#: its controller: netstack/onepipe/actions.py)
Action = Transmit | Backpressure | SendTo
#: what a queue holds
ActT = TypeVar("ActT")
#: one kind of action (they are all NamedTuples)
A = TypeVar("A", bound=tuple[Any, ...])


class ActionQueueOf(list[ActT]):
    """The actions an engine has decided and its shell has not taken yet, in decision order.

    A list underneath, so that ``if engine.actions:`` and ``emit`` cost what a list's truth
    test and ``append`` cost: shells check after every frame."""

    __slots__ = ()

    #: queue an action (the engine's side)
    emit = list.append

    def take_all(self) -> list[ActT]:
        """Every pending action, in decision order; the queue is empty afterwards."""
        out = list(self)
        self.clear()
        return out

    def take(self, kind: type[A]) -> list[A]:
        """The pending actions of one kind, in order; the others stay queued."""
        taken = [a for a in self if isinstance(a, kind)]
        if taken:
            self[:] = [a for a in self if not isinstance(a, kind)]
        return taken

    def pending(self, kind: type[A]) -> list[A]:
        """The pending actions of one kind, without taking them."""
        return [a for a in self if isinstance(a, kind)]


class ActionQueue(ActionQueueOf[Action]):
    """An engine's queue of this module's actions (every engine's but the 1Pipe controller's)."""

    __slots__ = ()


class Engine(Protocol):
    """What every engine offers its shell (beyond its protocol-specific input methods)."""

    @property
    def actions(self) -> ActionQueueOf[Any]:
        """(An attribute in every engine; read-only here, so that a queue of any kinds of action fits.)"""

    def next_deadline(self) -> int | None: ...

    def counters(self) -> dict[str, Any]: ...


__all__ = ["Action", "ActionQueue", "ActionQueueOf", "Backpressure", "Engine", "SendTo", "Transmit"]
