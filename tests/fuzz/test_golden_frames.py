"""The same seed gives the same campaign: every target's injectors, built on a run's addresses and
a fixed corpus, send the frames they sent when ``golden_frames.json`` was written, byte for byte
and in the same order, and the campaign's report of them (fates, examples, the table) is the same.
In process, without a testbed: the frames go to stand-in sockets.

It pins what docs/faults.md promises ("the generated frames are the same for the same seed") and
held netstack/fuzz.py's split into a package to it. A deliberate change of the frames (a target's
mix or addresses, headers.strategies' generators or mutations) rewrites the fingerprints:
``NETSTACK_GOLDEN=update .venv/bin/python -m pytest tests/fuzz/test_golden_frames.py`` (then say
why in the commit)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netstack import fuzz
from netstack.fuzz import campaign, checks
from netstack.fuzz import dta as fz_dta
from netstack.fuzz import linkguardian as fz_lg
from netstack.fuzz import onepipe as fz_op
from netstack.fuzz import switch as fz_switch
from netstack.fuzz import tcd as fz_tcd
from netstack.fuzz import tcsack as fz_tcs
from netstack.runtime import Daemon, RunPort, RunState

GOLDEN = Path(__file__).with_name("golden_frames.json")
SEEDS = (0, 1, 7, 4242)
FRAMES = 600
#: every node any target names; switches have no address
NODES = ["h1", "h2", "h3", "h4", "c1", "ctl", "s0", "s1", "s2", "r0", "r1", "sw1", "sw2", "sw3", "tor1", "spine1"]
#: frames a capture would have found: UDP h1 -> h2, a PFC frame, a frame of a local EtherType
CORPUS = [
    bytes.fromhex("020000000002020000000001080045000030000100004011000a0a0000010a000002b7a19c9d001c0000")
    + bytes(range(20)),
    bytes.fromhex("0180c2000001020000000001880801010001ffff") + bytes(26),
    bytes.fromhex("02000000000202000000000188b5") + bytes(range(40)),
]


def _mac(i: int) -> bytes:
    return bytes([2, 0, 0x0A, 0, 0, i])


def _state() -> RunState:
    """A run state as ``netstack up`` makes it, as far as the injectors read it."""
    hosts = {n: f"10.0.0.{i + 1}/24" for i, n in enumerate(NODES) if not n.startswith(("sw", "tor", "spine"))}
    ports = [RunPort(node=n, link="x", netns=f"fz-{n}", ifname="eth0", mac=_mac(i + 1).hex(":"), peer="x", fcs=False)
             for i, n in enumerate(NODES)]
    ports.append(RunPort(node="spine1", link="tor1-spine1", netns="fz-spine1", ifname="p-tor1",
                         mac=_mac(0x70).hex(":"), peer="tor1", fcs=True))
    daemons = [Daemon(node="ctl", kind="onepipe-controller", pid=0, control="", log=""),
               Daemon(node="c1", kind="collector", pid=0, control="", log="")]
    return RunState(prefix="fz", hosts=hosts, ports=ports, namespaces={n: f"fz-{n}" for n in NODES}, daemons=daemons)


def _link(node: str, far: str, fcs: bool, edge: bool, accepts: bool = False) -> fuzz.Link:
    return fuzz.Link(node, f"p-{far}", f"fz-{node}", _mac(0x80 + NODES.index(node)), far,
                     f"p-{node}" if fcs else "eth0", f"fz-{far}", fcs, edge, accepts)


#: per target: its injectors on the stand-in run, and its phases as its runner sends them
#: ((share of the frames, the checked phase's guard); None: the rest)
TARGETS: dict[str, tuple[Callable[[RunState], list[fuzz.Injector]], list[tuple[float | None, bool]]]] = {
    "switch": (lambda st: fz_switch.switch_injectors(st, _link("sw1", "h1", False, True), CORPUS, 1514),
               [(None, False)]),
    "linkguardian": (lambda st: fz_lg.lg_injectors(st, _link("sw2", "sw1", True, False, True),
                                                   _link("sw1", "sw2", True, False, True), CORPUS),
                     [(0.5, True), (None, False)]),
    "dta": (lambda st: fz_dta.dta_injectors(st, {"translator_mac": "02:aa:bb:cc:dd:ee", "translator_ip": "10.0.0.99"},
                                            _link("sw2", "h2", False, True), _link("sw2", "c1", False, True), CORPUS),
            [(None, False)]),
    "onepipe": (lambda st: fz_op.op_injectors(st, _link("tor1", "h1", False, True),
                                              _link("tor1", "spine1", True, False, True), CORPUS),
                [(None, True)]),
    "tcsack": (lambda st: fz_tcs.tcs_injectors(st, _link("sw1", "h1", False, True), _link("sw2", "h2", False, True),
                                               CORPUS),
               [(None, True)]),
    "tcd": (lambda st: [fz_tcd.tcd_injector(st, _link("sw3", "r0", False, True, True), CORPUS)], [(None, False)]),
}


class _Socket:
    """What a raw socket would have sent."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, frame: bytes) -> int:
        self.frames.append(bytes(frame))
        return len(frame)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(target: str, seed: int) -> dict[str, str]:
    """The frames ``target``'s campaign sends with ``seed`` (as its runner's Sender draws them), and
    its report of them, as SHA-256 digests."""
    build, phases = TARGETS[target]
    injectors = build(_state())
    for i in injectors:
        i.sock = _Socket()  # type: ignore[assignment]
    sender = fuzz.Sender(injectors, random.Random(seed), 1e15, io.StringIO(), target, fuzz.switch_only())
    done = 0
    for share, guard in phases:
        n = int(FRAMES * share) if share is not None else FRAMES - done
        sender.run(n, None, guard=guard, total=FRAMES)
        done += n
    res = fuzz.Result(target, "fz", seed, FRAMES)
    campaign.finish(res, injectors, sender)
    res.checks = [checks.row("x", "y", "z", True)]
    res.duration_s = 1.0  # (time spent: the one thing of the report a seed does not decide)
    report = res.to_dict()
    for key in ("duration_s", "wall_s", "rate"):
        report.pop(key)
    sent = b"".join(len(f).to_bytes(4, "big") + f for i in injectors for f in i.sock.frames)  # type: ignore[union-attr]
    return {"frames": _sha(sent), "report": _sha(json.dumps(report, sort_keys=True).encode()),
            "table": _sha(fuzz.table(res).encode())}


@pytest.fixture(scope="module")
def golden() -> dict[str, Any]:
    if os.environ.get("NETSTACK_GOLDEN") == "update":
        GOLDEN.write_text(json.dumps({t: {str(s): fingerprint(t, s) for s in SEEDS} for t in TARGETS}, indent=1,
                                     sort_keys=True) + "\n")
    return dict(json.loads(GOLDEN.read_text()))


def test_every_target_is_pinned():
    assert set(TARGETS) == set(fuzz.RUNNERS)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("target", list(TARGETS))
def test_a_seed_gives_the_frames_and_the_report_it_gave_before(target, seed, golden):
    assert fingerprint(target, seed) == golden[target][str(seed)]
