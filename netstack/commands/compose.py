"""``netstack compose generate``: a docker-compose / Swarm stack file for a topology."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import CommandError

EPILOG = """\
examples:
  netstack compose generate default -o docker-compose.yml     the shipped file, regenerated
  netstack compose generate my.toml --prefix lab -o lab.yml   any topology file (embedded in the file)
  netstack compose generate default --swarm \\
      --place h1,sw1=machine-a --place sw2,h2,c1=machine-b -o stack.yml
  docker stack deploy -c stack.yml netstack                   on a swarm manager

Every link becomes a docker network (bridge; overlay with --swarm) carrying a VXLAN tunnel
between the two containers, so pause frames and unknown unicast cross it as on a veth
(docs/containers.md). Build the image first: scripts/docker/build-image.sh."""


def register(sub: argparse._SubParsersAction) -> None:
    from ..container.compose import DEFAULT_IMAGE
    from ..container.plan import DEFAULT_UNDERLAY

    p = sub.add_parser("compose", help="run a topology in containers (docker-compose, Docker Swarm)",
                       description="Container deployments of a topology: one container per node, running the "
                                   "same daemons as 'netstack up'. The CLI (status, impair, lg, dta, exec) finds "
                                   "such a deployment by its labels (docs/containers.md).")
    csub = p.add_subparsers(dest="compose_command", metavar="SUBCOMMAND")
    g = csub.add_parser("generate", help="write a compose (or Swarm stack) file for a topology",
                        description="Write the compose file of TOPOLOGY: one service per node, one network per "
                                    "link. A shipped topology is referred to by name (the image has it); a file's "
                                    "text is embedded, so a stack spread over machines needs no file on them.",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    g.add_argument("topology", nargs="?", default="default",
                   help="TOML topology file, or a shipped topology by name (default: %(default)s)")
    g.add_argument("-o", "--output", help="write here instead of stdout")
    g.add_argument("--prefix", help="the deployment's prefix, as 'netstack up --prefix' (default: the file's)")
    g.add_argument("--image", default=DEFAULT_IMAGE,
                   help="the image (default: %(default)s; NETSTACK_IMAGE in the environment overrides it "
                        "when the file is used)")
    g.add_argument("--underlay", default=DEFAULT_UNDERLAY, metavar="CIDR",
                   help="the range each link's docker network gets a /28 of (default: %(default)s); give "
                        "distinct ranges to deployments that run side by side")
    g.add_argument("--swarm", action="store_true",
                   help="a stack file for 'docker stack deploy': overlay networks, dnsrr endpoints")
    g.add_argument("--place", action="append", default=[], metavar="NODES=MACHINE",
                   help="with --swarm: run these nodes (comma-separated) on the swarm machine with this "
                        "hostname (repeatable)")
    g.set_defaults(func=cmd_generate)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def parse_place(values: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        nodes, sep, machine = value.partition("=")
        if not sep or not nodes.strip() or not machine.strip():
            raise CommandError(f"--place {value!r}: give NODES=MACHINE, e.g. h1,sw1=machine-a")
        for node in (n.strip() for n in nodes.split(",")):
            if not node:
                raise CommandError(f"--place {value!r}: an empty node name")
            if node in out and out[node] != machine.strip():
                raise CommandError(f"--place: node {node} placed on both {out[node]} and {machine.strip()}")
            out[node] = machine.strip()
    return out


def cmd_generate(args: argparse.Namespace) -> int:
    from ..container.compose import ComposeOptions, generate
    from ..topo.model import load_topology_spec, shipped_topologies, validate_prefix

    placement = parse_place(args.place)
    if placement and not args.swarm:
        raise CommandError("--place needs --swarm (compose runs every container on this machine)")
    try:
        topology = load_topology_spec(args.topology)
        if args.prefix is not None:
            validate_prefix(args.prefix)
    except ValueError as exc:  # a parser's plain ValueError (TopologyError is one too, and says the same)
        raise CommandError(str(exc)) from None
    path = Path(args.topology)
    if path.is_file():
        spec, text = None, path.read_text(encoding="utf-8")
    else:
        spec, text = args.topology, None
        assert spec in shipped_topologies()
    out = generate(topology, spec, text,
                   ComposeOptions(prefix=args.prefix, image=args.image, underlay=args.underlay,
                                  swarm=args.swarm, placement=placement))
    if args.output:
        try:
            Path(args.output).write_text(out)
        except OSError as exc:
            raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        print(f"wrote {args.output}: {len(topology.nodes)} services, {len(topology.links)} networks"
              f"{' (swarm stack)' if args.swarm else ''}", file=sys.stderr)
    else:
        sys.stdout.write(out)
    return 0
