"""Scapy layer for the 1Pipe header (UDP 40100); codec in :mod:`headers.onepipe`.

``OnePipe`` has the record's six fields with the same names and values (48-bit timestamps
as integers, ``opcode`` as the enum's value, ``flags`` as a FlagsField that compares equal
to the record's int). Whatever follows the 24 bytes is the message fragment, dissected as Raw.

Binding: dissection picks ``OnePipe`` when *either* UDP port is one of 1Pipe's
(``headers.onepipe.PORTS``, 40100-40199: each process binds its own). Binding the source port
as well lets a capture of either direction dissect (ACKs return to the sender's port).
Building ``UDP()/OnePipe()`` sets both ports to 40100 unless given. A process on another port:
call :func:`bind_port`.

Sealed datagrams (a deployment with keys) end with the authentication trailer, which no field
announces: dissection leaves it at the end of the ``Raw`` after ``OnePipe`` (a sealed BEACON's
``Raw`` is the trailer alone). :func:`split_sealed` takes it apart; build one as
``UDP()/OnePipe()/Raw(fragment)/NetstackAuth(...)`` (MAC: ``netstack.onepipe.auth``).
"""

from __future__ import annotations

import scapy.layers.inet  # noqa: F401  (binds IP to Ether and UDP to IP so Ether(raw) reaches us)
from scapy.fields import BitField, ByteEnumField, FlagsField, IntField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_bottom_up, bind_top_down

from headers.auth import TRAILER_LEN
from headers.layers.auth import NetstackAuth
from headers.onepipe import PORTS, OnePipeOpcode
from headers.registry import UdpPort

_OPCODE_NAMES = {op.value: op.name for op in OnePipeOpcode}
# flag bit names, bit 0 first (FlagsField order); bits 2-7 are reserved
_FLAG_NAMES = ["EOM", "ECE", "SOM", "R3", "R4", "R5", "R6", "R7"]


class OnePipe(Packet):
    name = "1Pipe"
    fields_desc = [
        BitField("msg_ts", 0, 48),
        BitField("be_barrier", 0, 48),
        BitField("commit_barrier", 0, 48),
        IntField("psn", 0),
        ByteEnumField("opcode", int(OnePipeOpcode.DATA), _OPCODE_NAMES),
        FlagsField("flags", 0, 8, _FLAG_NAMES),
    ]

    def mysummary(self) -> str:
        return self.sprintf("1Pipe %opcode% ts=%msg_ts% be=%be_barrier% commit=%commit_barrier% psn=%psn%")


def split_sealed(pkt: Packet) -> tuple[bytes, NetstackAuth]:
    """``(fragment, trailer)`` of a dissected sealed 1Pipe packet: what follows its ``OnePipe``
    layer, less the last 17 bytes, and those as :class:`NetstackAuth`. ValueError when fewer than
    17 bytes follow (an unsealed packet)."""
    rest = bytes(pkt[OnePipe].payload)
    if len(rest) < TRAILER_LEN:
        raise ValueError(f"{len(rest)} bytes after the 1Pipe header: no room for a {TRAILER_LEN}-byte trailer")
    return rest[:-TRAILER_LEN], NetstackAuth(rest[-TRAILER_LEN:])


def bind_port(port: int) -> None:
    """Dissect UDP traffic to or from ``port`` as 1Pipe (for processes not on 40100)."""
    bind_bottom_up(UDP, OnePipe, dport=port)
    bind_bottom_up(UDP, OnePipe, sport=port)


for _port in PORTS:  # every process's port (headers.onepipe.PORTS)
    bind_port(_port)
bind_top_down(UDP, OnePipe, sport=int(UdpPort.ONEPIPE), dport=int(UdpPort.ONEPIPE))
