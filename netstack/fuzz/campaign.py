"""A campaign's frame: its options and result, the topology it runs on (brought up and torn down
around it, or a running one), and the single-phase campaign (the stream and every injector at
once, then the checks) that the ``switch`` target runs and the others vary."""

from __future__ import annotations

import contextlib
import random
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from .. import runtime
from ..runtime import RunState
from ..topo.model import load_topology
from .checks import account, liveness, row, settled
from .frames import Injector, switch_only
from .ports import Link, iface_mtu, raw_socket
from .sender import Sender
from .traffic import Stream, ping, stream_detail, stream_ok

DEFAULT_RATE = 5000


@dataclass
class Options:
    target: str
    frames: int
    seed: int
    prefix: str | None = None
    keep: bool = False
    rate: float = DEFAULT_RATE
    out: TextIO = sys.stderr
    #: a targeted campaign instead of random frames (netstack/fuzz/attacks.py); None: the random one
    attack: str | None = None


@dataclass
class Result:
    target: str
    prefix: str
    seed: int
    frames: int
    sent: int = 0
    refused: int = 0
    duration_s: float = 0.0  #: injecting
    wall_s: float = 0.0  #: the campaign from its first frame to its checks
    checks: list[dict[str, Any]] = field(default_factory=list)
    injectors: dict[str, Any] = field(default_factory=dict)
    stream: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c["ok"] for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "prefix": self.prefix, "seed": self.seed, "frames": self.frames,
                "sent": self.sent, "refused": self.refused, "duration_s": round(self.duration_s, 2),
                "wall_s": round(self.wall_s, 2),
                "rate": round(self.sent / self.duration_s) if self.duration_s else 0, "ok": self.ok,
                "checks": self.checks, "injectors": self.injectors, "stream": self.stream, "notes": self.notes}


@contextlib.contextmanager
def topology(opts: Options, name: str | None) -> Iterator[RunState]:
    """The run to fuzz: ``opts.prefix``'s if one runs, else ``name`` brought up under a unique
    prefix and torn down afterwards (unless ``keep``), also on Ctrl-C or failure."""
    if opts.prefix is not None and opts.prefix in runtime.netns.list_running():
        yield runtime.load_state(opts.prefix)
        return
    prefix = opts.prefix or "fz" + uuid.uuid4().hex[:5]
    from ..topo.model import load_topology_spec

    topo = load_topology(None) if name is None else load_topology_spec(name)
    print(f"fuzz {opts.target}: bringing up {topo.name} under prefix {prefix}", file=opts.out, flush=True)
    state = runtime.up(topo, prefix, apply_impairments=False)
    try:
        yield state
    finally:
        if opts.keep:
            print(f"fuzz {opts.target}: --keep: {prefix} left running ('netstack down --prefix {prefix}')",
                  file=opts.out, flush=True)
        else:
            runtime.down(prefix)


def finish(res: Result, injectors: list[Injector], sender: Sender) -> None:
    res.sent = sum(i.sent for i in injectors)
    res.refused = sum(i.refused for i in injectors)
    res.duration_s = sender.inject_s
    res.wall_s = time.monotonic() - sender.started
    for i in injectors:
        res.injectors[i.name] = {"port": f"{i.link.node}/{i.link.ifname}", "from": f"{i.link.far_node}/"
                                 f"{i.link.far_ifname}", "sent": i.sent, "refused": i.refused,
                                 "fates": dict(i.fate), "examples": i.example}


def open_injectors(injectors: list[Injector]) -> None:
    for i in injectors:
        i.sock = raw_socket(i.link.far_ns, i.link.far_ifname)
        i.max_len = iface_mtu(i.link.far_ns, i.link.far_ifname) + 14


def close_injectors(injectors: list[Injector]) -> None:
    for i in injectors:
        if i.sock is not None:
            i.sock.close()


def account_settled(state: RunState, res: Result, injectors: list[Injector], links: list[Link],
                    settled_before: tuple[dict[str, Any], bool], featureless: Callable[[str, str], bool]) -> None:
    """Every campaign's last checks, once its injectors are closed: the counters of ``links``
    settled again, every daemon alive, and every injected frame accounted for against the
    snapshot taken before (``featureless(node, port)``: a port whose frames no feature consumes)."""
    before, quiet = settled_before
    after, quiet2 = settled(state, links)
    res.checks += liveness(state)
    res.checks += account(injectors, before, after, featureless)
    if not (quiet and quiet2):
        res.notes.append("counters were still moving when read: accounting may be off by frames in flight")


def stream_campaign(opts: Options, state: RunState, res: Result, injectors: list[Injector],
              stream_ends: tuple[str, str], featureless: Callable[[str, str], bool]) -> Result:
    """One phase: the stream and every injector at once; accounting, liveness, stream check."""
    links = list({id(i.link): i.link for i in injectors}.values())
    rng = random.Random(opts.seed)
    open_injectors(injectors)
    stream = Stream(state, *stream_ends, rate=max(200.0, min(2000.0, opts.rate / 5)))
    try:
        before, quiet = settled(state, links)
        sender = Sender(injectors, rng, opts.rate, opts.out, opts.target, switch_only())
        stream.start()
        sender.run(opts.frames, stream, guard=False, total=opts.frames)
        sender.progress(opts.frames)
        res.stream = stream.finish()
        finish(res, injectors, sender)
        account_settled(state, res, injectors, links, (before, quiet), featureless)
        res.checks.append(row(f"{stream_ends[0]}>{stream_ends[1]}", "stream",
                               stream_detail(res.stream), stream_ok(res.stream)))
        ok = ping(state, *stream_ends)
        res.checks.append(row(f"{stream_ends[0]}>{stream_ends[1]}", "ping", "answered" if ok else "NO ANSWER", ok))
    finally:
        stream.close()
        close_injectors(injectors)
    return res
