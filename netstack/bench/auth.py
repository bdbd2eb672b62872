"""``netstack bench auth``: what authenticated frames cost (docs/security.md "Keys and
authenticated frames").

Two parts, in one run:

``mac``
    Per-frame cost of sealing and opening (AES-CMAC trailer, replay window) at 64 and 1500
    bytes, against a baseline measured in the same run: copying the frame (what any handling
    costs) and a fresh CMAC object per frame (the obvious way, which the Sealer/Opener avoid).
    Beside them, signing and verifying the same frame with Ed25519 (netstack/auth/sign.py: the
    1Pipe controller's messages).
``linkguardian`` (root: namespaces, the switch daemons, nft corruption)
    LinkGuardian's effective link speed with authentication off and on: the default topology
    brought up twice under fresh prefixes, once without and once with a key file; nft corrupts
    ``--corrupt`` (default 1e-2) of sw1 -> sw2, LinkGuardian (blocking, N = 2) protects the link,
    and kernel TCP runs h1 -> h2 for ``--duration`` seconds (default 10). Reported: goodput,
    goodput over the link rate (the effective link speed), the switch daemons' CPU (user+system
    seconds per second of the run), and the control frames sealed and accepted. Off and on are
    alternated ``--rounds`` times (default 2) and medians reported.

    Each run says whether it counts (netstack.validity), as Fig. 9 of ``netstack bench
    linkguardian``, the same kind of run: TCP is held to the emulated link's rate by the switch
    daemons' pacer, so nothing is busy on purpose and what decides is scheduling delay (every
    switch daemon's, ``experiment.LagWindow``, and both TCP tools' own), within the generic
    limits. A run that does not count is left out of the medians and of the keys-on / keys-off
    ratio (``on_vs_off``: the median of each round's on / off, a round counting only when both of
    its runs do) and listed (``invalid_rows``, "Invalid runs (not counted)"): ``netstack bench
    auth`` then exits 3 (``INVALID RUN``). No correctness cross-check (``cross_checks`` is empty).
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..validity import Validity
from .common import format_table
from .output import Progress, loadavg, write_results

if TYPE_CHECKING:
    from ..runtime import RunState

CORRUPT = 1e-2
DURATION_S = 10.0
ROUNDS = 2
COPIES = 2
SIZES = (64, 1500)


def mac_rows(min_time: float) -> list[dict[str, Any]]:
    """Per-frame µs: seal, open, and the baselines (frame copy; a fresh CMAC object per frame)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.ciphers import algorithms
    from cryptography.hazmat.primitives.cmac import CMAC

    from ..auth import Opener, Sealer
    from ..auth.keys import DerivedKeys
    from ..auth.sign import SignOpener, SignSealer

    keys = DerivedKeys({1: bytes(range(16))}, 1)
    rows = []
    for size in SIZES:
        data = bytes(size - 17)
        sealer = Sealer(keys, era=1)
        # enough fresh frames for ``open`` to run min_time without replaying one (~1 µs at best)
        frames = [sealer.seal(data) for _ in range(int(min_time * 1.2e6) + 2000)]
        opener = Opener(keys, window=64)
        signing = Ed25519PrivateKey.generate()
        signer = SignSealer(signing, era=1)
        # verifying takes tens of µs: fewer fresh frames last min_time (chunks of 1000 calls)
        signed = [signer.seal(b"", data) for _ in range(int(min_time / 20e-6) + 2000)]
        verifier = SignOpener(signing.public_key(), window=64)

        def fresh(d: bytes = data) -> None:
            c = CMAC(algorithms.AES(keys.keys[1]))
            c.update(d)
            c.finalize()

        it, its = iter(frames), iter(signed)
        cases = {
            "copy": lambda d=data: bytes(bytearray(d)),
            "fresh CMAC": fresh,
            "seal": lambda d=data, s=sealer: s.seal(d),
            "open": lambda o=opener, i=it: o.open(next(i)),
            "sign": lambda d=data, s=signer: s.seal(b"", d),
            "verify": lambda o=verifier, i=its: o.open(b"", next(i)),
        }
        out = {"size": size}
        for name, fn in cases.items():
            out[name] = _per_call_us(fn, min_time)
        rows.append(out)
    return rows


