"""The ``onepipe`` target: tor1's host and spine ports of the ``onepipe`` topology while four 1Pipe
processes scatter, never forging a process's own datagrams; afterwards ``netstack onepipe check``
on what they delivered of each other's (docs/faults.md "Fuzzing campaign"). And its attack
``--attack cross-port-replay`` (issue 34, finding 2; :func:`run_onepipe_cross_port_replay`): a
process's sealed frames replayed into another edge port of its ToR."""

from __future__ import annotations

import contextlib
import json
import random
import select
import socket
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headers import strategies as hs

from .. import runtime
from ..runtime import RunState
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import row, settled, until_still
from .errors import FuzzError
from .frames import Injector, spoofs, switch_only
from .ports import Link, find_link, ip_of, mac_of, raw_socket
from .sender import Sender
from .traffic import capture, corpus_traffic

#: the 1Pipe run during the campaign: one process per host, scattering to 2 of the others
OP_PROCS = 4


OP_RATE = 100.0


OP_FANOUT = 2


#: the processes join 1 s + 50 ms a process after they are spawned, and scatter half a second
#: later (netstack/onepipe/runner.py): the injection starts then
OP_LEAD_S = 1.0 + 0.05 * OP_PROCS + 0.6


def run_onepipe(opts: Options) -> Result:
    from ..onepipe.control import disable_all, enable_all, status_all

    with topology(opts, "onepipe") as state:
        prefix = state.prefix
        res = Result("onepipe", prefix, opts.seed, opts.frames)
        edge = find_link(state, "tor1", "h1")  # a ToR's host-facing port, sent from h1
        fabric = find_link(state, "tor1", "spine1")  # the ToR's spine-facing port, sent on spine1's p-tor1
        links = [edge, fabric]
        disable_all(prefix)  # (beacons every T_beacon: the counters settle only with 1Pipe off)
        before, quiet = settled(state, links)
        injectors: list[Injector] = []
        out = runtime.run_dir(prefix) / f"fuzz-onepipe-{uuid.uuid4().hex[:6]}"
        try:
            enable_all(prefix)
            corpus = capture([edge], corpus_traffic(state, [("h1", "h3"), ("h2", "h1")], 20))
            corpus += capture([fabric], corpus_traffic(state, [("h3", "h1"), ("h2", "h4")], 20))
            res.notes.append(f"corpus: {len(corpus)} frames captured at tor1's p-h1 and p-spine1 (1Pipe beacons "
                             "of the switches, UDP)")
            injectors = op_injectors(state, edge, fabric, corpus)
            open_injectors(injectors)
            _op_phase(opts, state, res, injectors, out)
            op = status_all(prefix).get("tor1") or {}
            res.notes.append("tor1 1Pipe counters: " + _op_counters(op))
        finally:
            disable_all(prefix)
            close_injectors(injectors)
        account_settled(state, res, injectors, links, (before, quiet), lambda node, port: False)
        return res


def _op_counters(status: dict[str, Any]) -> str:
    out = []
    for port, st in (status.get("ports") or {}).items():
        if port in ("p-h1", "p-spine1"):
            c = st.get("counters", {}) if isinstance(st, dict) else {}
            out.append(f"{port}: " + ", ".join(f"{k} {v}" for k, v in c.items()
                                                if isinstance(v, int) and v and not isinstance(v, bool)))
    return "; ".join(out) or "none"


def op_addresses(state: RunState, procs: int = OP_PROCS) -> dict[str, tuple[bytes, int]]:
    """``{process: (IP, port)}`` of the 1Pipe run's processes, as netstack/onepipe/runner.py places them."""
    from ..onepipe.params import PORT
    from ..onepipe.runner import end_hosts, place

    placed = place(end_hosts(state), procs)
    return {p: (ip_of(state, h), PORT + 1 + i) for h, ps in placed.items() for i, p in enumerate(ps)}


def op_injectors(state: RunState, edge: Link, fabric: Link, corpus: list[bytes]) -> list[Injector]:
    from ..onepipe.params import PORT

    addrs = op_addresses(state)
    forged = spoofs(set(addrs.values()))
    stranger = socket.inet_aton("10.0.0.77")  # no node's: a process nobody runs
    sports = [PORT, PORT + 2, PORT + 50, PORT + 99]  # the processes' are PORT + 1 (forbidden below)
    dports = [PORT, PORT + 1, PORT + 1, PORT + 2]
    others = [mac_of(state, n) for n in ("h2", "h3", "h4", "ctl")]
    into_edge = hs.Endpoints(src_macs=[mac_of(state, "h1")], dst_macs=[*others, b"\xff" * 6, edge.mac],
                             src_ips=[ip_of(state, "h1"), stranger],
                             dst_ips=[ip_of(state, n) for n in ("h2", "h3", "h4", "ctl")], sports=sports, dports=dports)
    spine_mac = next(bytes.fromhex(p.mac.replace(":", "")) for p in state.ports
                     if p.node == fabric.far_node and p.ifname == fabric.far_ifname)
    into_fabric = hs.Endpoints(src_macs=[spine_mac, *others[1:]], dst_macs=[mac_of(state, n) for n in ("h1", "h2")]
                               + [b"\xff" * 6, fabric.mac], src_ips=[ip_of(state, n) for n in ("h3", "h4", "ctl")]
                               + [stranger], dst_ips=[ip_of(state, n) for n in ("h1", "h2")], sports=sports,
                               dports=dports)
    mix = ["onepipe"] * 6 + ["udp", "ethernet", "pfc", "pause", "linkguardian", "tcsack"]
    return [
        Injector("h1>tor1", edge, hs.fuzz_gen(hs.frame_gen(mix, into_edge), corpus), forbidden=forged),
        Injector("spine1>tor1", fabric, hs.fuzz_gen(hs.frame_gen(mix, into_fabric), corpus), forbidden=forged),
    ]


