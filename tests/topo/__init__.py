"""Shared pieces of the topology tests."""

from tests.topologies import header, host_pair

#: The smallest live topology: two hosts on one veth link (no switch).
PAIR = header("pair") + host_pair()
