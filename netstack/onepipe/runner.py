"""``netstack onepipe run``: P 1Pipe processes spread over a running testbed's hosts, scattering
concurrently for S seconds, each writing its delivery log.

Processes are named ``p1 .. pP`` and dealt to the hosts in turn (sorted by name), each on its
own UDP port from 1Pipe's range (``PORT + 1``, ``PORT + 2``... per host). One
``python -m netstack.onepipe.live`` per host runs that host's processes, with the host's clock
from the topology (``clock_offset``, ``clock_drift_ppm``). 1Pipe is (re-)enabled in every switch
first, so that every run starts from fresh switch state, with the switches' parameters if it was
on. ``--loss LINK:RATE`` drops that share of the frames in both directions of the link with
nftables for the run and removes it afterwards.

The logs (``DIR/<process>.jsonl``, ``DIR/send-fail/<process>.jsonl``) are :mod:`.live`'s;
``DIR/run.json`` has the run's parameters and every process's counters.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .control import OnePipeControlError, enable_all, status_all, switches_of
from .params import PORT, PORT_RANGE, OnePipeParams


def end_hosts(state: dict[str, Any]) -> list[str]:
    """The hosts of a run: nodes with an address that run no daemon of their own."""
    with_daemon = {d["node"] for d in state.get("daemons", [])}
    return sorted(n for n in state["hosts"] if n not in with_daemon)


def place(hosts: list[str], procs: int) -> dict[str, list[str]]:
    """``{host: [process, ...]}``: ``p1 .. pP`` dealt to the hosts in turn."""
    if procs < 1:
        raise OnePipeControlError("--procs must be at least 1")
    if not hosts:
        raise OnePipeControlError("the running topology has no host")
    per_host = -(-procs // len(hosts))
    if per_host >= PORT_RANGE:
        raise OnePipeControlError(f"{procs} processes need more than {PORT_RANGE - 1} ports on a host")
    out: dict[str, list[str]] = {h: [] for h in hosts}
    for i in range(procs):
        out[hosts[i % len(hosts)]].append(f"p{i + 1}")
    return {h: ps for h, ps in out.items() if ps}


def host_clocks(state: dict[str, Any]) -> dict[str, tuple[int, float]]:
    """``{host: (offset_ns, drift_ppm)}`` from the topology the run was built from (none: 0, 0)."""
    from ..runtime import topology_of
    from ..topo.model import TopologyError
    from .clock import host_clock

    try:
        topo = topology_of(state)
    except TopologyError:
        return {}
    out = {}
    for node in topo.nodes:
        clock = host_clock(topo, node)
        if clock.offset_ns or clock.drift_ppm:
            out[node.name] = (clock.offset_ns, clock.drift_ppm)
    return out


def parse_loss(spec: str, links: dict[str, Any]) -> tuple[str, float]:
    """``LINK:RATE`` -> (link, probability), checked against the running links."""
    link, _, rate = spec.rpartition(":")
    if not link or link not in links:
        raise OnePipeControlError(f"--loss {spec!r}: no link {link!r}; links: {', '.join(sorted(links))}")
    try:
        p = float(rate)
    except ValueError:
        raise OnePipeControlError(f"--loss {spec!r}: {rate!r} is not a probability") from None
    if not 0.0 <= p < 1.0:
        raise OnePipeControlError(f"--loss {spec!r}: the rate must be in [0, 1)")
    return link, p


def run(prefix: str, *, procs: int, seconds: float, out: str | Path, loss: Sequence[str] = (),
        rate: float = 100.0, fanout: int = 2, size: int = 64, drain: float = 1.0, seed: str = "1",
        params: OnePipeParams | None = None, say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the processes; the summary (also written to ``OUT/run.json``)."""
    from ..runtime import load_state
    from ..topo.impair import apply_impairment, clear_impairment

    state = load_state(prefix)
    params_given = params
    params = params or OnePipeParams()
    placed = place(end_hosts(state), procs)
    losses = [parse_loss(s, state["links"]) for s in loss]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*.jsonl"), *out.glob("send-fail/*.jsonl"), out / "run.json"]:
        old.unlink(missing_ok=True)  # a log left from an earlier run would join the check
    # every run starts from fresh switch state (a previous run's inputs would hold the barrier
    # until they time out), with the parameters the switches run if 1Pipe is on (netstack onepipe
    # enable --t-beacon-ms ...): the processes must beacon at the switches' T_beacon
    on = [st for st in status_all(prefix).values() if st is not None]
    if on and params_given is None:
        params = OnePipeParams(**on[0]["params"])
    say(f"{'re-' if on else ''}enabling 1Pipe in {', '.join(switches_of(state))} (T_beacon "
        f"{params.t_beacon_ns / 1e6:g} ms)")
    enable_all(prefix, params)
    addrs = {p: (state["hosts"][h].split("/")[0], PORT + 1 + i) for h, ps in placed.items() for i, p in enumerate(ps)}
    broadcast = {h: str(ipaddress.ip_interface(state["hosts"][h]).network.broadcast_address) for h in placed}
    all_procs = ",".join(f"{p}:{ip}:{port}" for p, (ip, port) in addrs.items())
    clocks = host_clocks(state)
    impaired = []
    try:
        for link, p in losses:
            for end in (e for e in state["ports"] if e["link"] == link):
                apply_impairment(prefix, end["netns"], end["ifname"], loss=p, backend="nft")
                impaired.append(end)
            say(f"dropping {p:g} of the frames on {link} (both directions, nft)")
        start_at = time.time() + 1.5
        epoch = time.monotonic_ns()  # one for every host: the skews start at the topology's offsets
        running = {}
        for host, ps in placed.items():
            offset, drift = clocks.get(host, (0, 0.0))
            argv = ["ip", "netns", "exec", state["namespaces"][host], sys.executable, "-m", "netstack.onepipe.live",
                    "--procs", ",".join(ps), "--all-procs", all_procs, "--out", str(out), "--seconds", str(seconds),
                    "--rate", str(rate), "--fanout", str(fanout), "--size", str(size), "--drain", str(drain),
                    "--seed", seed, "--start-at", str(start_at), "--clock-offset-ns", str(offset),
                    "--clock-drift-ppm", str(drift), "--clock-epoch-ns", str(epoch), "--broadcast", broadcast[host],
                    "--params", json.dumps(params.to_dict())]
            running[host] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        say(f"{procs} processes on {len(placed)} hosts scatter for {seconds:g} s "
            f"({rate:g} scatterings/s each, {fanout} destinations)")
        results = _collect(running, timeout=seconds + drain + 60)
    finally:
        for end in impaired:
            clear_impairment(prefix, end["netns"], end["ifname"])
    return _summary(out, results, placed, addrs, clocks, params, dict(procs=procs, seconds=seconds, rate=rate,
                                                                       fanout=fanout, size=size, drain=drain,
                                                                       loss=[f"{k}:{v:g}" for k, v in losses]))


def _collect(running: dict[str, subprocess.Popen[str]], timeout: float) -> dict[str, Any]:
    results: dict[str, Any] = {}
    deadline = time.monotonic() + timeout
    errors = []
    try:
        for host, proc in running.items():
            try:
                so, se = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                errors.append(f"{host}: did not finish in time")
                continue
            lines = so.strip().splitlines()
            if proc.returncode != 0 or not lines:
                errors.append(f"{host}: exit {proc.returncode}: {se.strip()[-400:]}")
                continue
            results[host] = json.loads(lines[-1])
    finally:
        for proc in running.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if errors:
        raise OnePipeControlError("1Pipe processes failed: " + "; ".join(errors))
    return results


def _summary(out: Path, results: dict[str, Any], placed: dict[str, list[str]], addrs: dict[str, tuple[str, int]],
             clocks: dict[str, tuple[int, float]], params: OnePipeParams, run_args: dict[str, Any]) -> dict[str, Any]:
    procs = {p: s for r in results.values() for p, s in r["processes"].items()}
    sent = sum(s["messages_sent"] for s in procs.values())
    delivered = sum(s["delivered"] for s in procs.values())
    failed = sum(s["send_failed"] for s in procs.values())
    summary = {"tool": "netstack onepipe run", "out": str(out), **run_args, "params": params.to_dict(),
               "placement": placed, "addresses": {p: f"{ip}:{port}" for p, (ip, port) in addrs.items()},
               "clocks": {h: {"offset_ns": o, "drift_ppm": d} for h, (o, d) in clocks.items()},
               "messages_sent": sent, "delivered": delivered, "send_failed": failed,
               "unaccounted": sent - delivered - failed, "processes": procs}
    (out / "run.json").write_text(json.dumps(summary, indent=2))
    return summary


__all__ = ["end_hosts", "host_clocks", "parse_loss", "place", "run"]
