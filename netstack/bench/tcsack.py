"""``netstack bench tcsack``: T/C-SACK (seed 004) against go-back-N (RoCE RC's recovery) and kernel TCP.

PROTOCOLS.md: "Compare in one run against a go-back-N sender (RoCE RC's recovery) and real kernel
TCP over the same impaired, delayed path." Two sections (``--only`` picks by substring):

``sim`` (virtual time, no root)
    The real engines on a simulated 100 Mbit/s path (:mod:`netstack.tcsack.sim`), i.i.d. loss
    on data *and* ACKs, at two round-trip times (4 ms and 40 ms, T = RTT / 2 so that the
    sender's 2T probe is one RTT), every loss rate, T/C-SACK and go-back-N. Deterministic.

``live`` (root: namespaces, switch daemons, nft)
    The default topology with ``DELAY_NS`` added each way on sw1-sw2 and nft loss on both
    directions of it; ``python -m netstack.tcsack`` moves the same pseudo-random bytes from h1
    to h2 with each protocol (T/C-SACK and go-back-N paced at ``RATE``; kernel TCP with its
    own congestion control, the host's default), ``--rounds`` times, median reported.

Baselines measured in the same run: each protocol's lossless transfer, go-back-N and TCP at
every loss rate. Output: ``<results>/bench-tcsack-<UTC>.json`` (+ ``-latest``), a Markdown table
printed and written to ``bench-tcsack-latest.md``, a PNG plot beside it; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..tcsack.live import data_for
from ..tcsack.params import TcsParams
from ..tcsack.sim import Path as SimPath
from ..tcsack.sim import run_transfer
from .common import Progress, format_table, loadavg, sigterm_unwinds, write_results

SECTIONS = ("sim", "live")
LOSSES = (0.0, 1e-3, 1e-2, 3e-2)
SIM_LOSSES = (0.0, 1e-3, 1e-2, 3e-2, 5e-2)
SIM_RTTS_MS = (4, 40)
SIM_RATE = 100_000_000  # the simulated bottleneck
SIM_BYTES = 4_000_000
#: preset rate of the paced senders: 80 % of the testbed's 100 Mbit/s links (line rate)
RATE = 80_000_000
PAYLOAD = 1200
N = 16
T_NS = 2_000_000
DELAY_NS = 2_000_000  # added each way on sw1-sw2 in the live section
LIVE_BYTES = 2_000_000
DEFAULT_ROUNDS = 3
PROTOS = ("tcsack", "gbn", "tcp")


def live_transfer(state: dict[str, Any], proto: str, nbytes: int, *extra: str, rate: int = RATE,
                  timeout: float = 90.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """One transfer h1 -> h2 with ``python -m netstack.tcsack``: (sender JSON, receiver JSON)."""
    def argv(node: str, *args: str) -> list[str]:
        return ["ip", "netns", "exec", state["namespaces"][node], sys.executable, "-m", "netstack.tcsack", *args]

    recv = subprocess.Popen(argv("h2", "recv", "--proto", proto, "--wait", "20", *extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = recv.stderr.readline().strip() if recv.stderr else ""
        if ready != "ready":
            raise RuntimeError(f"tcsack receiver did not start: {ready or recv.stderr.read() if recv.stderr else ''}")
        send = subprocess.run(argv("h1", "send", "--proto", proto, "--dst", "10.0.0.2", "--bytes", str(nbytes),
                                   "--rate", str(rate), "--max-seconds", str(timeout * 0.6), *extra),
                              capture_output=True, text=True, timeout=timeout, check=False)
        if send.returncode != 0:
            recv.kill()  # it would wait for a sender that is gone
        out, err = recv.communicate(timeout=timeout)
    finally:
        if recv.poll() is None:
            recv.kill()
            recv.wait()
    if send.returncode != 0 or recv.returncode != 0:
        raise RuntimeError(f"{proto} transfer failed: sender rc {send.returncode} {send.stderr.strip()[-300:]}; "
                           f"receiver rc {recv.returncode} {err.strip()[-300:]}")
    return json.loads(send.stdout.strip().splitlines()[-1]), json.loads(out.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------- sim
def run_sim(say: Progress) -> list[dict[str, Any]]:
    rows = []
    data = data_for(SIM_BYTES, 1)
    for rtt_ms in SIM_RTTS_MS:
        t_ns = rtt_ms * 500_000
        params = TcsParams(rate_bps=int(SIM_RATE * 0.8), t_ns=t_ns, n=N, payload=PAYLOAD)
        for loss in SIM_LOSSES:
            for proto in ("tcsack", "gbn"):
                one_way = rtt_ms * 500_000
                fwd = SimPath(rate_bps=SIM_RATE, delay_ns=one_way, loss=loss, seed=11)
                rev = SimPath(rate_bps=SIM_RATE, delay_ns=one_way, loss=loss, seed=12)
                res = run_transfer(proto, params, data, fwd, rev)
                c = res["sender"]
                row = {"section": "sim", "rtt_ms": rtt_ms, "t_ms": t_ns / 1e6, "loss": loss, "proto": proto,
                       "ok": res["delivered_ok"], "seconds": (res["done_ns"] or 0) / 1e9,
                       "goodput_mbps": (res["goodput_bps"] or 0.0) / 1e6, "lost": res["fwd_lost"],
                       "retx": c["retx_sent"], "probes": c["probes_sent"], "timeouts": c.get("timeouts", 0),
                       "sent_per_needed": c["sent"] / c["packets"], "acks": c["acks_rx"]}
                rows.append(row)
                say(f"sim: RTT {rtt_ms} ms, loss {loss:g}, {proto}: {row['goodput_mbps']:.1f} Mbit/s, "
                    f"{row['retx']} resent for {row['lost']} lost")
    return rows


# ---------------------------------------------------------------------------------- live
def run_live(prefix: str, rounds: int, say: Progress) -> list[dict[str, Any]]:
    from .. import runtime
    from ..topo import impair
    from ..topo.model import load_topology

    rows = []
    say(f"live: bringing up the default topology (prefix {prefix}), +{DELAY_NS / 1e6:g} ms each way on sw1-sw2")
    state = runtime.up(load_topology(None), prefix, apply_impairments=False)
    ends = (("sw1", "p-sw2"), ("sw2", "p-sw1"))
    try:
        for sw, port in ends:
            runtime.control(prefix, sw, "set_port", port=port, delay_ns=DELAY_NS)
        for loss in LOSSES:
            for sw, port in ends:
                if loss:
                    impair.apply_impairment(prefix, state["namespaces"][sw], port, loss=loss, backend="nft")
                else:
                    impair.clear_impairment(prefix, state["namespaces"][sw], port)
            for proto in PROTOS:
                runs = []
                for r in range(rounds):
                    send, recv = live_transfer(state, proto, LIVE_BYTES)
                    if recv["sha256"] != send["sha256"]:
                        raise RuntimeError(f"{proto}: the receiver's bytes differ from the sender's")
                    runs.append(send)
                    say(f"live: loss {loss:g}, {proto} round {r + 1}/{rounds}: "
                        f"{send['goodput_bps'] / 1e6:.1f} Mbit/s in {send['seconds']:.2f} s")
                c = [s["counters"] for s in runs]
                row = {"section": "live", "rtt_ms": 2 * DELAY_NS / 1e6, "t_ms": T_NS / 1e6, "loss": loss,
                       "proto": proto, "ok": True, "rounds": rounds,
                       "seconds": statistics.median(s["seconds"] for s in runs),
                       "goodput_mbps": statistics.median(s["goodput_bps"] for s in runs) / 1e6, "runs": runs}
                if proto == "tcp":
                    row["retx"] = statistics.median(x["total_retrans"] or 0 for x in c)
                else:
                    row.update(retx=statistics.median(x["retx_sent"] for x in c),
                               probes=statistics.median(x["probes_sent"] for x in c),
                               timeouts=statistics.median(x.get("timeouts", 0) for x in c),
                               sent_per_needed=statistics.median(x["sent"] / x["packets"] for x in c),
                               srtt_us=statistics.median(x["srtt_us"] or 0 for x in c))
                rows.append(row)
    finally:
        runtime.down(prefix)
    return rows


# ---------------------------------------------------------------------------------- output
def _table(rows: list[dict[str, Any]]) -> str:
    base = {(r["section"], r["rtt_ms"], r["proto"]): r["goodput_mbps"] for r in rows if r["loss"] == 0}
    out = []
    for r in rows:
        b = base.get((r["section"], r["rtt_ms"], r["proto"]))
        out.append([r["section"], f"{r['rtt_ms']:g}", f"{r['t_ms']:g}", f"{r['loss']:g}", r["proto"],
                    f"{r['goodput_mbps']:.1f}", f"{100 * r['goodput_mbps'] / b:.0f} %" if b else "-",
                    f"{r['seconds']:.3f}", r.get("retx", "-"), r.get("probes", "-"), r.get("timeouts", "-"),
                    f"{r['sent_per_needed']:.3f}" if "sent_per_needed" in r else "-"])
    return format_table(["section", "RTT ms", "T ms", "loss (each way)", "proto", "goodput Mbit/s",
                         "of own lossless", "completion s", "resent pkts", "2T probes", "timeouts",
                         "sent / needed"], out)


def _plot(rows: list[dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    groups = sorted({(r["section"], r["rtt_ms"]) for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (section, rtt) in zip(axes[0], groups, strict=True):
        for proto, style in (("tcsack", "o-"), ("gbn", "s--"), ("tcp", "^:")):
            pts = [r for r in rows if r["section"] == section and r["rtt_ms"] == rtt and r["proto"] == proto]
            if pts:
                ax.plot([max(r["loss"], 1e-4) for r in pts], [r["goodput_mbps"] for r in pts], style, label=proto)
        ax.set_xscale("log")
        ax.set_xlabel("loss rate each way (0 drawn at 1e-4)")
        ax.set_ylabel("goodput (Mbit/s)")
        ax.set_title(f"{section}, RTT {rtt:g} ms")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(args: argparse.Namespace) -> int:
    only = getattr(args, "only", None)
    sections = [s for s in SECTIONS if not only or any(o in s for o in only)]
    if not sections:
        print(f"no section matches --only (sections: {', '.join(SECTIONS)})", file=sys.stderr)
        return 2
    if "live" in sections and os.geteuid() != 0:
        print("netstack bench tcsack: live needs root (namespaces, veths, nft); run as root or use --only sim",
              file=sys.stderr)
        return 2
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    results_dir = Path(getattr(args, "results_dir", "results"))
    say = Progress()
    live_runs = len(LOSSES) * len(PROTOS) * rounds
    say(f"netstack bench tcsack: sections {', '.join(sections)}; live: {live_runs} transfers of "
        f"{LIVE_BYTES / 1e6:g} MB (~{live_runs * 2.5 / 60:.1f} min); sim ~{len(SIM_LOSSES) * 4 * 2} s")
    say(f"scale: links 100 Mbit/s (a WAN RDMA path's 100 Gbit/s / 1000); paced senders at {RATE / 1e6:g} Mbit/s, "
        f"{PAYLOAD} B payloads, N = {N}; delays kept in milliseconds, so the bandwidth-delay product in "
        "packets is ~1000x smaller than the WAN's, which understates what go-back-N resends per loss")
    payload: dict[str, Any] = {"sections": sections, "loadavg_before": loadavg(), "rate_bps": RATE,
                               "payload": PAYLOAD, "n": N, "t_ns": T_NS, "delay_ns": DELAY_NS, "rounds": rounds}
    rows: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    started = time.monotonic()
    with sigterm_unwinds():
        if "sim" in sections:
            rows += run_sim(say)
        if "live" in sections:
            try:
                rows += run_live(f"btc{secrets.token_hex(3)}", rounds, say)
            except Exception as exc:  # reported and recorded; the sim rows are still written
                errors["live"] = f"{type(exc).__name__}: {exc}"
                say(f"live: FAILED ({errors['live']}); its testbed was torn down")
    payload.update(rows=rows, errors=errors, wall_s=time.monotonic() - started, loadavg_after=loadavg())
    table = _table(rows)
    results_dir.mkdir(parents=True, exist_ok=True)
    png = results_dir / "bench-tcsack-latest.png"
    if rows and _plot(rows, png):
        payload["plot"] = str(png)
    path = write_results(results_dir, "bench-tcsack", payload)
    md = ["# netstack bench tcsack", "", "Seed 004 (T/C-SACK) vs go-back-N (RoCE RC) and kernel TCP.", "", table, ""]
    (results_dir / "bench-tcsack-latest.md").write_text("\n".join(md))
    print(table)
    print(f"\nresults: {path}" + (f"; plot: {png}" if "plot" in payload else ""))
    if errors:
        print(f"errors: {errors}", file=sys.stderr)
        return 1
    return 0