def _per_call_us(fn: Any, min_time: float) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        for _ in range(1000):
            fn()
        n += 1000
        dt = time.perf_counter() - t0
        if dt >= min_time:
            return dt / n * 1e6


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def lg_run(prefix: str, keys_file: Path | None, corrupt: float, seconds: float, say: Progress) -> dict[str, Any]:
    """One live run: up (with or without keys), corruption, LinkGuardian, kernel TCP h1 -> h2;
    ``valid``/``checks``: whether it counts (module docstring)."""
    from .. import runtime
    from ..linkguardian.control import enable_link
    from ..topo import impair
    from ..topo.model import default_topology_text, loads_topology

    text = default_topology_text()
    source = "<bench auth>"
    if keys_file is not None:
        text = text.replace('prefix = "ns"', f'prefix = "ns"\nkeys = "{keys_file}"')
    topo = loads_topology(text, source)
    state = runtime.up(topo, prefix, apply_impairments=False)
    try:
        impair.apply_impairment(prefix, state.namespaces["sw1"], "p-sw2", corrupt=corrupt, backend="nft")
        enable_link(prefix, "sw1-sw2", copies=COPIES)
        pids = {d.node: d.pid for d in state.daemons if d.kind == "switch"}
        sent, cpu, v = _tcp(state, prefix, pids, seconds)
        snd = runtime.control(prefix, "sw1", "lg_status")["p-sw2"]["sender"]["counters"]
        rcv = runtime.control(prefix, "sw2", "lg_status")["p-sw1"]["receiver"]["counters"]
        rate = topo.link("sw1-sw2").rate_bps
        return {"auth": keys_file is not None, "mbps": sent["mbps"], "effective_link_speed": sent["mbps"] * 1e6 / rate,
                "cpu": cpu, "auth_sealed": rcv.get("auth_sealed", 0), "auth_ok": snd.get("auth_ok", 0),
                "auth_refused": sum((snd.get("auth_refused") or {}).values()),
                "retransmissions": snd.get("retransmissions"), "holes": rcv.get("holes_detected"),
                "timeouts": rcv.get("timeouts"), **v.to_dict()}
    finally:
        runtime.down(prefix)


def _tcp(state: RunState, prefix: str, pids: dict[str, int],
         seconds: float) -> tuple[dict[str, Any], dict[str, float], Validity]:
    """Kernel TCP h1 -> h2 for ``seconds``: tcp-send's JSON, the switch daemons' CPU (s/s), and the
    run's checks (every process's scheduling delay over it)."""
    from .. import toolproc
    from ..experiment import ExperimentError, LagWindow, finish_tool, start_tool, tool_argv

    sink = start_tool(state, "h2", "tcp-sink")
    try:
        cpu0 = {n: _cpu_s(p) for n, p in pids.items()}
        lag = LagWindow(prefix).start()
        t0 = time.monotonic()
        sent = toolproc.run(tool_argv(state, "h1", "tcp-send", "--dst", "10.0.0.2", "--seconds", str(seconds)),
                            "tcp-send", seconds + 60)  # a ToolError (RuntimeError) if it fails
        wall = time.monotonic() - t0
        lag.stop()
        cpu = {n: (_cpu_s(p) - cpu0[n]) / wall for n, p in pids.items()}
        lag.add_tool("h1 tcp-send", sent)
        try:  # the sink ends when the sender closes; one that reports nothing is named, not starved
            lag.add_tool("h2 tcp-sink", finish_tool(sink, timeout=30))
        except ExperimentError:
            lag.add_tool("h2 tcp-sink", None)
    finally:
        toolproc.kill(sink)
    v = Validity()
    lag.check(v)
    return sent, cpu, v


def lg_summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians per side over the runs that count, and ``on_vs_off``: the median of each round's
    keys-on / keys-off effective link speed, over the rounds whose two runs both count (each
    keys-on run carries its round's ratio, ``vs_keys_off``; None where it does not count)."""
    summary: dict[str, Any] = {}
    for keyed in (False, True):
        mine = [r for r in runs if r["auth"] == keyed]
        ok = [r for r in mine if r.get("valid", True)]
        side: dict[str, Any] = {"runs": len(mine), "runs_valid": len(ok)}
        for k in ("mbps", "effective_link_speed"):
            side[k] = statistics.median(r[k] for r in ok) if ok else None
        side["cpu"] = {n: statistics.median(r["cpu"][n] for r in ok) if ok else None for n in ("sw1", "sw2")}
        summary["on" if keyed else "off"] = side
    for r in runs:
        r["vs_keys_off"] = _round_ratio(r, runs)
    ratios = [r["vs_keys_off"] for r in runs if r["vs_keys_off"] is not None]
    summary["on_vs_off"] = statistics.median(ratios) if ratios else None
    summary["on_vs_off_range"] = [min(ratios), max(ratios)] if ratios else None
    summary["rounds_counted"] = len(ratios)
    return summary


def _round_ratio(run: dict[str, Any], runs: list[dict[str, Any]]) -> float | None:
    """A keys-on run's effective link speed over its round's keys-off run's; None for a keys-off
    run, or when either run does not count."""
    if not run["auth"] or not run.get("valid", True):
        return None
    off = next((o for o in runs if not o["auth"] and o["round"] == run["round"]), None)
    if off is None or not off.get("valid", True) or not off["effective_link_speed"]:
        return None
    return float(run["effective_link_speed"] / off["effective_link_speed"])


def invalid_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"row": f"linkguardian round {r['round']}, keys {'on' if r['auth'] else 'off'}",
             "reasons": Validity.of(r).reasons or ["the run says it is invalid"]}
            for r in runs if not r.get("valid", True)]