def _op_phase(opts: Options, state: RunState, res: Result, injectors: list[Injector], out: Path) -> None:
    """The 1Pipe processes scatter while the frames arrive (none of them from a process's own
    address: 1Pipe without keys does not claim to withstand a forged process, docs/security.md
    "1Pipe on the edge"); then ``netstack onepipe check`` must pass on what they delivered of
    each other's, and every message sent must be delivered or reported failed, not both."""
    import threading

    from ..onepipe.runner import run as op_run

    seconds = round(opts.frames / opts.rate * 1.3 + 1.0, 1)
    box: dict[str, Any] = {}

    def scatter() -> None:
        try:
            box["summary"] = op_run(state.prefix, procs=OP_PROCS, seconds=seconds, out=out, rate=OP_RATE,
                                    fanout=OP_FANOUT)
        except Exception as exc:  # (a process that crashed: the check below fails)
            box["error"] = f"{type(exc).__name__}: {exc}"

    runner = threading.Thread(target=scatter, name="onepipe-run", daemon=True)
    runner.start()
    time.sleep(OP_LEAD_S)
    sender = Sender(injectors, random.Random(opts.seed), opts.rate, opts.out, opts.target, switch_only())
    sender.run(opts.frames, None, guard=True, total=opts.frames)
    sender.progress(opts.frames)
    finish(res, injectors, sender)
    runner.join(timeout=seconds + 120)
    res.checks += op_checks(box, out, set(op_addresses(state)))


def op_checks(box: dict[str, Any], out: Path, names: set[str]) -> list[dict[str, Any]]:
    """The run finished with every process; ``onepipe check`` on the messages between processes
    (the others, from the campaign's own addresses, are counted, not judged); every message
    delivered, reported (send-failed or send-unknown) or in flight at the end."""
    from ..onepipe.check import CheckError, check_logs

    if "summary" not in box:
        return [row("1pipe", "processes", box.get("error", "the run did not finish"), False)]
    summary = box["summary"]
    genuine = out / "genuine"
    genuine.mkdir(exist_ok=True)
    delivered: list[str] = []
    foreign = 0
    for log in sorted(out.glob("*.jsonl")):
        keep = []
        for line in log.read_text().splitlines():
            if json.loads(line).get("src") in names:
                keep.append(line)
                delivered.append(json.loads(line)["id"])
            else:
                foreign += 1
        (genuine / log.name).write_text("".join(k + "\n" for k in keep))

    def ids(kind: str) -> list[str]:
        """The ids of the processes' own messages in ``out/kind/`` (a receiver also lists what it held
        of the campaign's messages, whose senders are addresses, not process names)."""
        return [i for f in sorted((out / kind).glob("*.jsonl")) for line in f.read_text().splitlines()
                if (i := json.loads(line)["id"]).split(".", 1)[0] in names]

    failed = ids("send-fail")
    # reported unknown (best effort's ACK timeout, since issue 31) or still in flight when its
    # sender (or, held for the barrier, its receiver) stopped: a fate, as netstack onepipe run counts
    # (netstack/onepipe/accounting.py)
    unknown = set(ids("send-unknown")) - set(delivered) - set(failed)
    in_flight = set(ids("in-flight")) - set(delivered) - set(failed) - unknown
    sent = summary["messages_sent"]
    rows = [row("1pipe", "processes", f"{len(summary['processes'])}/{len(names)} processes ran to the end, killed "
                 f"{summary['killed']}", len(summary["processes"]) == len(names) and not summary["killed"])]
    try:
        verdict = check_logs(sorted(genuine.glob("*.jsonl")))
        rows.append(row("1pipe", "onepipe check", verdict.summary().splitlines()[0], verdict.ok
                         and verdict.counts["senders"] == len(names) and verdict.counts["receivers"] == len(names)))
    except CheckError as exc:
        rows.append(row("1pipe", "onepipe check", f"unreadable logs: {exc}", False))
    both = set(delivered) & set(failed)
    # a message both delivered and reported failed is best effort's documented false alarm: no ACK
    # covering it came back within the sender's timeout (docs/onepipe.md, the loss table)
    ok = len(set(delivered) | set(failed) | unknown | in_flight) == sent and len(delivered) == len(set(delivered))
    rows.append(row("1pipe", "every message", f"{sent} sent = {len(delivered) - len(both)} delivered + "
                     f"{len(failed) - len(both)} reported failed + {len(both)} both (delivered, then timed out "
                     f"unACKed) + {len(unknown)} send-unknown + {len(in_flight)} in flight at the end; "
                     f"{foreign} messages from the campaign's addresses delivered (not judged)", ok))
    return rows


