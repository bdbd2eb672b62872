"""TCD ("Congestion Detection in Lossless Networks", SIGCOMM 2021): ternary congestion detection
at switch egress ports under PFC.

Switch side (sans-IO):

- :mod:`.params`: :class:`TcdParams` (T_on^max, K, W, derived from a port's rate, delay and the
  PFC thresholds that pause it) and :class:`EcnParams` (the classic ECN baseline);
- :mod:`.detector`: :class:`Detector`, the per-port, per-class state machine (TCD §3.2.1:
  non-congestion, undetermined, congestion);
- :mod:`.marker`: :class:`TcdMarker` and :class:`EcnMarker`, marking policies for
  ``Switch.set_marking_policy`` (the port state into the IP ECN field, ``headers.tcd``; marks
  counted per flow), the TCD marker also a switch feature whose timer re-evaluates idle ports;
- :mod:`.feature`: installs a marker on a switch port (its queue probe and timer);
- :mod:`.topology`: the ``tcd`` topology feature; :mod:`.control`: the switch daemon's
  ``tcd_enable`` / ``tcd_disable`` / ``tcd_status`` and the CLI's orchestration;
- :mod:`.scenarios` (§3.1, both runtimes), :mod:`.series` (queue and rate over time, Figs. 3-4),
  :mod:`.verdict` (is a run valid?).
"""

from .detector import Detector
from .marker import EcnMarker, TcdMarker
from .params import EcnParams, TcdParamError, TcdParams

__all__ = ["Detector", "EcnMarker", "EcnParams", "TcdMarker", "TcdParamError", "TcdParams"]
