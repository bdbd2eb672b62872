"""``netstack compose generate``: a compose file (or a Swarm stack file) for a topology.

One service per node, each running ``netstack node run NODE`` (``netstack.container.node``)
in the netstack image; one docker network per link, the underlay of that link's VXLAN tunnel
(``netstack.container.plan``). The shipped top-level ``docker-compose.yml`` is this module's
output for the default topology (tests/container checks that they agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..auth.keys import KeyFileError
from ..auth.sign import SIGNER_KINDS, SUFFIX, ensure_signing_key, signing_paths
from ..topo.model import Node, Topology
from . import yamlout
from .plan import DEFAULT_UNDERLAY, VXLAN_OVERHEAD, LinkPlan, PlanError, plan_links

DEFAULT_IMAGE = "netstack:latest"
#: compose file format: 3.8 is read by docker-compose 1.29 and by ``docker stack deploy``
#: of Docker 20.10 alike
COMPOSE_VERSION = "3.8"
#: labels every container and network carries: how the CLI finds a deployment
LABEL_PREFIX = "io.netstack.prefix"
LABEL_NODE = "io.netstack.node"
LABEL_KIND = "io.netstack.kind"
LABEL_LINK = "io.netstack.link"
#: only what the data path needs: NET_ADMIN to create the tunnels, set addresses, MTUs and
#: offloads and load nft rules; NET_RAW for the switches' AF_PACKET ports (in docker's default
#: set, named so that the file says what the daemons use). Never ``privileged``.
CAPABILITIES = ["NET_ADMIN", "NET_RAW"]
#: the run directory inside the containers, and the volume that shares it between them when a
#: node kind needs the other nodes' control sockets (a protocol module's SHARES_RUN_DIR)
RUN_DIR = "/run/netstack"
#: the topology's key file ([topology] keys) inside the containers: a docker secret, and the
#: variable that tells the node runner where it is
KEYS_SECRET = "netstack-keys"
KEYS_ENV = "NETSTACK_KEYS"
RUN_VOLUME = "netstack-run"


def shares_run_dir(topology: Topology) -> bool:
    """Whether a node of ``topology`` talks to other nodes' daemons through their control
    sockets (the 1Pipe controller drives the switches): then the containers share one run
    directory, which works among containers of one machine."""
    from .. import protocols

    kinds = protocols.node_kinds()
    return any(getattr(protocols.load(kinds[n.kind.value]), "SHARES_RUN_DIR", False)
               for n in topology.nodes if n.kind.value in kinds)


@dataclass(frozen=True)
class ComposeOptions:
    prefix: str | None = None  #: None: the topology's
    image: str = DEFAULT_IMAGE
    underlay: str = DEFAULT_UNDERLAY
    swarm: bool = False
    #: Swarm placement: node -> the machine (docker node hostname) it must run on
    placement: dict[str, str] = field(default_factory=dict)


def generate(topology: Topology, spec: str | None, text: str | None, options: ComposeOptions) -> str:
    """The compose (or, with ``options.swarm``, stack) file for ``topology``.

    ``spec`` names a shipped topology (the image has it: the file refers to it by name); else
    ``text`` is the topology file's content, embedded in each service's environment so that a
    stack spread over several machines needs no file on any of them.
    """
    if (spec is None) == (text is None):
        raise ValueError("give the shipped topology's name or the file's text, not both")
    prefix = options.prefix or topology.prefix
    unknown = sorted(set(options.placement) - {n.name for n in topology.nodes})
    if unknown:
        raise PlanError(f"--place names node(s) {', '.join(unknown)} that topology {topology.name!r} does not have")
    links = plan_links(topology, options.underlay)
    env: dict[str, Any] = {}
    if spec is not None:
        env["NETSTACK_TOPOLOGY"] = spec
    else:
        assert text is not None
        env["NETSTACK_TOPOLOGY_TOML"] = text.replace("$", "$$")  # compose interpolates $VAR
    env["NETSTACK_PREFIX"] = prefix
    env["NETSTACK_UNDERLAY"] = options.underlay
    keys = topology.keys_path()
    if keys is not None:
        if not keys.is_file():
            raise PlanError(f"topology {topology.name!r} names the key file {keys}, which does not exist "
                            f"('netstack keys generate {keys}')")
        env[KEYS_ENV] = f"/run/secrets/{KEYS_SECRET}"
    signed = keys is not None and any(n.kind.value in SIGNER_KINDS for n in topology.nodes)
    if signed and keys is not None:
        try:  # 1Pipe's controller signs with a pair beside the key file (netstack/auth/sign.py)
            ensure_signing_key(keys)
        except KeyFileError as exc:
            raise PlanError(str(exc)) from None

    shared_run = shares_run_dir(topology)
    services = {node.name: _service(node, links, env, prefix, options, shared_run, keys is not None, signed)
                for node in topology.nodes}
    networks = {lp.network: _network(lp, prefix, options.swarm) for lp in links}
    doc: dict[str, Any] = {"version": COMPOSE_VERSION, "services": services, "networks": networks}
    if shared_run:
        doc["volumes"] = {RUN_VOLUME: {"labels": {LABEL_PREFIX: prefix}}}
    if keys is not None:
        doc["secrets"] = {KEYS_SECRET: {"file": str(keys.resolve())}}
        if signed:
            private, public = signing_paths(keys.resolve())
            doc["secrets"].update({KEYS_SECRET + SUFFIX: {"file": str(private)},
                                   KEYS_SECRET + SUFFIX + ".pub": {"file": str(public)}})
    return _header(topology, spec, options, prefix) + yamlout.dump(doc)


def _service(node: Node, links: list[LinkPlan], env: dict[str, Any], prefix: str, options: ComposeOptions,
             shared_run: bool, keyed: bool, signed: bool = False) -> dict[str, Any]:
    """One node's service: its links' networks (with its DNS alias on each), the node runner."""
    nets = {lp.network: {"aliases": [lp.alias(node.name)]} for lp in links if node.name in (lp.a, lp.b)}
    svc: dict[str, Any] = {
        "image": f"${{NETSTACK_IMAGE:-{options.image}}}",
        "command": [node.name],
        "hostname": node.name,
        "cap_add": CAPABILITIES,
        "environment": env,
        "labels": {LABEL_PREFIX: prefix, LABEL_NODE: node.name, LABEL_KIND: node.kind.value},
        # the switches read IPv6 chatter as frames to forward: off, as in the namespaces
        "sysctls": {"net.ipv6.conf.all.disable_ipv6": 1, "net.ipv6.conf.default.disable_ipv6": 1},
        "networks": nets,
        "healthcheck": _healthcheck(node.name, options.swarm),
        "stop_grace_period": "5s",
    }
    if shared_run:
        svc["volumes"] = [f"{RUN_VOLUME}:{RUN_DIR}"]
    if keyed:
        # a secret: a bind mount of the file under compose (its mode, 0600, kept), distributed
        # by the swarm itself under Swarm; read-only for root alone either way
        # the controller's signing pair beside it (netstack/auth/sign.py): the private key only to
        # the node kinds that sign, the public one to all
        names = [KEYS_SECRET]
        if signed:
            names += [KEYS_SECRET + SUFFIX + ".pub"] + ([KEYS_SECRET + SUFFIX] if node.kind.value in SIGNER_KINDS
                                                          else [])
        svc["secrets"] = [{"source": n, "target": n, "mode": 0o400} for n in names]
    if options.swarm:
        deploy: dict[str, Any] = {
            # names resolve to the task's own address (the tunnel's far end), not a virtual IP
            "endpoint_mode": "dnsrr",
            "restart_policy": {"condition": "on-failure", "max_attempts": 3},
        }
        if node.name in options.placement:
            deploy["placement"] = {"constraints": [f"node.hostname == {options.placement[node.name]}"]}
        svc["deploy"] = deploy
    return svc


def _network(lp: LinkPlan, prefix: str, swarm: bool) -> dict[str, Any]:
    """One link's underlay: nothing but its two ends (no route out, no NAT), room for the tunnel."""
    net: dict[str, Any] = {"driver": "overlay" if swarm else "bridge", "internal": True}
    if swarm:
        net["attachable"] = True
    # A bridge network gives its containers the MTU the option names. An overlay network takes the
    # option as the MTU of the path between machines and gives its containers that less its own
    # VXLAN header (measured on docker 20.10: 1614 -> 1564 inside), so it asks for one header more:
    # the container's underlay then has room for our tunnel's full-size frame, and the kernel would
    # otherwise clamp the tunnel's MTU below the topology's without a word.
    mtu = lp.underlay_mtu + (VXLAN_OVERHEAD if swarm else 0)
    net["driver_opts"] = {"com.docker.network.driver.mtu": str(mtu)}
    net["ipam"] = {"config": [{"subnet": str(lp.subnet)}]}
    net["labels"] = {LABEL_PREFIX: prefix, LABEL_LINK: lp.link}
    return net


