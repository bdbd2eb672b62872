"""T/C-SACK ("An Updated ACK mechanism based on RDMA", draft-chen-tsvwg-updated-ack-00): a
window-less transport whose receiver acknowledges every T or every N packets with SACK ranges,
and the go-back-N baseline (RoCE RC's recovery) it is compared with. Design: docs/tcsack.md.

- :mod:`.params`: :class:`TcsParams` (preset rate, T, N, payload size).
- :mod:`.sender` / :mod:`.receiver`: the T/C-SACK engines, sans-IO (:mod:`netstack.engine`'s
  contract: ACKs leave a receiver as ``Transmit`` actions; counters are dataclasses in ``.c``).
- :mod:`.gbn`: the go-back-N engines, sans-IO, same wire format.
- :mod:`.scenarios`: the ``tcsack-transfer`` scenario, in virtual time (``netstack.sim``, through
  the real switches) or live; ``netstack bench tcsack`` sweeps it.
- :mod:`.live`: the engines on real UDP sockets (``python -m netstack.tcsack``), with kernel
  TCP as the third contender.
"""

from .common import ReceiverBase, SenderBase
from .gbn import GbnReceiver, GbnSender
from .params import TcsParamError, TcsParams
from .receiver import TcsReceiver
from .sender import TcsSender

#: protocol name -> (sender engine, receiver engine)
ENGINES: dict[str, tuple[type[SenderBase], type[ReceiverBase]]] = {
    "tcsack": (TcsSender, TcsReceiver),
    "gbn": (GbnSender, GbnReceiver),
}

__all__ = ["ENGINES", "GbnReceiver", "GbnSender", "TcsParamError", "TcsParams", "TcsReceiver", "TcsSender"]
