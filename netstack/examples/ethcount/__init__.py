"""ethcount, the worked example of a netstack protocol (docs/extending.md walks through it).

A switch feature that counts the frames of one configurable EtherType per port: those the port
receives, and optionally those it sends. It does nothing a real protocol would need it for; it has
every part a real protocol has, each as small as it can be, in this one folder. The registry entry
in netstack/protocols.py is the only line outside it that names it; nothing else in netstack
imports it (tests/test_architecture.py checks both).

The files, in the order a protocol is built (docs/architecture.md "Adding a protocol"):

=================  ====================================================================
header.py          the wire format: a 4-byte probe and its fast ``struct`` codec
layer.py           the same probe as a Scapy layer (crafting, dissecting; never the data path)
engine.py          the sans-IO engine: one port's counter, time and frames in as arguments
feature.py         the engine as a switch feature (``FeatureBase`` hooks)
topology.py        ``[links.features.<end>] ethcount = {...}`` in a topology file
control.py         what every switch daemon serves (``ethcount_enable``...), and the
                   ``enable`` / ``disable`` / ``status`` the CLI calls
command.py         ``netstack ethcount enable|disable|status``
scenarios.py       ``netstack sim ... --scenario ethcount-stream``, in virtual time
ethcount.toml      a topology that uses it: h1 - sw1 - h2
tests/             unit, property (hypothesis) and live tests of all of the above
=================  ====================================================================
"""
