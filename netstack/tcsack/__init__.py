"""T/C-SACK (seed 004, draft-chen-tsvwg-updated-ack-00): a window-less transport whose
receiver acknowledges every T or every N packets with SACK ranges, and the go-back-N
baseline (RoCE RC's recovery) it is compared with.

- :mod:`.params`: :class:`TcsParams` (preset rate, T, N, payload size).
- :mod:`.sender` / :mod:`.receiver`: the T/C-SACK engines, sans-IO.
- :mod:`.gbn`: the go-back-N engines, sans-IO, same wire format.
- :mod:`.sim`: a virtual-time path (rate, delay, loss, reordering, duplication) for tests and
  the simulated sweep of ``netstack bench tcsack``.
- :mod:`.live`: the engines on real UDP sockets (``python -m netstack.tcsack``), with kernel
  TCP as the third contender.
"""

from .gbn import GbnReceiver, GbnSender
from .params import TcsParamError, TcsParams
from .receiver import TcsReceiver
from .sender import TcsSender

__all__ = ["GbnReceiver", "GbnSender", "TcsParamError", "TcsParams", "TcsReceiver", "TcsSender"]
