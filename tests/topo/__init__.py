"""Shared pieces of the topology tests."""

import textwrap

#: The smallest live topology: two hosts on one veth link (no switch).
PAIR = textwrap.dedent(
    """
    [topology]
    name = "pair"

    [[nodes]]
    name = "a"
    kind = "host"
    ip = "10.9.0.1/24"

    [[nodes]]
    name = "b"
    kind = "host"
    ip = "10.9.0.2/24"

    [[links]]
    name = "a-b"
    a = "a"
    b = "b"
    """
)
