"""Scapy layers for netstack's headers: crafting, dissection, pcaps and fuzzing (never the data path).

Importing this package binds every layer to its EtherType / UDP port, so that
``scapy.layers.l2.Ether(raw_frame)`` dissects whole netstack frames, e.g.
Ether/LinkGuardian data tag/IP/UDP/DTA/KeyWrite or Ether/IP/UDP/BTH/RETH/payload/ICRC.
PFC uses Scapy's own ``scapy.contrib.mac_control`` and RoCEv2 extends ``scapy.contrib.roce``.
"""

from . import dta, linkguardian, onepipe, pfc, roce, tcd, tcsack

__all__ = ["dta", "linkguardian", "onepipe", "pfc", "roce", "tcd", "tcsack"]
