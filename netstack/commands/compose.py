"""``netstack compose generate``: a docker-compose / Swarm stack file for a topology."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

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
    _register_lab(csub)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


LAB_EPILOG = """\
examples:
  netstack compose lab up --engines 2                 engines e1, e2 (hostnames lab-e1, lab-e2), one swarm
  export DOCKER_HOST=unix:///var/lib/netstack-lab/lab/e1/docker.sock     the manager, as 'up' prints
  netstack compose generate default --swarm --place h1,sw1=lab-e1 --place sw2,h2,c1=lab-e2 -o stack.yml
  docker stack deploy -c stack.yml netstack
  netstack exec h1 -- ping -c3 10.0.0.2               h1 on e1 to h2 on e2, across the engines
  netstack compose lab status
  netstack compose lab down                           stacks, swarm, engines, namespaces, files: all gone

Each engine is a Docker engine of its own (dockerd + containerd, own data root, socket and
hostname) in a network namespace of its own on a LAN bridge: the way to try a multi-machine swarm
on one machine (docs/containers.md "Two machines on one host"). The image comes from this host's
engine: build it first (scripts/docker/build-image.sh)."""


def _register_lab(csub: argparse._SubParsersAction) -> None:
    from ..container.lab import DEFAULT_PREFIX

    lab = csub.add_parser("lab", help="a swarm of several Docker engines on this one machine, to try --swarm",
                          description="Stand-in machines for a Docker Swarm: each engine runs in network and UTS "
                                      "namespaces of its own, joined by a LAN; the first is the swarm's manager.",
                          epilog=LAB_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    lsub = lab.add_subparsers(dest="lab_command", metavar="ACTION")
    up = lsub.add_parser("up", help="make the engines, load the image into each, form the swarm")
    up.add_argument("--engines", type=int, default=2, metavar="N", help="how many engines (2-8; default %(default)s)")
    up.add_argument("--image", default="netstack:latest",
                    help="the image each engine loads from this host's engine (default: %(default)s)")
    up.add_argument("--subnet", metavar="CIDR", help="the LAN's range (default: a free /24 of 10.250.0.0/16)")
    up.add_argument("--mtu", type=int, default=1500,
                    help="the LAN's MTU, as the network between machines has (default %(default)s)")
    up.add_argument("--json", action="store_true", help="print the lab as JSON at the end")
    status = lsub.add_parser("status", help="the engines, their swarm state and the swarm's nodes (exit 1 when an "
                                            "engine does not answer or a node is not ready)")
    status.add_argument("--json", action="store_true", help="as JSON")
    down = lsub.add_parser("down", help="remove the stacks, the swarm, the engines and everything of the lab "
                                        "(idempotent)")
    down.add_argument("--json", action="store_true", help="what was removed, as JSON")
    for sp in (up, status, down):
        sp.add_argument("--prefix", default=DEFAULT_PREFIX,
                        help="the lab's name: namespaces <prefix>-e1..., hostnames alike (default %(default)s)")
        sp.set_defaults(func=cmd_lab)
    lab.set_defaults(func=lambda args: (lab.print_help(), 2)[1])


def cmd_lab(args: argparse.Namespace) -> int:
    import json

    from ..container import lab

    def say(line: str) -> None:
        print(f"[lab] {line}", file=sys.stderr, flush=True)

    if args.lab_command == "up":
        made = lab.up(args.prefix, args.engines, image=args.image, subnet=args.subnet, mtu=args.mtu, say=say)
        if args.json:
            print(json.dumps(lab.status(made.prefix), indent=2))
        else:
            print(_lab_summary(made))
        return 0
    if args.lab_command == "status":
        st = lab.status(args.prefix)
        print(json.dumps(st, indent=2) if args.json else _lab_table(st))
        return 0 if st["ok"] else 1  # an engine not answering, or a node of the swarm not ready
    removed = lab.down(args.prefix, say=say)
    if not removed:
        say(f"no lab {args.prefix}: nothing to do")
    if args.json:
        print(json.dumps({"prefix": args.prefix, "removed": removed}))
    return 0


def _lab_summary(made: Any) -> str:
    first = made.machines[0]
    rest = made.machines[1:]
    hosts = " ".join(f"--place NODES={m.hostname}" for m in made.machines)
    return "\n".join([
        f"lab {made.prefix}: {len(made.machines)} engines on {made.subnet}; the swarm's manager is {first.hostname}",
        *(f"  {m.name}: hostname {m.hostname}, {m.address}, "
          f"DOCKER_HOST=unix://{m.workdir}/docker.sock" for m in made.machines),
        "next:",
        f"  export DOCKER_HOST=unix://{first.workdir}/docker.sock",
        f"  netstack compose generate TOPOLOGY --swarm {hosts} -o stack.yml",
        "  docker stack deploy -c stack.yml netstack",
        f"  netstack compose lab down{'' if made.prefix == 'lab' else ' --prefix ' + made.prefix}"
        + (f"   (workers: {', '.join(m.hostname for m in rest)})" if rest else ""),
    ])


def _lab_table(st: dict[str, Any]) -> str:
    lines = [f"lab {st['prefix']} ({st['kind']}): LAN {st['subnet']}, MTU {st['mtu']}, {st['dir']}",
             "| engine | hostname | address | answers | swarm | running | DOCKER_HOST |",
             "|---|---|---|---|---|---|---|"]
    for e in st["engines"]:
        lines.append(f"| {e['engine']} | {e['hostname']} | {e['address']} | {'yes' if e['answers'] else 'NO'} | "
                     f"{e['swarm'] or '-'} | {e['containers_running'] if e['answers'] else '-'} | {e['docker_host']} |")
    ready = [n for n in st["nodes"] if n["ready"]]
    lines.append(f"swarm nodes ready: {len(ready)}/{len(st['nodes'])} "
                 f"({', '.join(n['hostname'] + (' (manager)' if n['manager'] else '') for n in st['nodes'])})")
    return "\n".join(lines)


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