# ------------------------------------------------------------------ --attack cross-port-replay
#: ``--attack cross-port-replay`` replays in slow motion: a frame captured ``t`` after a way's first
#: goes out ``SLOW * t`` after it, so the barriers the replays carry fall ever further behind their
#: process's (half the run behind at its end): what holds a ToR's barrier back, were they taken
REPLAY_SLOW = 2.0

#: and never sooner than this after its capture. A replay is a copy of a frame the switch has already
#: taken: the capture sees a frame as the switch daemon's socket does, and a copy sent at once (the
#: way's first frame, due at its capture in slow motion) can reach tor1's other port while the
#: daemon is still reading the port it came from, so the copy is taken there and the genuine frame
#: refused as its replay. Measured with every frame sent at once: 2-3 of ~290 overtook, unloaded;
#: and once on CI, the first frame of a campaign did (one refusal short, the process an input of
#: p-h2). A daemon held up longer than this is a starved run (its scheduling-delay check fails).
REPLAY_LAG_S = 0.2


#: the campaign's 1Pipe run: processes, scatterings per second each, destinations per scattering
REPLAY_PROCS, REPLAY_RATE, REPLAY_FANOUT = 4, 60.0, 2


#: how much longer than its scattering a run's processes send: they beacon from their join, half a
#: second before they scatter, and drain a second after (netstack/onepipe/runner.py)
RUN_EXTRA_S = 1.5


#: the two replays, both at tor1: (the host whose processes' frames are captured at tor1's port
#: toward it, the host at the far end of tor1's other edge port they are replayed from)
REPLAY_WAYS = (("h1", "h2"), ("h2", "h1"))


def replay_topology(directory: Path) -> Path:
    """The shipped ``onepipe`` topology written into ``directory`` with a fresh key file beside it
    (``keys``) and tor1's port toward h2 without BCP 38 (``source_ips = false``, docs/topology.md),
    so that what h2 replays there reaches 1Pipe's authentication instead of the source check; h1's
    port keeps the check, which drops h2's frames replayed there first. The file's path."""
    from ..auth.keys import generate
    from ..topo.model import load_topology_spec

    text = Path(load_topology_spec("onepipe").source).read_text()
    h2 = 'name = "h2-tor1"\na = "h2"\nb = "tor1"\n'
    if 'prefix = "op"\n' not in text or h2 not in text:
        raise FuzzError("the shipped onepipe topology no longer has the lines --attack cross-port-replay edits")
    generate(directory / "lab.keys")
    text = text.replace('prefix = "op"\n', 'prefix = "op"\nkeys = "lab.keys"\n', 1)
    text = text.replace(h2, h2 + "# h2 may send from any address: frames replayed here meet 1Pipe's keys, not BCP 38\n"
                        "[links.features.b]\nswitch = { source_ips = false }\n", 1)
    path = directory / "onepipe.toml"
    path.write_text(text)
    return path


@dataclass
class ReplayWay:
    """One replay: the sealed frames ``victim``'s processes send into ``tor1``'s port toward it
    (``genuine``), captured there, sent again verbatim from ``via``'s end of tor1's port toward
    ``via`` (``into``)."""

    victim: str
    via: str
    genuine: Link
    into: Link
    senders: set[tuple[bytes, int]]
    sniff: socket.socket | None = None
    sock: socket.socket | None = None
    queue: deque[tuple[float, bytes]] = field(default_factory=deque)
    first: float | None = None  #: when the first frame was captured
    next_at: float = 0.0  #: the next replay not before
    captured: int = 0
    sent: int = 0

    @property
    def guarded(self) -> bool:
        """Whether ``into``'s source check (BCP 38) drops the victim's frames before 1Pipe sees them."""
        guard = self.into.source_guard
        return guard is not None and not {ip for ip, _ in self.senders} <= guard

    def take(self, frame: bytes) -> bool:
        """Whether ``frame`` (seen coming in on ``genuine``) is a sealed, barrier-carrying 1Pipe
        datagram of one of the victim's processes: one its ToR opens with that process's window."""
        from headers.onepipe import BARRIER_OPCODES, OnePipeHeader, is_onepipe_port

        if len(frame) < 34 or frame[12:14] != b"\x08\x00" or frame[23] != 17 or frame[20] & 0x3F or frame[21]:
            return False  # (IPv4 UDP, no fragment: what the processes send)
        u = 14 + (frame[14] & 15) * 4
        if len(frame) < u + 8 or (frame[26:30], frame[u] << 8 | frame[u + 1]) not in self.senders:
            return False
        if not is_onepipe_port(frame[u + 2] << 8 | frame[u + 3]):
            return False
        try:
            return OnePipeHeader.from_bytes(frame, u + 8).opcode in BARRIER_OPCODES
        except ValueError:
            return False


