"""``netstack bench tcsack``: T/C-SACK (draft-chen-tsvwg-updated-ack-00) against go-back-N (RoCE RC's recovery) and TCP.

What to reproduce (docs/papers.md "T/C-SACK", docs/tcsack.md): a comparison in one run against a
go-back-N sender (RoCE RC's recovery) and real kernel TCP over the same impaired, delayed path.
Every point is a run of the ``tcsack-transfer`` scenario (``netstack.tcsack.scenarios``) on the
path h1 - sw1 = sw2 - h2 (100 Mbit/s links, the delay and i.i.d. loss on both directions of
sw1 = sw2, data and ACKs alike: ``path_topology``), in one of two runtimes (``--runtime``; default both):

``sim`` (virtual time, ``netstack.sim``, no root)
    The engines as host apps through the real switch engines, at two round-trip times (4 ms and
    40 ms, T = RTT / 2 so that the sender's 2T probe is one RTT), every loss rate: T/C-SACK,
    go-back-N and the simulator's Reno model of TCP. Deterministic (seeded); the runs are
    independent and go to ``--workers`` processes.

``live`` (root: namespaces, switch daemons, nft)
    The same topology file with ``DELAY_NS`` each way, brought up once per loss rate;
    ``python -m netstack.tcsack`` moves the same pseudo-random bytes from h1 to h2 with each
    protocol (T/C-SACK and go-back-N paced at ``RATE``; kernel TCP with its own congestion
    control), ``--rounds`` times, median reported.

Baselines measured in the same run: each protocol's lossless transfer, go-back-N and TCP at
every loss rate. Output: ``<results>/bench-tcsack-<UTC>.json`` (+ ``-latest``; every run in the
``netstack.run/1`` schema under ``runs``), a Markdown table printed and written to
``bench-tcsack-latest.md``, a PNG plot beside it; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ..sim.scenario import Context, RunSpec, document, get
from ..sim.sweep import sweep
from ..tcsack.scenarios import path_topology, transfer_live
from ..topo.model import topology_from_dict
from .output import Progress, format_table, loadavg, write_results
from .plot import pyplot, save
from .proc import sigterm_unwinds

SECTIONS = ("sim", "live")
LOSSES = (0.0, 1e-3, 1e-2, 3e-2)
SIM_LOSSES = (0.0, 1e-3, 1e-2, 3e-2, 5e-2)
SIM_RTTS_MS = (4, 40)
SIM_RATE = 100_000_000  # the simulated bottleneck
SIM_BYTES = 4_000_000
SIM_SEED = 11
SIM_PROTOS = ("tcsack", "gbn", "tcp")
#: preset rate of the paced senders: 80 % of the testbed's 100 Mbit/s links (line rate)
RATE = 80_000_000
PAYLOAD = 1200
N = 16
T_NS = 2_000_000
DELAY_NS = 2_000_000  # each way on sw1-sw2 in the live section
LIVE_BYTES = 2_000_000
DEFAULT_ROUNDS = 3
PROTOS = ("tcsack", "gbn", "tcp")


def _row(doc: dict[str, Any], section: str, rtt_ms: float) -> dict[str, Any]:
    res = doc["result"]
    c = res.get("sender", {})
    p = doc["params"]
    row: dict[str, Any] = {"section": section, "rtt_ms": rtt_ms, "t_ms": p["t_ms"], "loss": doc["loss"],
                           "proto": p["proto"], "ok": res["ok"], "seconds": res["seconds"],
                           "goodput_mbps": (res["goodput_bps"] or 0.0) / 1e6}
    if p["proto"] == "tcp":
        row["retx"] = c.get("retransmits", c.get("total_retrans", 0)) or 0
    else:
        row.update(retx=c["retx_sent"], probes=c["probes_sent"], timeouts=c.get("timeouts", 0),
                   sent_per_needed=c["sent"] / c["packets"], acks=c["acks_rx"])
    return row


# ----------------------------------------------------------------------------------- sim
def run_sim(say: Progress, workers: int | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    specs, meta = [], []
    for rtt_ms in SIM_RTTS_MS:
        one_way = rtt_ms * 500_000
        for loss in SIM_LOSSES:
            topo = path_topology(rate_bps=SIM_RATE, one_way_ns=one_way, loss=loss)
            for proto in SIM_PROTOS:
                specs.append(RunSpec("tcsack-transfer", topo, SIM_SEED, None,
                                     {"proto": proto, "bytes": SIM_BYTES, "rate_bps": int(SIM_RATE * 0.8),
                                      "t_ms": rtt_ms / 2, "n": N, "payload": PAYLOAD, "max_seconds": 120.0}))
                meta.append((rtt_ms, loss))
    say(f"sim: {len(specs)} transfers of {SIM_BYTES / 1e6:g} MB in virtual time ({workers or 'one per CPU'} workers)")

    def progress(done: int, total: int, r: dict[str, Any]) -> None:
        if "error" in r:
            say(f"sim [{done}/{total}]: {r['params']}: FAILED {r['error']}")
            return
        res = r["result"]
        say(f"sim [{done}/{total}]: {r['params']['proto']}: {res['goodput_bps'] / 1e6:.1f} Mbit/s, "
            f"{r['engine']['events_per_s']} events/s")

    docs = sweep(specs, workers=workers, progress=progress)
    rows = []
    for doc, (rtt_ms, loss) in zip(docs, meta, strict=True):
        if "error" in doc:
            raise RuntimeError(f"sim run failed: {doc['error']}")
        doc["loss"] = loss
        rows.append(_row(doc, "sim", rtt_ms))
    return rows, docs


# ---------------------------------------------------------------------------------- live
def run_live(rounds: int, say: Progress) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from .. import runtime

    sc = get("tcsack-transfer")
    rows, docs = [], []
    for loss in LOSSES:
        topo = topology_from_dict(path_topology(one_way_ns=DELAY_NS, loss=loss), "<bench tcsack path>")
        prefix = f"btc{secrets.token_hex(3)}"
        say(f"live: loss {loss:g}: bringing up the path (prefix {prefix}), {DELAY_NS / 1e6:g} ms each way on sw1-sw2")
        state = runtime.up(topo, prefix)
        try:
            for proto in PROTOS:
                runs = []
                for r in range(rounds):
                    ctx = Context(topo, r + 1, None, sc.check_params(
                        {"proto": proto, "bytes": LIVE_BYTES, "rate_bps": RATE, "t_ms": T_NS / 1e6, "n": N,
                         "payload": PAYLOAD}), prefix, say)
                    t0 = time.perf_counter()
                    res = transfer_live(ctx, state=state)
                    if not res["ok"]:
                        raise RuntimeError(f"{proto}: the receiver's bytes differ from the sender's")
                    doc = document(sc, "live", ctx, res, {"wall_s": round(time.perf_counter() - t0, 3)})
                    doc["loss"] = loss
                    docs.append(doc)
                    runs.append(doc)
                    say(f"live: loss {loss:g}, {proto} round {r + 1}/{rounds}: "
                        f"{res['goodput_bps'] / 1e6:.1f} Mbit/s in {res['seconds']:.2f} s")
                row = _row(runs[0], "live", 2 * DELAY_NS / 1e6)
                row["rounds"] = rounds
                row["seconds"] = statistics.median(d["result"]["seconds"] for d in runs)
                row["goodput_mbps"] = statistics.median(d["result"]["goodput_bps"] for d in runs) / 1e6
                per = [_row(d, "live", 0) for d in runs]
                for key in ("retx", "probes", "timeouts", "sent_per_needed"):
                    if key in row:
                        row[key] = statistics.median(x[key] for x in per)
                rows.append(row)
        finally:
            runtime.down(prefix)
    return rows, docs


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
    plt = pyplot()
    if plt is None:
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
    save(plt, fig, path, dpi=110)
    return True


def main(args: argparse.Namespace) -> int:
    only = getattr(args, "only", None)
    runtime_arg = getattr(args, "runtime", None)
    sections = [s for s in SECTIONS if (not only or any(o in s for o in only)) and runtime_arg in (None, s)]
    if not sections:
        print(f"no section matches --only/--runtime (sections: {', '.join(SECTIONS)})", file=sys.stderr)
        return 2
    if "live" in sections and os.geteuid() != 0:
        print("netstack bench tcsack: live needs root (namespaces, veths, nft); run as root or use --runtime sim",
              file=sys.stderr)
        return 2
    rounds = getattr(args, "rounds", None) or DEFAULT_ROUNDS
    workers = getattr(args, "workers", None)
    results_dir = Path(getattr(args, "results_dir", "results"))
    say = Progress()
    live_runs = len(LOSSES) * len(PROTOS) * rounds
    say(f"netstack bench tcsack: sections {', '.join(sections)}; live: {live_runs} transfers of "
        f"{LIVE_BYTES / 1e6:g} MB (~{live_runs * 2.5 / 60 + len(LOSSES) * 0.05:.1f} min); sim: "
        f"{len(SIM_RTTS_MS) * len(SIM_LOSSES) * len(SIM_PROTOS)} transfers")
    say(f"scale: links 100 Mbit/s (a WAN RDMA path's 100 Gbit/s / 1000); paced senders at {RATE / 1e6:g} Mbit/s, "
        f"{PAYLOAD} B payloads, N = {N}; delays kept in milliseconds, so the bandwidth-delay product in "
        "packets is ~1000x smaller than the WAN's, which understates what go-back-N resends per loss")
    payload: dict[str, Any] = {"sections": sections, "loadavg_before": loadavg(), "rate_bps": RATE,
                               "payload": PAYLOAD, "n": N, "t_ns": T_NS, "delay_ns": DELAY_NS, "rounds": rounds,
                               "time_scale": 1000.0}
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    started = time.monotonic()
    with sigterm_unwinds():
        if "sim" in sections:
            r, d = run_sim(say, workers)
            rows += r
            runs += d
        if "live" in sections:
            try:
                r, d = run_live(rounds, say)
                rows += r
                runs += d
            except Exception as exc:  # reported and recorded; the sim rows are still written
                errors["live"] = f"{type(exc).__name__}: {exc}"
                say(f"live: FAILED ({errors['live']}); its testbed was torn down")
    payload.update(rows=rows, runs=runs, errors=errors, wall_s=time.monotonic() - started, loadavg_after=loadavg())
    table = _table(rows)
    results_dir.mkdir(parents=True, exist_ok=True)
    png = results_dir / "bench-tcsack-latest.png"
    if rows and _plot(rows, png):
        payload["plot"] = str(png)
    path = write_results(results_dir, "bench-tcsack", payload)
    md = ["# netstack bench tcsack", "",
          "T/C-SACK (draft-chen-tsvwg-updated-ack-00) vs go-back-N (RoCE RC) and TCP.", "", table, ""]
    (results_dir / "bench-tcsack-latest.md").write_text("\n".join(md))
    print(table)
    print(f"\nresults: {path}" + (f"; plot: {png}" if "plot" in payload else ""))
    if errors:
        print(f"errors: {errors}", file=sys.stderr)
        return 1
    return 0
