"""1Pipe ("1Pipe: Scalable Total Order Communication in Data Center Networks", SIGCOMM '21):
one total order for scatterings, through barriers that switches aggregate with ``min``.

Best effort (§2-§4 of the paper, design topics §1-§6 and §9 in docs/papers.md):

- :mod:`.params` and :mod:`.clock`: the parameters (``T_beacon``, windows...) and per-host clocks
  with an offset and a drift;
- :mod:`.endpoint`: the sans-IO endpoint (lib1pipe): scatterings, timestamps, windows and
  credits, host beacons, the receive buffer ordered by (ts, sender, PSN), ACK/NAK;
- :mod:`.barrier`: the sans-IO barrier aggregation of one switch (``R_be`` per input, min over
  live inputs, beacons on idle outputs, input timeout, frozen barrier on a new input);
- :mod:`.feature`: that aggregation as a feature of netstack's software switch;
- :mod:`.check`: the order checker for delivery logs (``netstack onepipe check``).
"""