def verdicts(invalid: list[dict[str, Any]]) -> dict[str, Any]:
    """``valid``, ``checks`` (each invalid run a failed check), ``invalid_rows``, ``cross_checks``
    (none): what ``netstack bench`` ends with (netstack/bench/summary.py)."""
    return {"valid": not invalid,
            "checks": [{"name": r["row"], "expected": "a valid live run", "measured": "; ".join(r["reasons"]),
                        "ok": False} for r in invalid],
            "invalid_rows": invalid, "cross_checks": []}


def _num(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def print_lg(summary: dict[str, Any], runs: list[dict[str, Any]], invalid: list[dict[str, Any]], rounds: int) -> None:
    rows = []
    for side, label in (("off", "off (baseline)"), ("on", "on")):
        s = summary[side]
        mine = [r for r in runs if r["auth"] == (side == "on") and r.get("valid", True)]
        rows.append([label, f"{s['runs_valid']}/{s['runs']}", _num(s["mbps"], ".1f"),
                     _num(s["effective_link_speed"], ".3f"), _num(s["cpu"]["sw1"], ".2f"), _num(s["cpu"]["sw2"], ".2f"),
                     sum(r["auth_sealed"] for r in mine), sum(r["auth_ok"] for r in mine),
                     sum(r["auth_refused"] for r in mine)])
    print(f"\nLinkGuardian, {CORRUPT:g} corruption on sw1 -> sw2, kernel TCP h1 -> h2, medians of the valid runs of "
          f"{rounds} alternating rounds:")
    print(format_table(["auth", "valid runs", "TCP Mbit/s", "effective link speed", "sw1 CPU s/s", "sw2 CPU s/s",
                        "control sealed", "accepted", "refused"], rows))
    ratio, rng = summary["on_vs_off"], summary["on_vs_off_range"]
    print(f"keys on / off, effective link speed: {_num(ratio, '.3f')}"
          + (f" (median of {summary['rounds_counted']} round(s), range {rng[0]:.3f}-{rng[1]:.3f})" if rng else
             " (no round whose two runs both count)"))
    if invalid:
        print("\nInvalid runs (not counted; left out of the medians and the ratio above):")
        for r in invalid:
            print(f"- {r['row']}: {'; '.join(r['reasons'])}")


def lg_runs(rounds: int, seconds: float, say: Progress) -> list[dict[str, Any]]:
    """Keys off, keys on, alternated ``rounds`` times, each under a fresh prefix."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="netstack-bench-auth-") as d:
        from ..auth.keys import generate

        keyfile = Path(d) / "bench.keys"
        generate(keyfile)
        for i in range(rounds):
            for keyed in (False, True):
                prefix = f"ba{secrets.token_hex(3)}"
                say(f"linkguardian: round {i + 1}/{rounds}, auth {'on' if keyed else 'off'}: {CORRUPT:g} "
                    f"corruption, LG N={COPIES}, kernel TCP for {seconds:g} s ...")
                run = {"round": i + 1, **lg_run(prefix, keyfile if keyed else None, CORRUPT, seconds, say)}
                if not run["valid"]:
                    say("linkguardian: INVALID (not counted): " + "; ".join(Validity.of(run).reasons))
                runs.append(run)
    return runs


def main(args: argparse.Namespace) -> int:
    say = Progress()
    only = getattr(args, "only", None) or []
    parts = [p for p in ("mac", "linkguardian") if not only or any(o in p for o in only)]
    if "linkguardian" in parts and os.geteuid() != 0:
        print("netstack bench auth: the linkguardian part needs root (namespaces, nft); "
              "run as root or use --only mac", file=sys.stderr)
        return 2
    seconds = float(getattr(args, "duration", None) or DURATION_S)
    rounds = int(getattr(args, "rounds", None) or ROUNDS)
    payload: dict[str, Any] = {"parts": parts, "loadavg_before": loadavg()}
    if "mac" in parts:
        say("mac: per-frame seal/open vs a frame copy and a fresh CMAC per frame ...")
        payload["mac"] = mac_rows(float(getattr(args, "min_time", 0.25)))
        print("per frame, µs (same run):")
        print(format_table(["bytes", "copy (baseline)", "fresh CMAC", "seal", "open", "Ed25519 sign", "verify"],
                           [[r["size"], f"{r['copy']:.2f}", f"{r['fresh CMAC']:.2f}", f"{r['seal']:.2f}",
                             f"{r['open']:.2f}", f"{r['sign']:.1f}", f"{r['verify']:.1f}"] for r in payload["mac"]]))
    if "linkguardian" in parts:
        runs = lg_runs(rounds, seconds, say)
        invalid = invalid_rows(runs)
        payload["linkguardian_runs"] = runs
        payload["linkguardian"] = lg_summary(runs)
        payload.update(verdicts(invalid))
        print_lg(payload["linkguardian"], runs, invalid, rounds)
    else:
        payload.update(verdicts([]))  # the mac part measures no run that could be starved
    payload["loadavg_after"] = loadavg()
    path = write_results(Path(getattr(args, "results_dir", "results")), "bench-auth", payload)
    print(f"wrote {path}")
    return 0
