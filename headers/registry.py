"""One registry of the EtherTypes, UDP ports and addresses netstack puts on the wire.

docs/wire-formats.md "Registry" documents these values; where a public implementation exists
(NUS-SNL/linkguardian, jonlanglet/DTA) we use its numbers so captures interoperate.
"""

from __future__ import annotations

from enum import IntEnum


class EtherType(IntEnum):
    IPV4 = 0x0800
    ARP = 0x0806
    VLAN = 0x8100
    IPV6 = 0x86DD
    MAC_CONTROL = 0x8808  # 802.3 MAC control; 802.1Qbb PFC is opcode 0x0101
    LINKGUARDIAN = 0xABCD  # as in the public P4 implementation


class UdpPort(IntEnum):
    ROCEV2 = 4791
    DTA = 40040  # reports, translator-bound
    DTA_SOURCE = 40041  # source port the public generators use
    DTA_NACK = 40044  # NACKs back to the reporter
    ONEPIPE = 40100  # ours
    TCSACK = 40200  # ours
    TCD = 40300  # ours: TCD data packets (the CNPs go back from it to the sender's port)


class IpProto(IntEnum):
    ICMP = 1
    TCP = 6
    UDP = 17


#: 802.1Qbb / 802.3x reserved MAC-control group address. Linux bridges drop frames to
#: it (docs/architecture.md "The live runtime"), so across a bridge PFC must go to the peer's unicast MAC instead.
PFC_DST_MAC = bytes.fromhex("0180c2000001")
BROADCAST_MAC = b"\xff" * 6

#: Length of the software FCS trailer on switch-to-switch links.
FCS_LEN = 4

#: Shortest Ethernet frame without FCS (64 B on the wire minus the 4-byte FCS).
MIN_FRAME = 60
