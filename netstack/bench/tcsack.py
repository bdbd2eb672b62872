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
every loss rate. Every transfer carries its verdict (netstack.validity, netstack/tcsack/verdict.py:
completed, bytes intact, paced at the preset rate, no process starved; virtual time cannot be
starved). A live row is the median of the rounds that count; a transfer that is not valid is left
out of every median, ratio (``of_lossless``, ``vs_gbn``) and the plot, and listed
(``invalid_rows``, "Invalid transfers (not counted)"): ``netstack bench tcsack`` then exits 3
(``INVALID RUN``). The correctness cross-check (``cross_checks``): every transfer that completed
delivered exactly the bytes sent; its failure exits 1 (``CROSS-CHECK FAILED``).

Output: ``<results>/bench-tcsack-<UTC>.json`` (+ ``-latest``; every run in the ``netstack.run/1``
schema under ``runs``), a Markdown table printed and written to ``bench-tcsack-latest.md``, a PNG
plot beside it; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..ethernet import WIRE_OVERHEAD_BYTES
from ..sim.scenario import Context, RunSpec, document, get
from ..sim.sweep import sweep
from ..tcsack.live import available_cc
from ..tcsack.scenarios import path_topology, transfer_live
from ..tcsack.verdict import paced_rate_bps
from ..topo.model import topology_from_dict
from ..validity import Validity
from .output import Progress, format_table, loadavg, write_results
from .plot import pyplot, save
from .proc import sigterm_unwinds

if TYPE_CHECKING:
    from ..runtime import RunState

SECTIONS = ("sim", "live")
#: live: nft loss rates on both directions of sw1 = sw2 ...
LOSSES = (0.0, 1e-2, 3e-2)
#: ... and corruption rates (issue 33's criterion: T/C-SACK holds its preset rate at 2 % corruption both ways)
CORRUPTS = (2e-2,)
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
#: live contenders: the paced senders and kernel TCP with each congestion control (``tcp-<cc>``)
PROTOS = ("tcsack", "gbn", "tcp-cubic", "tcp-bbr")
#: T/C-SACK's achieved wire rate must be this close to its preset (issue 33: "within 5 %")
HOLD_TOLERANCE = 0.05
#: kernel TCP's bytes on the wire per data segment beyond its payload: Ethernet 14, IPv4 20, TCP 20
#: and the timestamp option 12 (Linux sends it by default), plus preamble, gap and FCS
TCP_SEGMENT_OVERHEAD = 14 + 20 + 20 + 12 + WIRE_OVERHEAD_BYTES


def proto_params(label: str) -> dict[str, Any]:
    """A contender's scenario parameters: ``tcp-bbr`` is proto tcp with cc bbr."""
    if label.startswith("tcp-"):
        return {"proto": "tcp", "cc": label[4:]}
    return {"proto": label}


def _label_of(doc: dict[str, Any]) -> str:
    p = doc["params"]
    return f"tcp-{p['cc']}" if p["proto"] == "tcp" and p.get("cc") else p["proto"]


def wire_rate_bps(doc: dict[str, Any]) -> float | None:
    """The rate the sender put on the wire, every datagram or segment with its headers as a NIC counts
    it: for the paced senders the line rate until their last new packet (verdict.paced_rate_bps, the
    rate §2 item 1 presets); for kernel TCP its payload bytes sent (retransmissions included, from
    tcp_info) plus :data:`TCP_SEGMENT_OVERHEAD` per segment, over the transfer. None: not measured."""
    res = doc["result"]
    c = res.get("sender") or {}
    if doc["params"]["proto"] != "tcp":
        return paced_rate_bps(c)
    sent, segs, secs = c.get("bytes_sent"), c.get("data_segs_out"), res.get("seconds")
    if sent is None or segs is None or not secs:
        return None  # the simulator's TCP model, or a kernel without these tcp_info fields
    return float((sent + segs * TCP_SEGMENT_OVERHEAD) * 8 / secs)


