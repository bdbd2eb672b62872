"""``netstack node run | health``: the entry point of a netstack container (docs/containers.md)."""

from __future__ import annotations

import argparse

from ..errors import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("node", help="inside a container: run one topology node (the image's entry point)",
                       description="What each container of a compose/Swarm deployment runs. The topology comes "
                                   "from NETSTACK_TOPOLOGY (a shipped name) or NETSTACK_TOPOLOGY_TOML (a file's "
                                   "text), the prefix from NETSTACK_PREFIX, the per-link networks' range from "
                                   "NETSTACK_UNDERLAY: 'netstack compose generate' writes all three.")
    nsub = p.add_subparsers(dest="node_command", metavar="SUBCOMMAND")
    r = nsub.add_parser("run", help="set up the node's tunnels and run its daemons until SIGTERM",
                        description="Find the container's interface on each link's network, make the link's port "
                                    "a VXLAN tunnel to the peer's container, start the node's daemons (logs on "
                                    "stdout) and supervise them.")
    r.add_argument("node", help="the topology node this container is (h1, sw1, ...)")
    r.set_defaults(func=cmd_run)
    h = nsub.add_parser("health", help="exit 0 when every port is up and every daemon answers (health check)")
    h.add_argument("node", nargs="?", help="the node (default: the one named like this container's hostname)")
    h.add_argument("--joining-ok", action="store_true",
                   help="healthy while still waiting for the peers too (Swarm publishes a task's name only "
                        "once it is healthy, and the peers wait for that name)")
    h.set_defaults(func=cmd_health)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_run(args: argparse.Namespace) -> int:
    import os

    from ..container.node import run

    if os.geteuid() != 0:
        raise CommandError("needs root in the container (tunnels, addresses, nft)")
    return run(args.node)


def cmd_health(args: argparse.Namespace) -> int:
    from ..container.health import check

    return check(args.node, args.joining_ok)
