"""DTA's ``netstack sim`` scenario, ``dta-keywrite``: a reporter host sends Key-Write reports
("Direct Telemetry Access" §6.1) through the collector's ToR, whose translator turns each into N
RDMA WRITEs (§7.2.2) that a simulated collector executes and acknowledges, in virtual time::

    netstack sim default --scenario dta-keywrite --param count=2000 --param redundancy=4

The translator is the one the topology declares for the collector (``[links.features.<end>]
dta``, :mod:`.topology`), with its options; without a declaration it is enabled on the
collector's ToR with ``netstack dta enable``'s defaults (``result.translator_from`` says which).
The same engines as live: :mod:`.simhosts` puts them on ``netstack.sim``'s hosts and switches.

Result: what was sent and what reached the translator (``reports``: a link of the topology may
lose some; the default one corrupts 1e-3 of sw1's frames to sw2), what the collector's memory
reads back (``written``: per key its value, as ``netstack dta query keywrite`` reads it, beside
the analytic ``expected_success`` of Fig. 7 for that many keys), the RDMA traffic (``rdma``:
requests, WRITEs, what the collector executed, ACKs it sent and the translator took, NAKs,
resyncs, window drops, what is still outstanding), and ``ok``: every report that reached the
translator became N WRITEs that the collector executed, nothing refused or dropped there, no
resync. A Key-Write lost to a later key's overwrite is the store's trade-off (Fig. 7), not a
transport loss: ``written`` counts it, ``ok`` does not.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from ..sim.scenario import Context, Scenario, ScenarioError
from ..topo.model import NodeKind
from .counters import TranslatorCounters
from .keywrite import expected_success
from .simhosts import SimReporter, SimTranslator, connect, connect_declared, read_back

PARAMS: dict[str, Any] = {"src": "h1", "collector": "c1", "count": 1000, "rate": 20_000.0, "key": 1, "value": 1000,
                          "redundancy": 2, "settle_ms": 100.0}


def _check(net: Any, p: dict[str, Any]) -> None:
    kinds = {n.name: n.kind for n in net.topology.nodes}
    if kinds.get(p["src"]) is not NodeKind.HOST:
        hosts = [n for n, k in kinds.items() if k is NodeKind.HOST]
        raise ScenarioError(f"scenario dta-keywrite: src {p['src']!r} is not a host (hosts: {', '.join(hosts)})")
    if p["collector"] not in kinds or kinds[p["collector"]].value != "collector":
        cols = [n for n, k in kinds.items() if k.value == "collector"]
        raise ScenarioError(f"scenario dta-keywrite: {p['collector']!r} is not a collector node "
                            f"(collectors: {', '.join(cols) or 'none'})")
    if p["count"] < 0 or p["rate"] < 0 or p["settle_ms"] < 0:
        raise ScenarioError("scenario dta-keywrite: count, rate and settle_ms must be >= 0")
    if not 1 <= p["redundancy"] <= 255:
        raise ScenarioError("scenario dta-keywrite: redundancy must be 1..255 (the store caps it at its maximum)")


def _translator(net: Any, collector: str) -> tuple[SimTranslator, str]:
    """The declared translator for ``collector`` (all the declared ones are connected, as
    ``netstack up`` connects them), else one enabled with the defaults."""
    try:
        declared = connect_declared(net)
        if collector in declared:
            return declared[collector], "topology"
        return connect(net, collector), "scenario"
    except ValueError as exc:
        raise ScenarioError(f"scenario dta-keywrite: {exc}") from None


def keywrite_sim(net: Any, ctx: Context) -> dict[str, Any]:
    p = ctx.params
    _check(net, p)
    tr, origin = _translator(net, p["collector"])
    rep = SimReporter(net.host(p["src"]), p["collector"], count=int(p["count"]), key=int(p["key"]),
                      value=int(p["value"]), redundancy=int(p["redundancy"]), rate=float(p["rate"]))
    send_ns = round(p["count"] / p["rate"] * 1e9) if p["rate"] > 0 else 0
    net.run(until_ns=ctx.duration_ns if ctx.duration_ns is not None else send_ns + round(p["settle_ms"] * 1e6))
    t = tr.translator.counters()
    col = tr.collector.result()
    lay, cap = _keywrite_layout(tr), tr.translator.config.max_redundancy
    # the copies each report made: N capped by the store and the translator (§7.2.2)
    n = min(int(p["redundancy"]), int(lay["max_redundancy"]), cap if cap is not None else 255)
    written: dict[str, Any] = dict(read_back(tr.collector, rep.expected(), n))
    written["expected_success"] = round(expected_success(written["keys"], n, int(lay["slots"])), 4)
    outstanding = sum(q["outstanding"] for q in t["qps"].values())
    rdma = {"requests": t["roce_frames"], "writes": t["writes"], "executed": col["qps"]["keywrite"]["writes"],
            "acks_sent": col["qps"]["keywrite"]["acks"], "acks_taken": t["acks"],
            "naks": t["naks_access"] + t["naks_invalid"] + t["naks_other"] + col["qps"]["keywrite"]["naks_psn"],
            "resyncs": t["resyncs"], "window_dropped": t["window_dropped"], "grace_dropped": t["grace_dropped"],
            "window_timeouts": t["window_timeouts"], "outstanding": outstanding}
    # every report that reached the translator became N WRITEs the collector executed, none refused
    # (a report a link lost on the way is the topology's impairment; the requests after the last
    # AckReq stay outstanding until the next one, by design: requester.py "Output window")
    ok = (rep.sent == p["count"] and rdma["writes"] == t["keywrite"] * n == rdma["executed"]
          and not (rdma["naks"] or rdma["resyncs"] or rdma["window_dropped"] or rdma["grace_dropped"]
                   or t["internal_errors"]))
    reports = {**rep.result(), "reached_translator": t["reports"], "translated": t["keywrite"]}
    return {"ok": ok, "src": p["src"], "collector": p["collector"], "switch": tr.switch, "port": tr.port,
            "translator_from": origin, "window": tr.translator.config.window, "redundancy": n, "reports": reports,
            "written": written, "rdma": rdma,
            "translator": {f.name: t[f.name] for f in fields(TranslatorCounters) if t[f.name]},
            "collector_counters": {k: v for k, v in col.items() if k != "qps" and v}}


def _keywrite_layout(tr: SimTranslator) -> dict[str, Any]:
    region = tr.collector.memory.find("keywrite")
    if region is None:
        raise ScenarioError("scenario dta-keywrite: the collector has no Key-Write store")
    return dict(region.layout)


SCENARIOS = [
    Scenario("dta-keywrite", "DTA Key-Write reports src -> the collector's ToR translator -> RDMA WRITEs a simulated "
             "collector executes: keys read back, requests, ACKs, resyncs (the topology's declared translator, "
             "else one with dta enable's defaults)", PARAMS, run_sim=keywrite_sim),
]

__all__ = ["PARAMS", "SCENARIOS", "keywrite_sim"]
