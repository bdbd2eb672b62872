"""Scapy side of RoCEv2: scapy's own ``scapy.contrib.roce`` plus the extended headers it lacks.

contrib already has ``BTH`` (bound to UDP dport 4791, with the ICRC as a trailing
``FCSField`` that it computes on build) and ``AETH`` (bound to ACKNOWLEDGE). We reuse both
rather than bind a competing BTH, and add ``RETH``, ``AtomicETH`` and ``AtomicAckETH`` with
the field names and values of the records in :mod:`headers.roce`. Importing this module is
what makes ``Ether(raw)`` dissect Ether/IP/UDP/BTH/RETH/Raw and the ICRC.

What we found in contrib (scapy 2.6-2.8), and what this module does about it:

* The ICRC is a ``TrailerField``: on dissection BTH takes the *last four bytes of what it
  is given* as ``icrc`` and hands the rest to its payload. IP and UDP first trim the
  datagram to their length fields (Ethernet padding goes to ``Padding``), so BTH is given
  exactly BTH..ICRC and the extended headers and ``Raw`` payload come out right, with or
  without extended headers. Nothing to fix; the tests check it.
* ``BTH.icrc`` holds the wire bytes read big-endian, while the ICRC is stored
  least-significant byte first: ``BTH.icrc == int.from_bytes(wire[-4:], "big")`` and
  :func:`headers.roce.icrc_of` returns ``int.from_bytes(wire[-4:], "little")``. Use
  :func:`icrc_field` to convert.
* A lone ``bytes(BTH(...))`` (no UDP underneath) warns and appends an ICRC of 0; pass
  ``icrc=0`` to build a bare 12-byte BTH + 4 zero bytes without the warning.
* contrib binds AETH to RC ACKNOWLEDGE (0x11) and then RD ACKNOWLEDGE (0x51), so
  ``BTH()/AETH()`` built opcode 0x51. We re-bind the build direction to RC 0x11.
* AtomicAckETH must follow an AETH only under ATOMIC_ACKNOWLEDGE, a condition on the BTH
  below, which ``bind_layers`` cannot express; we wrap ``AETH.guess_payload_class`` to look
  at its underlayer. This is the one change to a contrib class's behaviour.
"""

from __future__ import annotations

from scapy.contrib.roce import AETH, BTH
from scapy.fields import IntField, LongField, XIntField, XLongField
from scapy.packet import Packet, bind_bottom_up, bind_layers, bind_top_down

from headers.roce import Opcode

__all__ = ["AETH", "BTH", "RETH", "AtomicAckETH", "AtomicETH", "icrc_field"]


class RETH(Packet):
    """RDMA Extended Transport Header (fields as :class:`headers.roce.RETH`)."""

    name = "RETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        IntField("dma_len", 0),
    ]


class AtomicETH(Packet):
    """Atomic Extended Transport Header (fields as :class:`headers.roce.AtomicETH`)."""

    name = "AtomicETH"
    fields_desc = [
        XLongField("va", 0),
        XIntField("rkey", 0),
        LongField("swap_add", 0),
        LongField("compare", 0),
    ]


class AtomicAckETH(Packet):
    """Atomic ACK Extended Transport Header (field as :class:`headers.roce.AtomicAckETH`)."""

    name = "AtomicAckETH"
    fields_desc = [
        LongField("orig_remote_data", 0),
    ]


def icrc_field(icrc: int) -> int:
    """contrib's ``BTH.icrc`` value for an ICRC as :func:`headers.roce.icrc_of` returns it."""
    return int.from_bytes(icrc.to_bytes(4, "little"), "big")


# Dissection for every opcode that carries the header; the last bind_layers of each class
# sets the opcode BTH()/X() builds with (WRITE Only and FETCH_ADD: what DTA sends).
bind_bottom_up(BTH, RETH, opcode=Opcode.RDMA_WRITE_FIRST)
bind_bottom_up(BTH, RETH, opcode=Opcode.RDMA_READ_REQUEST)
bind_layers(BTH, RETH, opcode=Opcode.RDMA_WRITE_ONLY)
bind_bottom_up(BTH, AtomicETH, opcode=Opcode.COMPARE_SWAP)
bind_layers(BTH, AtomicETH, opcode=Opcode.FETCH_ADD)
for _op in (Opcode.ATOMIC_ACKNOWLEDGE, Opcode.RDMA_READ_RESPONSE_FIRST, Opcode.RDMA_READ_RESPONSE_LAST,
            Opcode.RDMA_READ_RESPONSE_ONLY):
    bind_bottom_up(BTH, AETH, opcode=_op)
bind_top_down(BTH, AETH, opcode=Opcode.ACKNOWLEDGE)

_contrib_aeth_guess = AETH.guess_payload_class


def _aeth_guess_payload_class(self: Packet, payload: bytes) -> type[Packet]:
    bth = self.underlayer
    if isinstance(bth, BTH) and bth.opcode == Opcode.ATOMIC_ACKNOWLEDGE:
        return AtomicAckETH
    return _contrib_aeth_guess(self, payload)


if not getattr(AETH.guess_payload_class, "_netstack", False):  # idempotent under reload
    _aeth_guess_payload_class._netstack = True  # type: ignore[attr-defined]
    AETH.guess_payload_class = _aeth_guess_payload_class  # type: ignore[method-assign]
