"""The ``onepipe`` target: tor1's host and spine ports of the ``onepipe`` topology while four 1Pipe
processes scatter, never forging a process's own datagrams; afterwards ``netstack onepipe check``
on what they delivered of each other's (docs/faults.md "Fuzzing campaign")."""

from __future__ import annotations

import json
import random
import socket
import time
import uuid
from pathlib import Path
from typing import Any

from headers import strategies as hs

from .. import runtime
from ..runtime import RunState
from .campaign import Options, Result, account_settled, close_injectors, finish, open_injectors, topology
from .checks import row, settled
from .frames import Injector, spoofs, switch_only
from .ports import Link, find_link, ip_of, mac_of
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
