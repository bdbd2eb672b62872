"""The ``fig9a-testbed`` section of ``netstack bench onepipe``: Fig. 9a of "1Pipe: Scalable Total
Order Communication in Data Center Networks" (Li et al., SIGCOMM 2021, §7.1) on a model of the
paper's own testbed, in virtual time.

The paper's testbed: 32 servers on a 3-layer fat tree (4 ToRs, 4 spines, 2 cores, 100 Gbit/s, no
oversubscription);
its Fig. 9a points are idle, at 8, 16, 32 and 512 processes, which sit 1, 3, 5 and 5 hops apart
(8 processes under one ToR, 16 under one pod, 32 and more across the core). Ours:
:func:`netstack.onepipe.scenarios.fat_tree_topology` with the paper's sizes and no oversubscription
(:data:`TESTBED_UPLINK_RATE`), processes placed
``pack`` (filling a ToR, then its pod: the same hop counts), Fig. 9a's idle load, T_beacon 3 us,
PTP's 0.3 us mean skew, and every host's stack (library, PCIe, NIC) ``NIC_NS`` each way
(:data:`netstack.bench.onepipe.spec.NIC_NS`: calibrated so that the unordered latency at one hop
is the paper's 2.2 us; every other hop count, and every barrier wait, is then predicted).

Per P: best effort and reliable 1Pipe on the switch-chip and the host-delegate variants (the
scenario's ``variant``: the paper's BE-chip, R-chip, BE-host, R-host; at Fig. 8b's other P best
effort only, its 1Pipe/chip and 1Pipe/host), and reliable once more with
the commit barrier carried by the hosts' beacons only (``prompt_commit = False``): ours sends it
in a COMMIT as soon as it rises, which saves the beacon interval the paper's commit phase appears
to pay (docs/onepipe-paper.md)."""

from __future__ import annotations

from typing import Any

from ...onepipe.scenarios import SEQ_HOST, fat_tree_topology, place, route_switches
from ...sim.scenario import RunSpec, resolve_topology, time_scale
from .spec import FANOUT, NIC_NS, SEED, SIZE, T_BEACON_NS, Point

#: the fabric links' rate: the paper's testbed "has no oversubscription because our traffic pattern
#: is all-to-all" (§7.1), and our routes take one spine a pod and one core (no ECMP), so each of our
#: fabric links stands for every parallel link of the paper's: an agg's core link carries its pod's
#: 16 hosts, 16 x 100 Gbit/s. At 100 Gbit/s (until commit 20aaab5) a ToR's 8 hosts shared one
#: 100 Gbit/s uplink, 8:1, which an idle run never fills but a loaded one does (measured, reliable,
#: 512 processes at 40 x the idle load, 10 us of load: 99.8 us mean latency, 67.0 of it barrier
#: wait; 11.0 us at 1.6 Tbit/s)
TESTBED_UPLINK_RATE = "1600Gbit"
#: the paper's testbed (its §7.1): 2 pods x 2 ToRs x 8 servers, 2 spines a pod, 2 cores
TESTBED = fat_tree_topology(pods=2, tors_per_pod=2, aggs_per_pod=2, cores=2, hosts_per_tor=8,
                            uplink_rate=TESTBED_UPLINK_RATE, name="onepipe-testbed")
TESTBED_PROCS = (8, 16, 32, 512)
#: more P for Fig. 8b's 1Pipe/chip and 1Pipe/host series, best effort only: the paper's values there
#: are its Fig. 9a idle ones (4.50, 5.67, 7.03, 7.37 us chip and 5.84 ... 15.97 host at 8, 16, 32, 512
#: in both files), so they are compared with idle runs too
TESTBED_8B_PROCS = (2, 4, 64, 128, 256)
TESTBED_RATE = 20_000.0  # Fig. 9a's idle load (netstack.bench.onepipe.sim.FIG9A_RATE)
TESTBED_SKEW_NS = 300.0  # PTP's mean skew on the paper's testbed (§7.1)
#: virtual time per run: 512 processes cost the simulator the most, for as many messages each
TESTBED_DURATION_NS = 500_000
TESTBED_DURATIONS_NS = {512: 200_000}
#: (scenario mode, variant, prompt_commit, the rows' system)
TESTBED_SYSTEMS = (
    ("onepipe", "chip", True, "BE-chip"), ("reliable", "chip", True, "R-chip"),
    ("onepipe", "host", True, "BE-host"), ("reliable", "host", True, "R-host"),
    ("reliable", "chip", False, "R-chip, commit in beacons"),
)
SECTION = "fig9a-testbed"