def _row(doc: dict[str, Any], section: str, rtt_ms: float) -> dict[str, Any]:
    res = doc["result"]
    c = res.get("sender") or {}
    p = doc["params"]
    wire = wire_rate_bps(doc)
    preset = p["rate_bps"] / 1e6 if p["proto"] != "tcp" and p.get("rate_bps") else None
    row: dict[str, Any] = {"section": section, "rtt_ms": rtt_ms, "t_ms": p["t_ms"],
                           "impair": doc.get("impair", "loss"), "loss": doc["loss"], "proto": _label_of(doc),
                           "ok": res["ok"], "valid": doc.get("valid", True), "seconds": res["seconds"],
                           "goodput_mbps": (res["goodput_bps"] or 0.0) / 1e6, "preset_mbps": preset,
                           "wire_mbps": None if wire is None else wire / 1e6,
                           "wire_of_preset": wire / 1e6 / preset if wire is not None and preset else None}
    if p["proto"] == "tcp":
        row["retx"] = c.get("retransmits", c.get("total_retrans", 0)) or 0
    else:  # .get: a transfer that failed may have no counters to report
        row.update(retx=c.get("retx_sent"), probes=c.get("probes_sent"), timeouts=c.get("timeouts", 0),
                   sent_per_needed=c["sent"] / c["packets"] if c.get("packets") else None, acks=c.get("acks_rx"))
    if not row["valid"]:  # not a result: no number of it is counted
        row.update(seconds=None, goodput_mbps=None, wire_mbps=None, wire_of_preset=None)
    return row


def _label(doc: dict[str, Any], section: str) -> str:
    p = doc["params"]
    where = f"{doc.get('impair', 'loss')} {doc['loss']:g}, {_label_of(doc)}"
    return f"{section} {where}" + (f" round {doc['round']}" if "round" in doc else f", T {p['t_ms']:g} ms")


