"""What 1Pipe's engines ask of their shells beyond :mod:`netstack.engine`'s generic actions, in
the same shape (typed NamedTuples in an ``ActionQueueOf`` over the engine's own union).

**The endpoints** (:class:`~.endpoint.Endpoint`, :class:`~.reliable.ReliableEndpoint`) queue
``SendTo`` and the application's side of 1Pipe's API (its receive call and failure callbacks): :class:`Deliver`,
:class:`SendFail` and, reliable 1Pipe only, :class:`ProcFail` (an :class:`EndpointActionQueue`).

**The reliable-1Pipe controller** (design topic §8 in docs/papers.md; docs/onepipe-reliable.md
"Controller"):
:class:`~.controller.Controller` queues these in its ``actions`` (a :class:`ControllerActionQueue`)
beside the generic ``SendTo``: store writes (:class:`RegisterProcess`, :class:`RecordFailure`,
:class:`RecordRecall`) and requests to every switch (:class:`Fence`, :class:`Release`,
:class:`Admit`). Its shells carry them out in order: daemons/onepipe_controller.py live,
``rscenario.SimController`` in virtual time, tests/onepipe/rfabric.py in memory.

Only 1Pipe's engines emit these, so they live in its package rather than among every engine's
actions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..engine import ActionQueueOf, SendTo


class Deliver(NamedTuple):
    """A message delivered to the application in the total order: its scattering's timestamp,
    its sender, its bytes (1Pipe's ``onepipe_unreliable_recv``)."""

    ts: int
    src: Any
    msg: bytes


class SendFail(NamedTuple):
    """A message the network lost or the receiver refused (1Pipe's ``onepipe_send_fail_callback``:
    best effort never retransmits). ``known`` False (issue 31): the sender gave up waiting (its
    ACK timeout fired: no ACK, no NAK) and cannot tell whether the message was delivered; it may
    have been (a late or lost ACK). True: known not delivered (a NAK, a refusal, a destination
    known failed)."""

    ts: int
    dst: Any
    msg: bytes
    known: bool = True

    def __repr__(self) -> str:
        # as before the field existed when it is True: traces pinned by golden tests stay as they were
        extra = "" if self.known else ", known=False"
        return f"SendFail(ts={self.ts!r}, dst={self.dst!r}, msg={self.msg!r}{extra})"


class ProcFail(NamedTuple):
    """A process failed at ``ts`` (its T_f): reliable 1Pipe's ``onepipe_proc_fail_callback``
    (1Pipe §8 step 6). The shell runs the callback before it sends what follows in the queue."""

    proc: Any
    ts: int


#: everything an endpoint emits, in decision order
EndpointAction = SendTo | Deliver | SendFail | ProcFail


class EndpointActionQueue(ActionQueueOf[EndpointAction]):
    """An endpoint's ``actions``: :class:`netstack.engine.ActionQueue`'s methods over its kinds."""

    __slots__ = ()


class RecordFailure(NamedTuple):
    """Write the failure record ``(proc, incarnation, T_f)`` to the store, then tell the controller
    it is durable (``Controller.recorded``); no notice leaves before (§8 "failure timestamp")."""

    proc: Any
    incarnation: int
    t_f: int
    reason: str


class RecordRecall(NamedTuple):
    """An undeliverable recall for the store: the message from ``sender`` (incarnation
    ``sender_inc``) starting at ``psn`` could not be recalled at ``receiver`` (§8 "Recovery")."""

    sender: Any
    sender_inc: int
    psn: int
    receiver: Any
    receiver_inc: int


class RegisterProcess(NamedTuple):
    """Write a new process incarnation to the store."""

    proc: Any
    incarnation: int


class Fence(NamedTuple):
    """Ask every switch to freeze ``proc``'s commit input (it stops taking updates) and report its
    last commit barrier back (``Controller.report``)."""

    proc: Any


class Release(NamedTuple):
    """Every correct process finished its callback for ``proc``'s failure; the switches remove
    ``proc``'s inputs from their commit minimum (1Pipe §8 step 7, RESUME). A process's input
    (``proc`` an address) stays banned there until :class:`Admit`; a link (a port name) is simply
    removed."""

    proc: Any


class Admit(NamedTuple):
    """``proc`` registered (again): the switches let its input back into their commit minimum (a
    :class:`Release` bans a failed process's input until then)."""

    proc: Any


#: everything the controller engine emits, in decision order
ControllerAction = SendTo | RecordFailure | RecordRecall | RegisterProcess | Fence | Release | Admit


class ControllerActionQueue(ActionQueueOf[ControllerAction]):
    """The controller's ``actions``: :class:`netstack.engine.ActionQueue`'s methods over its kinds."""

    __slots__ = ()


__all__ = ["Admit", "ControllerAction", "ControllerActionQueue", "Deliver", "EndpointAction", "EndpointActionQueue",
           "Fence", "ProcFail", "RecordFailure", "RecordRecall", "RegisterProcess", "Release", "SendFail"]