def testbed_topology(procs: int, full: dict[str, Any] | None = None) -> dict[str, Any]:
    """The testbed as ``procs`` packed processes use it: only the switches on their routes (and
    every host under the ToRs kept). 1Pipe's barrier graph is the routing graph its controller
    holds (the paper's §5.2), and a switch no process's message crosses has no input to wait
    for; kept, it would still be on every barrier's way: a ToR's down barrier is the minimum over
    its uplinks too, so a rack's barrier would go round through the core even for 8 processes
    under one ToR (measured: 16 us for the host-delegate variant at 1, 3 and 5 hops alike, where
    the paper's BE-host is 5.8 us at 1 hop; the paper does not say how its testbed was cabled at
    small P, and its Fig. 9a numbers rise with the hops as this pruning makes ours do)."""
    doc = TESTBED if full is None else full
    topo = resolve_topology(doc)
    used = sorted({h for _, h, _ in place(topo, procs, exclude=[SEQ_HOST], placement="pack")})
    hops: dict[str, dict[str, str]] = {}
    switches = {sw for a in used for b in used for sw in route_switches(topo, a, b, hops)}
    if not switches:  # one host: its ToR
        switches = {route_switches(topo, used[0], SEQ_HOST, hops)[0]} if len(used) == 1 else set()
    hosts = {n["name"] for n in doc["nodes"] if n["kind"] == "host"
             and any(lk[e] == n["name"] and lk["a" if e == "b" else "b"] in switches
                     for lk in doc["links"] for e in ("a", "b"))}
    keep = switches | hosts
    out = {**doc, "topology": {**doc["topology"], "name": f"{doc['topology']['name']}-{len(switches)}sw"},
           "nodes": [n for n in doc["nodes"] if n["name"] in keep],
           "links": [lk for lk in doc["links"] if lk["a"] in keep and lk["b"] in keep]}
    scale, pruned = time_scale(topo), resolve_topology(out)
    if time_scale(pruned) != scale:
        # one ToR: no fabric link left, so the time scale would be the paper's rate over the host
        # links' (16 with fabric links 16 times faster); the whole testbed's scale is the run's
        out["topology"]["paper_rate"] = round(max(lk.rate_bps for lk in pruned.links) * scale)
    return out


def testbed_params(procs: int, rate: float, mode: str, variant: str = "chip", **extra: Any) -> dict[str, Any]:
    """The onepipe scenario's parameters of a run on the testbed model (packed processes, PTP's
    skew, the calibrated host stack), ``variant`` left out when it is the chip's (the default)."""
    params: dict[str, Any] = {"procs": procs, "rate": rate, "fanout": FANOUT, "size": SIZE, "t_beacon_ns": T_BEACON_NS,
                              "skew_ns": TESTBED_SKEW_NS, "mode": mode, "placement": "pack", "nic_ns": NIC_NS, **extra}
    if variant != "chip":
        params["variant"] = variant
    return params


def testbed_points(scale: float) -> list[Point]:
    out = []
    for p in sorted({*TESTBED_PROCS, *TESTBED_8B_PROCS}):
        systems = TESTBED_SYSTEMS if p in TESTBED_PROCS else [s for s in TESTBED_SYSTEMS if s[0] == "onepipe"]
        dur = max(1, round(TESTBED_DURATIONS_NS.get(p, TESTBED_DURATION_NS) * scale))
        topo = testbed_topology(p)
        for mode, variant, prompt, system in systems:
            params = testbed_params(p, TESTBED_RATE, mode, variant, **({} if prompt else {"prompt_commit": False}))
            out.append(Point(SECTION, RunSpec("onepipe", topo, SEED, dur, params),
                             {"procs": p, "system": system, "variant": variant, "mode": mode,
                              "commit": "prompt" if prompt else "beacons",
                              "switches": sum(n["kind"] == "switch" for n in topo["nodes"])}))
    return out


def _us(v: float | None) -> float | None:
    return None if v is None else v / 1e3


def testbed_rows(doc: dict[str, Any], meta: dict[str, Any]) -> list[dict[str, Any]]:
    res = doc["result"]
    lat, un = res["latency_ns"], res["unordered_ns"]
    return [{**meta, "hops": res.get("max_switch_hops"), "mean_us": _us(lat["mean"]), "p50_us": _us(lat["p50"]),
             "p99_us": _us(lat["p99"]), "unordered_mean_us": _us(un["mean"]),
             "barrier_wait_mean_us": _us(res["barrier_wait_ns"]["mean"]), "delivered": res["delivered"],
             "sent": res["sent"], "order_ok": res["order"]["ok"], "nic_ns": res.get("nic_ns", 0)}]


def testbed_table(rows: list[dict[str, Any]]) -> str:
    from ..output import format_table

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}"

    return format_table(["P", "switches", "hops", "system", "mean us", "p99 us", "unordered us", "barrier wait us",
                         "delivered", "order"],
                        [[r["procs"], r.get("switches"), r["hops"], r["system"], f(r["mean_us"]), f(r["p99_us"]),
                          f(r["unordered_mean_us"]), f(r["barrier_wait_mean_us"]), f"{r['delivered']}/{r['sent']}",
                          "ok" if r["order_ok"] else "BROKEN"] for r in rows])


__all__ = ["SECTION", "TESTBED", "TESTBED_8B_PROCS", "TESTBED_PROCS", "TESTBED_SYSTEMS", "testbed_params",
           "testbed_points", "testbed_rows", "testbed_table", "testbed_topology"]
