"""Virtual time: the same switch engines, features and protocol engines as the live daemons, driven
by a discrete-event loop instead of sockets and a clock (docs/sim.md).

Live runs give real kernel traffic at Python speed (about 10^5 frames/s, 1 ms timers, rates scaled
1000x); the papers' results need microsecond timers, 40-100 Gbit/s links, loss rates down to 1e-9
and hundreds of processes. The engines are sans-IO, so the same code runs here at any rate:

- :mod:`.loop`: the event heap and the clock in ns (:class:`EventLoop`, :class:`SimError`);
- :mod:`.network`: a topology file as :class:`Network` (switches, hosts, links as delay lines
  with the live impairments, features from the file);
- :mod:`.hosts`, :mod:`.pktgen`, :mod:`.transport`, :mod:`.tcp`, :mod:`.workload`: host models
  (UDP streams, a switch's packet generator, T/C-SACK and go-back-N, a Reno model, flow sizes);
- :mod:`.scenario` / :mod:`.scenarios`: named runs with one JSON schema in either runtime;
- :mod:`.sweep`: seeds x parameters in parallel processes or on a Dask cluster.

``netstack sim TOPOLOGY --scenario NAME`` runs one; ``netstack bench sim`` measures the runtime.
"""

from .loop import EventLoop, SimError
from .network import Channel, Network, SwitchNode
from .scenario import RunSpec, Scenario, ScenarioError, run

__all__ = ["Channel", "EventLoop", "Network", "RunSpec", "Scenario", "ScenarioError", "SimError", "SwitchNode",
           "run"]