def arriving_udp_from(ip: bytes) -> bytes:
    """A classic BPF program (``struct sock_filter`` instructions, as netstack/capture.py attaches
    them) passing the untagged IPv4 UDP frames from ``ip`` that an interface receives, not those
    it sends: the kernel hands the replayer its victim's datagrams only, not the ToR's traffic."""
    ld_w, ld_h, ld_b, jeq, ret = 0x20, 0x28, 0x30, 0x15, 0x06
    pkttype = 0xFFFFF000 + 4  # SKF_AD_OFF + SKF_AD_PKTTYPE (linux/filter.h)
    program = [(ld_w, 0, 0, pkttype), (jeq, 7, 0, socket.PACKET_OUTGOING), (ld_h, 0, 0, 12), (jeq, 0, 5, 0x0800),
               (ld_b, 0, 0, 23), (jeq, 0, 3, 17), (ld_w, 0, 0, 26), (jeq, 0, 1, int.from_bytes(ip, "big")),
               (ret, 0, 0, 0x40000), (ret, 0, 0, 0)]
    return b"".join(struct.pack("HBBI", *insn) for insn in program)


#: at most how long to wait for tor1's counters to stand still after a replay run: the last frames
#: replayed may still sit in the switch daemon's socket, and ``kernel_drops`` must be up to date
REPLAY_SETTLE_MAX_S = 6.0