def invalid_rows(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every transfer that is not a result (netstack/tcsack/verdict.py), with its reasons."""
    return [{"row": _label(d, d["runtime"]), "reasons": Validity.of(d).reasons or ["the run says it is invalid"]}
            for d in docs if not d.get("valid", True)]


def live_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One live (loss, protocol) row: medians over the rounds whose transfer is valid; no numbers
    (None) when none is."""
    valid = [d for d in runs if d.get("valid", True)]
    row = _row(valid[0] if valid else runs[0], "live", 2 * DELAY_NS / 1e6)
    row.update(rounds=len(runs), rounds_valid=len(valid), valid=bool(valid))
    if not valid:
        for key in ("retx", "probes", "timeouts", "sent_per_needed", "acks", "wire_mbps", "wire_of_preset"):
            if key in row:
                row[key] = None
        return row
    row["seconds"] = statistics.median(d["result"]["seconds"] for d in valid)
    row["goodput_mbps"] = statistics.median(d["result"]["goodput_bps"] for d in valid) / 1e6
    per = [_row(d, "live", 0) for d in valid]
    for key in ("retx", "probes", "timeouts", "sent_per_needed", "wire_mbps", "wire_of_preset"):
        vals = [x[key] for x in per if x.get(key) is not None]
        if key in row:
            row[key] = statistics.median(vals) if vals else None
    return row


def ratios(rows: list[dict[str, Any]]) -> None:
    """``of_lossless`` (goodput over the same protocol's lossless goodput, same section and RTT) and
    ``vs_gbn`` (T/C-SACK's over go-back-N's at the same loss): None where either side has no valid
    number."""
    def key(r: dict[str, Any], *extra: Any) -> tuple[Any, ...]:
        return (r["section"], r["rtt_ms"], *extra)

    lossless = {key(r, r["proto"]): r["goodput_mbps"] for r in rows if r["loss"] == 0}
    gbn = {key(r, r.get("impair"), r["loss"]): r["goodput_mbps"] for r in rows if r["proto"] == "gbn"}
    for r in rows:
        g, b = r["goodput_mbps"], lossless.get(key(r, r["proto"]))
        r["of_lossless"] = g / b if g is not None and b else None
        if r["proto"] == "tcsack":
            b = gbn.get(key(r, r.get("impair"), r["loss"]))
            r["vs_gbn"] = g / b if g is not None and b else None


#: the correctness cross-check: a transport that says it delivered everything delivered exactly that
INTEGRITY = "every transfer that completed delivered exactly the bytes sent (count and SHA-256)"


def integrity_check(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """:data:`INTEGRITY` over every transfer: a completed one whose bytes differ is a protocol bug,
    not a starved machine (an incomplete one is an invalid run, no more)."""
    bad = []
    for d in docs:
        ok = {c["name"]: c["ok"] for c in d.get("checks") or ()}
        if ok.get("transfer completed") and ok.get("bytes delivered intact") is False:
            bad.append(_label(d, d["runtime"]))
    return {"what": INTEGRITY, "ok": not bad, "failed": bad}


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
        doc["loss"], doc["impair"] = loss, "loss"
        rows.append(_row(doc, "sim", rtt_ms))
    return rows, docs


# ---------------------------------------------------------------------------------- live
def live_impairments() -> list[tuple[str, float]]:
    """The live section's paths: (``loss`` or ``corrupt``, rate), both directions of sw1 = sw2."""
    return [("loss", x) for x in LOSSES] + [("corrupt", x) for x in CORRUPTS]


def kernel_cc() -> dict[str, Any]:
    """Which of the kernel TCP contenders this kernel has (``tcp_available_congestion_control``): a
    missing one (BBR is a module some kernels lack) is said, never stood in for by another."""
    avail = available_cc()
    wanted = [p[4:] for p in PROTOS if p.startswith("tcp-")]
    return {"available": avail, "missing": [cc for cc in wanted if cc not in avail]}


def run_live(rounds: int, say: Progress) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    from .. import runtime

    missing = kernel_cc()["missing"]
    for cc in missing:
        say(f"live: kernel TCP {cc}: NOT AVAILABLE on this kernel (net.ipv4.tcp_available_congestion_control: "
            f"{' '.join(available_cc()) or 'unreadable'}); its rows are left out")
    protos = [p for p in PROTOS if not (p.startswith("tcp-") and p[4:] in missing)]
    rows, docs = [], []
    for impair, rate in live_impairments():
        topo = topology_from_dict(path_topology(one_way_ns=DELAY_NS, loss=rate if impair == "loss" else 0.0,
                                                corrupt=rate if impair == "corrupt" else 0.0), "<bench tcsack path>")
        prefix = f"btc{secrets.token_hex(3)}"
        say(f"live: {impair} {rate:g}: bringing up the path (prefix {prefix}), {DELAY_NS / 1e6:g} ms each way on "
            "sw1-sw2")
        state = runtime.up(topo, prefix)
        try:
            for proto in protos:
                runs = [_live_transfer(topo, state, prefix, proto, (impair, rate), r, rounds, say)
                        for r in range(rounds)]
                docs += runs
                rows.append(live_row(runs))
        finally:
            runtime.down(prefix)
    return rows, docs


def _live_transfer(topo: Any, state: RunState, prefix: str, proto: str, impair: tuple[str, float], r: int,
                   rounds: int, say: Progress) -> dict[str, Any]:
    """One live transfer as a run document (``valid``/``checks`` from netstack/tcsack/verdict.py)."""
    sc = get("tcsack-transfer")
    ctx = Context(topo, r + 1, None, sc.check_params(
        {**proto_params(proto), "bytes": LIVE_BYTES, "rate_bps": RATE, "t_ms": T_NS / 1e6, "n": N,
         "payload": PAYLOAD}), prefix, say)
    t0 = time.perf_counter()
    res = transfer_live(ctx, state=state)
    doc = document(sc, "live", ctx, res, {"wall_s": round(time.perf_counter() - t0, 3)})
    doc["impair"], doc["loss"], doc["round"] = impair[0], impair[1], r + 1
    verdict = "valid" if doc["valid"] else "INVALID (not counted): " + "; ".join(Validity.of(doc).reasons)
    wire = wire_rate_bps(doc)
    c = res.get("sender") or {}
    extra = f", wire {wire / 1e6:.1f} Mbit/s" if wire is not None else ""
    extra += f", {c['probes_sent']} probes" if c.get("probes_sent") is not None else ""
    say(f"live: {impair[0]} {impair[1]:g}, {proto} round {r + 1}/{rounds}: "
        f"{(res['goodput_bps'] or 0) / 1e6:.1f} Mbit/s goodput in {res['seconds'] or 0:.2f} s{extra}; {verdict}")
    return doc


# ---------------------------------------------------------------------------------- output
def _table(rows: list[dict[str, Any]]) -> str:
    def num(v: float | None, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    out = []
    for r in rows:
        counted = f"{r['rounds_valid']}/{r['rounds']}" if "rounds" in r else ("yes" if r["valid"] else "INVALID")
        lossless, gbn = r["of_lossless"], r.get("vs_gbn")
        out.append([r["section"], f"{r['rtt_ms']:g}", f"{r['t_ms']:g}", f"{r.get('impair', 'loss')} {r['loss']:g}",
                    r["proto"], num(r.get("preset_mbps"), "g"), num(r.get("wire_mbps"), ".1f"),
                    "-" if r.get("wire_of_preset") is None else f"{100 * r['wire_of_preset']:.1f} %",
                    num(r["goodput_mbps"], ".1f"), "-" if lossless is None else f"{100 * lossless:.0f} %",
                    "-" if gbn is None else f"{gbn:.2f}x", num(r["seconds"], ".3f"), _cell(r.get("retx")),
                    _cell(r.get("probes")), _cell(r.get("timeouts")), num(r.get("sent_per_needed"), ".3f"), counted])
    return format_table(["section", "RTT ms", "T ms", "impairment (each way)", "proto", "preset Mbit/s",
                         "wire Mbit/s", "wire / preset", "goodput Mbit/s",
                         "of own lossless", "vs go-back-N", "completion s", "resent pkts", "2T probes", "timeouts",
                         "sent / needed", "valid (rounds)"], out)


def _cell(v: Any) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def invalid_lines(invalid: list[dict[str, Any]]) -> list[str]:
    if not invalid:
        return []
    return ["## Invalid transfers (not counted)", "",
            "Transfers that did not happen as planned (netstack/tcsack/verdict.py: incomplete, the sender "
            "behind its preset rate, a process that waited for the CPU longer than T). They are left out of "
            "every median, ratio and the plot above.", "",
            *[f"- {r['row']}: {'; '.join(r['reasons'])}" for r in invalid], ""]


def _plot(rows: list[dict[str, Any]], path: Path) -> bool:
    plt = pyplot()
    if plt is None:
        return False
    groups = sorted({(r["section"], r["rtt_ms"]) for r in rows})
    fig, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
    for ax, (section, rtt) in zip(axes[0], groups, strict=True):
        for proto, style in (("tcsack", "o-"), ("gbn", "s--"), ("tcp", "^:"), ("tcp-cubic", "^:"),
                             ("tcp-bbr", "v-.")):
            pts = [r for r in rows if r["section"] == section and r["rtt_ms"] == rtt and r["proto"] == proto
                   and r.get("impair", "loss") == "loss"  # (corruption rows are in the table)
                   and r["goodput_mbps"] is not None]  # no point of an invalid row
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


def _run_sections(sections: list[str], rounds: int, workers: int | None,
                  say: Progress) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, str]]:
    """(rows, run documents, errors) of the sections; a live failure is recorded, the sim rows stand."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
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
    return rows, runs, errors


def preset_held(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 33's criterion, per live configuration: the wire rate of every valid T/C-SACK transfer
    beside its preset (within :data:`HOLD_TOLERANCE`?), and the 2T probes each sent (a lossless
    transfer on a quiet machine should send none)."""
    out: dict[tuple[str, float], dict[str, Any]] = {}
    for d in runs:
        if d.get("runtime") != "live" or d["params"]["proto"] != "tcsack":
            continue
        k = (d.get("impair", "loss"), d["loss"])
        e = out.setdefault(k, {"impair": k[0], "rate": k[1], "preset_mbps": d["params"].get("rate_bps", RATE) / 1e6,
                               "wire_mbps": [], "probes": [], "rounds": 0, "rounds_valid": 0,
                               "invalid_wire_mbps": [], "invalid_probes": []})
        e["rounds"] += 1
        wire = wire_rate_bps(d)
        probes = (d["result"].get("sender") or {}).get("probes_sent")
        if not d.get("valid", True):  # kept apart, for what a starved machine did: never counted
            e["invalid_wire_mbps"].append(None if wire is None else round(wire / 1e6, 3))
            e["invalid_probes"].append(probes)
            continue
        e["rounds_valid"] += 1
        e["wire_mbps"].append(None if wire is None else round(wire / 1e6, 3))
        e["probes"].append(probes)
    for e in out.values():
        got = [w for w in e["wire_mbps"] if w is not None]
        e["held"] = bool(got) and all(abs(w / e["preset_mbps"] - 1) <= HOLD_TOLERANCE for w in got)
    return list(out.values())


def held_lines(held: list[dict[str, Any]], cc: dict[str, Any] | None) -> list[str]:
    lines = []
    if held:
        lines += ["## T/C-SACK's achieved wire rate vs its preset (issue 33)", "",
                  f"Every valid live round's wire rate (line rate until the last new packet, headers included) "
                  f"beside the preset; held = within {HOLD_TOLERANCE:.0%} in every valid round. 2T probes per "
                  "round (a lossless transfer on a quiet machine should send none).", ""]
        def nums(xs: list[Any], fmt: str) -> str:
            return ", ".join("-" if x is None else format(x, fmt) for x in xs)

        for e in held:
            if e["rounds_valid"]:
                said = (f"wire {nums(e['wire_mbps'], '.1f')} Mbit/s, {'held' if e['held'] else 'NOT HELD'}; "
                        f"2T probes {nums(e['probes'], 'd')}")
            else:
                said = "no valid round: not measured"
            if e["invalid_wire_mbps"]:
                said += (f" (invalid rounds, not counted: wire {nums(e['invalid_wire_mbps'], '.1f')} Mbit/s, "
                         f"probes {nums(e['invalid_probes'], 'd')})")
            lines.append(f"- {e['impair']} {e['rate']:g} each way, preset {e['preset_mbps']:g} Mbit/s, "
                         f"{e['rounds_valid']}/{e['rounds']} rounds valid: {said}")
        lines.append("")
    if cc is not None:
        lines.append(f"Kernel TCP congestion controls available: {' '.join(cc['available']) or 'unknown'}"
                     + (f"; NOT AVAILABLE on this kernel (rows left out): {', '.join(cc['missing'])}"
                        if cc["missing"] else ""))
        lines.append("")
    return lines


def verdicts(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """``valid``, ``checks`` (each invalid transfer a failed check), ``invalid_rows`` and
    ``cross_checks``: what ``netstack bench`` ends with (netstack/bench/summary.py)."""
    invalid = invalid_rows(runs)
    cross = integrity_check(runs) if runs else None
    return {"valid": not invalid,
            "checks": [{"name": r["row"], "expected": "a valid transfer", "measured": "; ".join(r["reasons"]),
                        "ok": False} for r in invalid],
            "invalid_rows": invalid, "cross_checks": [cross] if cross else []}


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
    live_runs = len(live_impairments()) * len(PROTOS) * rounds
    say(f"netstack bench tcsack: sections {', '.join(sections)}; live: {live_runs} transfers of "
        f"{LIVE_BYTES / 1e6:g} MB (~{live_runs * 2.5 / 60 + len(live_impairments()) * 0.05:.1f} min); sim: "
        f"{len(SIM_RTTS_MS) * len(SIM_LOSSES) * len(SIM_PROTOS)} transfers")
    say(f"scale: links 100 Mbit/s (a WAN RDMA path's 100 Gbit/s / 1000); paced senders at {RATE / 1e6:g} Mbit/s, "
        f"{PAYLOAD} B payloads, N = {N}; delays kept in milliseconds, so the bandwidth-delay product in "
        "packets is ~1000x smaller than the WAN's, which understates what go-back-N resends per loss")
    payload: dict[str, Any] = {"sections": sections, "loadavg_before": loadavg(), "rate_bps": RATE,
                               "payload": PAYLOAD, "n": N, "t_ns": T_NS, "delay_ns": DELAY_NS, "rounds": rounds,
                               "time_scale": 1000.0}
    started = time.monotonic()
    with sigterm_unwinds():
        rows, runs, errors = _run_sections(sections, rounds, workers, say)
    ratios(rows)
    cc = kernel_cc() if "live" in sections else None
    payload.update(rows=rows, runs=runs, errors=errors, wall_s=time.monotonic() - started, loadavg_after=loadavg(),
                   preset_held=preset_held(runs), kernel_cc=cc, **verdicts(runs))
    table = _table(rows)
    results_dir.mkdir(parents=True, exist_ok=True)
    png = results_dir / "bench-tcsack-latest.png"
    if rows and _plot(rows, png):
        payload["plot"] = str(png)
    path = write_results(results_dir, "bench-tcsack", payload)
    md = ["# netstack bench tcsack", "",
          "T/C-SACK (draft-chen-tsvwg-updated-ack-00) vs go-back-N (RoCE RC) and TCP (live: the kernel's, "
          "CUBIC and BBR on the same path in the same run; sim: the simulator's Reno model).", "", table, "",
          *held_lines(payload["preset_held"], cc), *invalid_lines(payload["invalid_rows"])]
    (results_dir / "bench-tcsack-latest.md").write_text("\n".join(md))
    print("\n".join(md[4:]))
    print(f"\nresults: {path}" + (f"; plot: {png}" if "plot" in payload else ""))
    if errors:
        print(f"errors: {errors}", file=sys.stderr)
        return 1
    return 0
