"""The live runtime's I/O: raw-Ethernet sockets, batched sends, the control socket.

Only the daemons import this package; protocol engines never do (they are sans-IO).
"""
