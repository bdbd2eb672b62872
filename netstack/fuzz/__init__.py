"""``netstack fuzz TARGET``: random and mutated frames into a live daemon's port, with valid
traffic interleaved, then checks that the daemons survived, that their counters account for
every frame, and that the protocol's invariant still holds (docs/faults.md, "Fuzzing campaign").

A campaign brings up its own topology under a unique prefix (or uses a running one), captures
a corpus of valid frames at the ports it will fuzz, and sends ``frames`` frames from
``headers.strategies`` generators seeded with ``seed`` (the same frames for the same seed): a
mix of random bytes, valid frames of the target's protocols aimed at the port's daemon, and
mutations of both and of the corpus. It sends them from raw sockets at the far end of the
fuzzed links, in batches at a bounded rate, while a sequenced UDP stream crosses the fuzzed
ports. Afterwards:

- **alive**: every daemon of the run has its pid and answers ``ping`` on its control socket;
  every switch reports ``internal_errors == 0``;
- **accounting**, per fuzzed port (counter deltas over the campaign, read once everything is
  quiet; ``K`` = the daemon's ``kernel_drops``, frames its socket ring had no room for):

  * wire: frames the kernel put on the veth at the far end (``tx_packets``: ours and the
    peer's own) = frames the port's interface received (``rx_packets``) + veth drops;
  * daemon: the interface's ``rx_packets`` = the daemon's ``rx_frames`` + ``K``;
  * fate: for each counter an injected frame's bytes alone decide (``fcs_errors``,
    ``edge_drops_pfc``, ``edge_drops_switch_only``, ``edge_drops_spoofed``, ``mac_control_rx``), the delta equals
    what the campaign computed from the frames it sent plus what the peer's own counters say
    it sent of that kind (its PFC frames), within ``K`` below;
  * conservation, on a switch with two ports whose other port runs no feature: ``rx_frames``
    = the sum of every drop and consume counter of the port + the frames forwarded out of the
    other port (its per-class ``tx_frames_class`` + ``queue_drops`` + ``mtu_drops``);
- **invariant** of the target (:data:`TARGETS`).

The exit status is 0 only when every check passed.

The package: the campaign machinery is shared (:mod:`.ports` the run's ports, :mod:`.frames`
the injectors' seeded frames and their fates, :mod:`.sender` sending at a rate,
:mod:`.traffic` the stream, the corpus and ping, :mod:`.checks` the checks afterwards,
:mod:`.campaign` options, result, topology and the single-phase campaign, :mod:`.report` the
table), and each target has a module of its own (:mod:`.switch`, :mod:`.linkguardian`,
:mod:`.dta`, :mod:`.onepipe`, :mod:`.tcsack`, :mod:`.tcd`) with its ``run_<target>``. A new
protocol's target is a module here and its runner imported below (the registry names it,
``netstack.protocols``). Every name is importable from ``netstack.fuzz`` as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from .. import protocols
from .attacks import ATTACKS, check_attack
from .campaign import DEFAULT_RATE, Options, Result, topology
from .checks import (
    DISPOSITIONS,
    PFC_SENT,
    SETTLE_MAX_S,
    account,
    liveness,
    settled,
    snapshot,
)
from .dta import Reports, run_dta, run_dta_flood
from .errors import FuzzError
from .frames import (
    FORBIDDEN_TRIES,
    KERNEL_VLAN_SHORT,
    VLAN_TYPES,
    Injector,
    fate_of,
    kernel_view,
    malformed_pfc,
    spoofs,
    switch_only,
    udp_payload,
    udp_source,
)
from .linkguardian import lg_or_mac_control, run_linkguardian, run_linkguardian_hidden_tags
from .onepipe import (
    OP_FANOUT,
    OP_LEAD_S,
    OP_PROCS,
    OP_RATE,
    op_addresses,
    op_checks,
    run_onepipe,
    run_onepipe_cross_port_replay,
    run_onepipe_forged_controller,
)
from .ports import Link, find_link, iface_mtu, iface_stats, ip_of, mac_of, raw_socket
from .report import save, table
from .sender import BATCH, PROGRESS_S, Sender
from .switch import run_switch
from .tcd import DcqcnFlow, run_tcd, run_tcd_short_pauses, tcd_checks
from .tcsack import (
    TCS_BYTES,
    TCS_COUNTED,
    TCS_FLOW,
    TCS_RATE_BPS,
    TCS_SENDER_PORTS,
    Transfers,
    port_range,
    run_tcsack,
    tcs_forgery,
)
from .traffic import CORPUS_PORT, STREAM_PORT, Stream, capture, corpus_traffic, ping, stream_ok

#: what each target fuzzes and its invariant, in ``netstack fuzz --help``'s order: the generic ``switch``
#: and each protocol's, from the registry (netstack.protocols.fuzz_targets); target NAME runs ``run_NAME``
TARGETS: dict[str, str] = protocols.fuzz_targets()


#: each target's runner, by name (a target the registry lists without its ``run_<name>`` here fails at import)
RUNNERS: dict[str, Callable[[Options], Result]] = {name: globals()[f"run_{name}"] for name in TARGETS}
#: ``--attack`` campaigns: (target, attack) -> ``run_<target>_<attack>`` (attack's dashes as underscores)
ATTACK_RUNNERS: dict[tuple[str, str], Callable[[Options], Result]] = {
    (t, a): globals()[f"run_{t}_{a.replace('-', '_')}"] for t, attacks in ATTACKS.items() for a in attacks}


def run(opts: Options) -> Result:
    if opts.target not in RUNNERS:
        raise FuzzError(f"unknown target {opts.target!r}; targets: {', '.join(RUNNERS)}")
    if opts.frames < 1:
        raise FuzzError("--frames must be at least 1")
    if opts.rate <= 0:
        raise FuzzError("--rate must be positive")
    check_attack(opts.target, opts.attack)
    if os.geteuid() != 0:
        raise FuzzError("fuzzing a live topology needs root (namespaces, raw sockets)")
    if opts.attack is not None:
        return ATTACK_RUNNERS[(opts.target, opts.attack)](opts)
    return RUNNERS[opts.target](opts)


#: every name netstack/fuzz.py had when it was one module, still importable from here
__all__ = [
    "ATTACKS", "ATTACK_RUNNERS", "BATCH", "CORPUS_PORT", "DEFAULT_RATE", "DISPOSITIONS", "DcqcnFlow",
    "FORBIDDEN_TRIES", "FuzzError", "Injector", "KERNEL_VLAN_SHORT", "Link", "OP_FANOUT", "OP_LEAD_S", "OP_PROCS",
    "OP_RATE", "Options", "PFC_SENT", "PROGRESS_S", "RUNNERS", "Reports", "Result", "SETTLE_MAX_S", "STREAM_PORT",
    "Sender", "Stream", "TARGETS", "TCS_BYTES", "TCS_COUNTED", "TCS_FLOW", "TCS_RATE_BPS", "TCS_SENDER_PORTS",
    "Transfers", "VLAN_TYPES", "account", "capture", "corpus_traffic", "fate_of", "find_link", "iface_mtu",
    "iface_stats", "ip_of", "kernel_view", "lg_or_mac_control", "liveness", "mac_of", "malformed_pfc", "op_addresses",
    "op_checks", "ping", "port_range", "raw_socket", "run", "run_dta", "run_dta_flood", "run_linkguardian",
    "run_linkguardian_hidden_tags", "run_onepipe",
    "run_onepipe_cross_port_replay", "run_onepipe_forged_controller", "run_switch", "run_tcd",
    "run_tcd_short_pauses", "run_tcsack", "save",
    "settled", "snapshot", "spoofs",
    "stream_ok", "switch_only", "table", "tcd_checks", "tcs_forgery", "topology", "udp_payload", "udp_source",
]
