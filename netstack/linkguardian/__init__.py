"""LinkGuardian and LinkGuardianNB (LinkGuardian paper): link-local retransmission between two switches.

- :mod:`.params`: Eq. 2 (:func:`copies_for`) and :class:`LGParams` (thresholds, timeout,
  scaling, docs/architecture.md "Time and scale").
- :mod:`.sender` / :mod:`.receiver`: the sans-IO engines (§3-§3.5, Algorithms 1 and 2).
- :mod:`.feature`: the engines as software-switch features, with run-time enable/disable
  (:func:`enable_sender`, :func:`enable_receiver`, :func:`disable`, :func:`status`).
- :mod:`.topology`: LinkGuardian from a topology file (``[links.features.<end>] linkguardian``),
  for the live daemons and the virtual-time runtime alike.
- :mod:`.scenarios`: ``lg-stream`` (the live cross-check) and ``lg-stress`` (Fig. 8's stress
  test) on ``netstack.sim``, and :func:`~.scenarios.stress_topology` (the Fig. 7 testbed).
"""

from .feature import (
    RECEIVER,
    SENDER,
    LGReceiverFeature,
    LGSenderFeature,
    detach,
    disable,
    enable_receiver,
    enable_sender,
    features,
    forward_as_received,
    status,
)
from .params import LGParams, copies_for
from .receiver import LGReceiver
from .sender import LG_CONTROL_MAC, LGSender

__all__ = [
    "LG_CONTROL_MAC",
    "RECEIVER",
    "SENDER",
    "LGParams",
    "LGReceiver",
    "LGReceiverFeature",
    "LGSender",
    "LGSenderFeature",
    "copies_for",
    "detach",
    "disable",
    "enable_receiver",
    "enable_sender",
    "features",
    "forward_as_received",
    "status",
]