#: the health check's command: ``netstack node health``'s check without the command line's start-up
#: (netstack/container/health.py: 0.35 s of CPU a check through ``netstack`` while its parser
#: imported every command module; about the same as this since it imports the command's own)
HEALTH_CMD = ["CMD", "python3", "-m", "netstack.container.health"]


def _healthcheck(node: str, swarm: bool) -> dict[str, Any]:
    """Every port up and every daemon answering its control socket (``netstack node health``).
    Under Swarm a node waiting for its peers passes too, probed often: Swarm publishes a task's
    name only once it is healthy, and the peers are waiting for that name."""
    if swarm:
        return {"test": [*HEALTH_CMD, node, "--joining-ok"], "interval": "2s",
                "timeout": "5s", "retries": 3, "start_period": "30s"}
    return {"test": [*HEALTH_CMD, node], "interval": "5s", "timeout": "5s", "retries": 3, "start_period": "30s"}


def _header(topology: Topology, spec: str | None, options: ComposeOptions, prefix: str) -> str:
    what = spec if spec is not None else "TOPOLOGY.toml"
    flags = " --swarm" if options.swarm else ""
    hosts = [n.name for n in topology.hosts]
    lines = [
        f"# netstack topology {topology.name!r} (prefix {prefix}) in containers: one service per node, one",
        "# network per link carrying that link's VXLAN tunnel (docs/containers.md).",
        f"# Generated by 'netstack compose generate {what}{flags}': regenerate rather than edit.",
        "#",
    ]
    if options.swarm:
        lines += [
            "#   docker stack deploy -c THIS_FILE netstack     # on a swarm manager",
            f"#   netstack status --prefix {prefix}             # on the machine running the switches",
            "#   docker stack rm netstack",
        ]
    else:
        lines += [
            "#   scripts/docker/build-image.sh                 # the image, built offline if need be",
            "#   docker-compose up -d                          # or: docker compose up -d",
            f"#   netstack status{'' if prefix == 'ns' else f' --prefix {prefix}'}"
            "                               # the CLI finds the containers",
        ]
        if len(hosts) >= 2:
            lines.append(f"#   docker-compose exec {hosts[0]} ping -c3 {_ip(topology, hosts[-1])}")
        lines.append("#   docker-compose down" + (" -v                     # -v: the shared run volume"
                                                 if shares_run_dir(topology) else ""))
    return "\n".join(lines) + "\n\n"


def _ip(topology: Topology, node: str) -> str:
    ip = topology.node(node).ip
    return str(ip.ip) if ip is not None else node