def _settled(prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """tor1's port counters and its 1Pipe status, once still (:func:`.checks.until_still`)."""
    from ..onepipe.control import status_all

    def read() -> tuple[dict[str, Any], dict[str, Any]]:
        return runtime.status(prefix)["daemons"]["tor1"]["ports"], status_all(prefix).get("tor1") or {}

    return until_still(read, _counts, REPLAY_SETTLE_MAX_S)[0]


def _counts(read: tuple[dict[str, Any], dict[str, Any]]) -> Any:
    ports, tor1 = read
    return ({p: (c.get("edge_drops_spoofed"), c.get("kernel_drops")) for p, c in ports.items()},
            {p: (c.get("auth") or {}) for p, c in (tor1.get("ports") or {}).items()})


class Replayer:
    """``--attack cross-port-replay``'s attacker (issue 34, finding 2): for each way
    (:data:`REPLAY_WAYS`), every sealed barrier-carrying frame a victim's process sends into its
    ToR is captured at the ToR's port and sent again, byte for byte and in slow motion
    (:data:`REPLAY_SLOW`, at least :data:`REPLAY_LAG_S` behind), into the ToR's other edge port
    from the far end of it (the other host's namespace), at most ``limit`` replays per way and one
    per ``every`` seconds (the newest frame due goes, older ones due are passed over: a budget
    spread over the whole run). A replay is genuine but old: a ToR that opened it with a fresh
    window (one per edge port, before the fix) took its old barrier as a new process input there,
    which held back every barrier it gives."""

    def __init__(self, state: RunState, ways: tuple[tuple[str, str], ...] = REPLAY_WAYS, procs: int = REPLAY_PROCS,
                 slow: float = REPLAY_SLOW, limit: int = 1 << 30, every: float = 0.0) -> None:
        addrs = op_addresses(state, procs)
        self.ways = [ReplayWay(victim, via, find_link(state, "tor1", victim), find_link(state, "tor1", via),
                               {a for a in addrs.values() if a[0] == ip_of(state, victim)})
                     for victim, via in ways]
        self.slow, self.limit, self.every = slow, limit, every

    def __enter__(self) -> Replayer:
        from ..capture import Tap, open_socket

        for w in self.ways:
            g = w.genuine
            ip = next(iter({ip for ip, _ in w.senders}), b"\0" * 4)
            w.sniff = open_socket(Tap(w.victim, g.node, g.far_node, g.ns, g.ifname, g.fcs), arriving_udp_from(ip))
            w.sniff.setblocking(False)
            w.sock = raw_socket(w.into.far_ns, w.into.far_ifname)
        return self

    def __exit__(self, *exc: object) -> None:
        for w in self.ways:
            for s in (w.sniff, w.sock):
                if s is not None:
                    s.close()

    @property
    def sent(self) -> int:
        return sum(w.sent for w in self.ways)

    def run(self, done: Callable[[], bool]) -> None:
        """Capture and replay until ``done()``."""
        socks = {w.sniff: w for w in self.ways}
        wait = 0.0
        while not done():
            ready, _, _ = select.select(list(socks), [], [], wait)
            now = time.monotonic()
            for s in ready:
                w = socks[s]
                while True:
                    try:
                        frame, addr = s.recvfrom(65536)
                    except (BlockingIOError, InterruptedError):
                        break
                    # (frames tor1 sends to the host are the ToR's, re-sealed: not the process's)
                    if addr[2] != socket.PACKET_OUTGOING and w.take(frame):
                        w.captured += 1
                        w.first = now if w.first is None else w.first
                        w.queue.append((max(w.first + self.slow * (now - w.first), now + REPLAY_LAG_S), frame))
            for w in self.ways:
                if not w.queue or w.queue[0][0] > now or w.sent >= self.limit or now < w.next_at:
                    continue
                frame = w.queue.popleft()[1]
                while w.queue and w.queue[0][0] <= now:
                    frame = w.queue.popleft()[1]
                assert w.sock is not None
                with contextlib.suppress(OSError):  # (a full ring: the frame is not counted sent)
                    w.sock.send(frame)
                    w.sent += 1
                w.next_at = now + self.every
            # until the next replay is due (a frame arriving wakes the select sooner), 50 ms at most
            due = [max(w.queue[0][0], w.next_at) for w in self.ways if w.queue and w.sent < self.limit]
            wait = max(0.0, min([0.05, *(d - now for d in due)]))


def cross_port_replay(state: RunState, out: Path, frames: int, seconds: float) -> tuple[list[dict[str, Any]],
                                                                                         Replayer, dict[str, Any]]:
    """The attack while :data:`REPLAY_PROCS` processes scatter for ``seconds`` (results in
    ``out``), at most ``frames`` replays in all; the oracle's rows (:func:`replay_checks`, then
    :func:`op_checks` on what the processes delivered), the replayer (its counts) and tor1's
    1Pipe status after the run."""
    import threading

    from ..onepipe.runner import run as op_run

    box: dict[str, Any] = {}

    def scatter() -> None:
        try:
            box["summary"] = op_run(state.prefix, procs=REPLAY_PROCS, seconds=seconds, out=out, rate=REPLAY_RATE,
                                    fanout=REPLAY_FANOUT)
        except Exception as exc:  # (a process that crashed: the checks fail)
            box["error"] = f"{type(exc).__name__}: {exc}"

    before = runtime.status(state.prefix)["daemons"]["tor1"]["ports"]
    runner = threading.Thread(target=scatter, name="onepipe-run", daemon=True)
    per_way = -(-frames // len(REPLAY_WAYS))
    with Replayer(state, limit=per_way, every=(seconds + RUN_EXTRA_S) / per_way) as replayer:
        runner.start()
        replayer.run(lambda: not runner.is_alive())
    runner.join()
    after, tor1 = _settled(state.prefix)
    rows = replay_checks(replayer, tor1, before, after)
    rows += op_checks(box, out, set(op_addresses(state, REPLAY_PROCS)))
    rows.append(delivery_row(box))
    return rows, replayer, tor1


#: the share of a best-effort run's messages that may be reported failed or unknown (late below a
#: barrier on a loaded machine) without the delivery check failing: :func:`delivery_row`
LATE_SHARE = 0.01


def delivery_row(box: dict[str, Any]) -> dict[str, Any]:
    """Every message the processes sent was delivered (no loss on the links: a best-effort message
    is lost only by coming late, below a barrier its receiver passed, 1Pipe §6, or by still being
    held for the barrier when the run ended). A replay taken as a process input behind it holds
    every barrier of its ToR back (the freeze of 1Pipe §4, netstack/onepipe/barrier.py): held to
    the end of the run, the last messages were never delivered. A machine that starves the run
    loses some too, with no attack at all: the run's own validity checks that failed are named.
    Best effort may also report a message failed that came late below a barrier with no attack
    and no check failing (1 of 960 once on CI, the unit tests running beside): up to
    :data:`LATE_SHARE` of the messages may be reported failed or unknown, every one accounted
    for; a replay taken cut delivery to a third (328 of 960)."""
    from ..validity import Validity

    summary = box.get("summary")
    if summary is None:
        return row("1pipe", "delivery", box.get("error", "the run did not finish"), False)
    sent, got = int(summary["messages_sent"]), int(summary["delivered"])
    # (the run's own validity checks: a starved machine, or what an accepted replay does to the run)
    v = Validity.of(summary)
    failed = ", ".join(c.name for c in v.checks if not c.ok)
    return row("1pipe", "delivery", f"{got} of {sent} messages delivered ({summary['send_failed']} reported "
               f"failed, {summary['send_unknown']} unknown, {summary['in_flight_at_end']} in flight at the end)"
               + (f"; the run's validity checks failed ({failed}): {'; '.join(v.reasons)[:300]}" if failed else ""),
               sent > 0 and got >= sent * (1 - LATE_SHARE) and not summary["in_flight_at_end"]
               and got + int(summary["send_failed"]) + int(summary["send_unknown"]) == sent)


def replay_checks(replayer: Replayer, tor1: dict[str, Any], before: dict[str, Any],
                  after: dict[str, Any]) -> list[dict[str, Any]]:
    """Per way: every replay refused and counted at the port it came in on. Where the port checks
    sources, by BCP 38 (``edge_drops_spoofed``, switch counters ``before``/``after``); elsewhere by
    1Pipe's authentication as ``replayed`` (``tor1``: its 1Pipe status after the run, whose counters
    start at the run's enable), nothing else refused there, and no input there for a victim's
    process. Before the fix each replayed frame was taken on the other port, once, by a window of
    its own: ``replayed`` stayed below the replays and the victim's process showed up as an input
    there, its barrier ever further behind. A way that replayed nothing fails: no attack.

    A replay the port's socket had no room for (``kernel_drops``, a starved daemon) never reached
    the switch, so it could be neither taken nor refused: the refused count may fall short of the
    replays by at most the port's kernel drops during the run, never exceed them, as the other
    campaigns' accounting allows (netstack/fuzz/checks.py)."""
    rows = []
    for w in replayer.ways:
        port = w.into.ifname
        where = f"tor1/{port}"
        what = (f"{w.sent} of {w.captured} sealed frames {w.victim}'s processes sent into tor1/{w.genuine.ifname} "
                f"replayed from {w.via}")
        k = int(after[port].get("kernel_drops", 0)) - int(before[port].get("kernel_drops", 0))
        within = f" (within the port's kernel_drops {k})" if k else ""
        if w.guarded:
            spoofed = int(after[port]["edge_drops_spoofed"]) - int(before[port]["edge_drops_spoofed"])
            rows.append(row(where, "replays refused", f"{what}: {spoofed} dropped by BCP 38 (edge_drops_spoofed)"
                            + within, w.sent > 0 and w.sent - k <= spoofed <= w.sent))
            continue
        st = (tor1.get("ports") or {}).get(port) or {}
        auth = st.get("auth") or {}
        others = {r: auth.get(r, 0) for r in ("truncated", "unknown_key", "forged", "stale_era")}
        victims = {f"{socket.inet_ntoa(ip)}:{p}" for ip, p in w.senders}
        phantom = sorted(victims & set(st.get("inputs") or {}))
        replayed = int(auth.get("replayed", -1))
        ok = w.sent > 0 and w.sent - k <= replayed <= w.sent and not any(others.values()) and not phantom
        rows.append(row(where, "replays refused", f"{what}: {auth.get('replayed')} refused as replayed by 1Pipe's "
                        f"authentication{within}, other refusals {others}, {w.victim}'s processes as inputs of "
                        f"{port}: {phantom or 'none'}"
                        + ("" if auth else " (no auth counters: a topology without keys)"), ok))
    return rows


def run_onepipe_cross_port_replay(opts: Options) -> Result:
    """``netstack fuzz onepipe --attack cross-port-replay`` (netstack/fuzz/attacks.py; issue 34,
    finding 2): while four 1Pipe processes scatter on a keyed topology, the :class:`Replayer`
    sends every sealed frame h1's processes send into tor1 again into tor1's port toward h2 (no
    BCP 38 there, :func:`replay_topology`: 1Pipe's keys alone stand in the way), and h2's into
    h1's port (BCP 38 drops them first). ``--frames``: at most that many replays, half each way,
    spread over the run, which scatters for ``--frames`` / 400 s (2 to 20 s); the replays play
    their processes' frames at half speed (:data:`REPLAY_SLOW`; ``--rate`` is not used). The oracle: every
    replay refused and counted (:func:`replay_checks`), ``netstack onepipe check`` passes on the
    genuine messages and every one is accounted for (:func:`op_checks`), every daemon alive. With
    ``--prefix`` a running topology with keys is used as it is (without them: FuzzError)."""
    from .checks import liveness

    with keyed_onepipe(opts, "cross-port-replay") as state:
        res = Result("onepipe", state.prefix, opts.seed, opts.frames)
        seconds = max(2.0, min(round(opts.frames / 400, 1), 20.0))
        out = runtime.run_dir(state.prefix) / f"fuzz-replay-{uuid.uuid4().hex[:6]}"
        t0 = time.monotonic()
        rows, replayer, _ = cross_port_replay(state, out, opts.frames, seconds)
        res.sent = replayer.sent
        res.duration_s = res.wall_s = time.monotonic() - t0
        res.notes.append(f"--attack cross-port-replay: {REPLAY_PROCS} processes scattered {seconds:g} s; "
                         + "; ".join(f"{w.victim}>{w.via}: {w.sent} of {w.captured} captured frames replayed "
                                     f"in slow motion (x{REPLAY_SLOW:g}) into tor1/{w.into.ifname}"
                                     + (" (BCP 38 on)" if w.guarded else " (no BCP 38: 1Pipe's keys)")
                                     for w in replayer.ways))
        res.checks += rows + liveness(state)
        return res


@contextlib.contextmanager
def keyed_onepipe(opts: Options, attack: str) -> Iterator[RunState]:
    """The run an attack on 1Pipe's keys fuzzes: ``opts.prefix``'s if one runs (it must have keys:
    FuzzError otherwise), else :func:`replay_topology`'s, with its key file in a temporary
    directory removed afterwards (unless ``--keep``)."""
    import shutil
    import tempfile

    from ..onepipe.runner import key_file

    keys_dir: Path | None = None
    spec = "onepipe"
    if opts.prefix is None or opts.prefix not in runtime.netns.list_running():
        keys_dir = Path(tempfile.mkdtemp(prefix=f"netstack-{attack}-"))
        spec = str(replay_topology(keys_dir))
    try:
        with topology(opts, spec) as state:
            if key_file(state) is None:
                raise FuzzError(f"--attack {attack} needs a topology with keys ([topology] keys): "
                                f"{state.prefix} has none, and its 1Pipe datagrams are not authenticated")
            yield state
    finally:
        if keys_dir is not None and not opts.keep:
            shutil.rmtree(keys_dir, ignore_errors=True)


# ------------------------------------------------------------------ --attack forged-controller
#: ``--attack forged-controller``: the reliable run's processes (one a host)
FORGE_PROCS, FORGE_RATE, FORGE_FANOUT = 4, 60.0, 2
#: the host the forging member sends from (tor1's port toward it checks no source: :func:`replay_topology`)
FORGER = "h2"
#: the era a forger seals in: before the fix every genuine controller message after it was refused as stale_era
FORGED_ERA = 0xFFFFFFFE
#: the forger's kinds of FAILURE_NOTICE, sent in turn
FORGERIES = ("the controller key, era 2^32-2", "the controller key, era 1", "signed with a key of its own")


class ControllerForger:
    """``--attack forged-controller``'s attacker (issue 34, finding 3): a member of the deployment
    on :data:`FORGER` (it reads the key file, as every 1Pipe process does) sends each victim
    process (every process not on its host) FAILURE_NOTICEs naming another live process, from the
    controller's address, sealed the ways of :data:`FORGERIES` in turn. Before the fix the first
    two were taken: the victim discarded and recalled what involved a live process and reported it
    failed, and after the first, refused every genuine controller message as stale_era."""

    def __init__(self, state: RunState, victims: dict[str, tuple[str, bytes, int]], controller: tuple[str, int],
                 keys: Path) -> None:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        from ..auth.frame import Sealer
        from ..auth.keys import load
        from ..onepipe.auth import controller_keys

        self.state, self.victims, self.controller = state, victims, controller
        self.mac_key = controller_keys(load(keys), state.prefix, time.time())  # what every member can derive
        self._sealers = [Sealer(self.mac_key, FORGED_ERA), Sealer(self.mac_key, 1)]
        self._own = Ed25519PrivateKey.generate()
        self.link = find_link(state, "tor1", FORGER)
        self.sock: socket.socket | None = None
        self.sent: dict[str, int] = dict.fromkeys(victims, 0)
        #: each victim's incarnation, as the controller has it (:meth:`learn`): a notice naming it is
        #: about the process that runs, not an earlier one at its address
        self.incarnations: dict[str, int] = dict.fromkeys(victims, 1)

    def learn(self, view: dict[str, Any]) -> None:
        """The victims' incarnations from the controller's ``view`` (``netstack onepipe status``)."""
        live = {p["addr"]: int(p["incarnation"]) for p in view.get("processes", []) if p.get("state") == "live"}
        for name, (_, ip, port) in self.victims.items():
            self.incarnations[name] = live.get(f"{socket.inet_ntoa(ip)}:{port}", self.incarnations[name])

    def __enter__(self) -> ControllerForger:
        self.sock = raw_socket(self.link.far_ns, self.link.far_ifname)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.sock is not None:
            self.sock.close()

    def forge(self, victim: str, k: int) -> bytes:
        """The ``k``-th forged notice to ``victim``, of kind ``k`` modulo :data:`FORGERIES`: the
        failure of another victim, as the incarnation that runs."""
        from headers.inet import build_udp_frame

        from ..onepipe import auth as opauth
        from ..onepipe.ctlwire import Notice, failure_notice

        others = sorted(n for n in self.victims if n != victim)
        about = others[k % len(others)]
        _, ip, port = self.victims[about]
        notice = failure_notice(Notice((socket.inet_ntoa(ip), port), self.incarnations[about], 0, 1_000_000 + k,
                                       False))
        host, vip, vport = self.victims[victim]
        me = (socket.inet_ntoa(vip), vport)
        kind = k % len(FORGERIES)
        if kind < 2:
            payload = opauth.seal(self._sealers[kind], opauth.context(opauth.K_FROM_CTL, self.controller, me), notice)
        else:
            payload = opauth.ControllerAuth(self.controller, self.mac_key, FORGED_ERA, self._own,
                                            self.state.prefix).seal(me, notice)
        return build_udp_frame(mac_of(self.state, FORGER), mac_of(self.state, host),
                               socket.inet_aton(self.controller[0]), vip, self.controller[1], vport, payload)

    def send(self, k: int) -> None:
        """Round ``k``: one forged notice to every victim."""
        assert self.sock is not None
        for victim in self.victims:
            with contextlib.suppress(OSError):  # (a full ring: not counted sent)
                self.sock.send(self.forge(victim, k))
                self.sent[victim] += 1


def forged_controller(state: RunState, out: Path, frames: int, seconds: float) -> tuple[list[dict[str, Any]],
                                                                                        ControllerForger]:
    """The attack while :data:`FORGE_PROCS` reliable processes scatter for ``seconds`` (results in
    ``out``), ``frames`` forged notices at most, spread over the run once every process has
    registered; the oracle's rows (:func:`forgery_checks`, :func:`op_checks`, :func:`delivery_row`)."""
    import threading

    from ..onepipe.runner import controller_status, end_hosts, find_controller, key_file
    from ..onepipe.runner import run as op_run

    keys = key_file(state)
    assert keys is not None  # (keyed_onepipe)
    _, controller = find_controller(state.prefix, state)
    host_of = {ip_of(state, h): h for h in end_hosts(state)}
    victims = {n: (host_of[ip], ip, port) for n, (ip, port) in op_addresses(state, FORGE_PROCS).items()
               if host_of[ip] != FORGER}
    box: dict[str, Any] = {}

    def scatter() -> None:
        try:
            box["summary"] = op_run(state.prefix, procs=FORGE_PROCS, seconds=seconds, out=out, rate=FORGE_RATE,
                                    fanout=FORGE_FANOUT, reliable=True)
        except Exception as exc:  # (a process that crashed: the checks fail)
            box["error"] = f"{type(exc).__name__}: {exc}"

    runner = threading.Thread(target=scatter, name="onepipe-run", daemon=True)
    rounds = max(1, frames // max(1, len(victims)))
    with ControllerForger(state, victims, controller, keys) as forger:
        runner.start()
        time.sleep(OP_LEAD_S)  # (every process registered and scattering)
        forger.learn((controller_status(state.prefix, state) or {}).get("view") or {})
        every = max(0.005, (seconds - 0.5) / rounds)
        k = 0
        while k < rounds and runner.is_alive():
            forger.send(k)
            k += 1
            time.sleep(every)
    runner.join()
    rows = forgery_checks(forger, box.get("summary"))
    rows += op_checks(box, out, set(op_addresses(state, FORGE_PROCS)))
    rows.append(delivery_row(box))
    return rows, forger


def forgery_checks(forger: ControllerForger, summary: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Per victim: every forged notice refused (its controller opener's refusals = what it was
    sent), none taken as the controller's (no era moved: no genuine message refused as stale_era,
    and at least one taken); and no process of the run heard of its own failure while it ran
    (the run's ``failures``, netstack/onepipe/verdict.py: a failure of an earlier run's process at
    the same address, told a newcomer as a REPLAY, is a restart, not this)."""
    if summary is None:
        return [row("1pipe", "forged notices refused", "the run did not finish", False)]
    procs = summary.get("processes") or {}
    rows = []
    for victim, sent in sorted(forger.sent.items()):
        c = ((procs.get(victim) or {}).get("counters") or {})
        a = (c.get("auth") or {}).get("controller") or {}
        refused = sum(int(a.get(r, 0)) for r in ("truncated", "unknown_key", "forged", "replayed"))
        ok = sent > 0 and refused == sent and not a.get("stale_era") and int(a.get("ok", 0)) >= 1
        how = ", ".join(f"{r} {a.get(r, 0)}" for r in ("forged", "truncated"))
        rows.append(row(victim, "forged notices refused",
                        f"{refused} of {sent} forged FAILURE_NOTICEs refused ({how}); genuine controller messages: "
                        f"{a.get('ok', 0)} taken, {a.get('stale_era', 0)} refused as stale_era", ok))
    false = summary.get("failures")
    told = {n: int(((p.get("counters") or {}).get("proc_fails")) or 0) for n, p in procs.items()}
    rows.append(row("1pipe", "no failure heard", f"processes of this run declared failed while they ran: "
                    f"{false if false else 'none'} (failures each process was told of, earlier runs' included: "
                    f"{told})", false == []))
    return rows


def run_onepipe_forged_controller(opts: Options) -> Result:
    """``netstack fuzz onepipe --attack forged-controller`` (netstack/fuzz/attacks.py; issue 34,
    finding 3): while four reliable 1Pipe processes scatter on a keyed topology, a member on h2
    sends every process on another host FAILURE_NOTICEs from the controller's address naming a
    live process (:class:`ControllerForger`), ``--frames`` in all, spread over the run, which
    scatters for ``--frames`` / 100 s (3 to 20 s). The oracle: every forgery refused, no genuine
    controller message refused as stale_era, no process told of a failure, ``netstack onepipe
    check`` passes and every message is delivered, every daemon alive. The topology is
    :func:`replay_topology`'s (keys, no BCP 38 at tor1's port toward h2: a member's host may be one
    whose port does not check); with ``--prefix`` a running keyed one is used as it is."""
    from .checks import liveness

    with keyed_onepipe(opts, "forged-controller") as state:
        res = Result("onepipe", state.prefix, opts.seed, opts.frames)
        seconds = max(3.0, min(round(opts.frames / 100, 1), 20.0))
        out = runtime.run_dir(state.prefix) / f"fuzz-forge-{uuid.uuid4().hex[:6]}"
        t0 = time.monotonic()
        rows, forger = forged_controller(state, out, opts.frames, seconds)
        res.sent = sum(forger.sent.values())
        res.duration_s = res.wall_s = time.monotonic() - t0
        res.notes.append(f"--attack forged-controller: {FORGE_PROCS} reliable processes scattered {seconds:g} s; "
                         f"{res.sent} FAILURE_NOTICEs from the controller's address {forger.controller[0]}:"
                         f"{forger.controller[1]}, sent from {FORGER}, to {', '.join(sorted(forger.victims))}, "
                         f"sealed in turn with {'; '.join(FORGERIES)}")
        res.checks += rows + liveness(state)
        return res
