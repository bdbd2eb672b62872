"""Wire formats only: bytes <-> typed records. No I/O, no state, no clocks.

Every header exists twice on purpose (docs/architecture.md "The live runtime"): a fast ``struct`` codec in
``headers.<protocol>`` for the data path, and a Scapy layer in
``headers.layers.<protocol>`` for crafting, dissection, pcaps and fuzzing.
Importing ``headers`` never imports Scapy; ``import headers.layers`` binds every
layer so that ``Ether(raw_bytes)`` dissects whole frames.

Decoders raise :class:`HeaderError` and nothing else on malformed input.
"""

from .errors import HeaderError
from .registry import FCS_LEN, PFC_DST_MAC, EtherType, IpProto, UdpPort

__all__ = ["FCS_LEN", "PFC_DST_MAC", "EtherType", "HeaderError", "IpProto", "UdpPort"]
