"""The live cross-check of Fig. 8: one point both ways.

The ``lg-stream`` scenario (tens of thousands of sequenced UDP datagrams h1 -> h2) on
``netstack/topo/examples/lg-testbed.toml`` (nft corrupting 1e-2 of sw1 -> sw2, LG with N = 1),
once live through the switch daemons and once in virtual time with the same file and seed.
Agreement: the two 95 % intervals of the effective loss and of the reordered share overlap, and
``actual^2`` lies inside the live one.
"""

from __future__ import annotations

from typing import Any

from ...sim.scenario import RunSpec
from ...stats import intervals_overlap
from ..output import Progress
from .params import LIVE_COPIES, LIVE_CORRUPT, LIVE_SEED, LIVE_TOPOLOGY, LIVE_UDP_RATE, LIVE_UDP_SIZE, Sizes


def run_live_check(prefix: str, sizes: Sizes, scale: float, say: Progress) -> dict[str, Any]:
    """One Fig. 8 point both ways: the ``lg-stream`` scenario on ``lg-testbed.toml`` (nft corrupting
    1e-2 of sw1 -> sw2, LinkGuardian blocking with N = 1), live through the switch daemons and in
    virtual time with the same file and seed."""
    from ...sim.scenario import run

    params = {"count": sizes.udp_count, "size": LIVE_UDP_SIZE, "rate_pps": float(LIVE_UDP_RATE)}
    n = sizes.udp_count
    say(f"live-check: {n:,} sequenced UDP datagrams h1 -> h2 at {LIVE_UDP_RATE}/s through the switch daemons "
        f"(lg-testbed: {LIVE_CORRUPT:g} corruption on sw1 -> sw2, LG N={LIVE_COPIES}, ~{n / LIVE_UDP_RATE:.0f} s) ...")
    live = run(RunSpec("lg-stream", LIVE_TOPOLOGY, LIVE_SEED, None, params, "live", prefix), progress=say)
    say("live-check: the same topology file, scenario and seed in virtual time ...")
    sim = run(RunSpec("lg-stream", LIVE_TOPOLOGY, LIVE_SEED, None, params, "sim"))
    out: dict[str, Any] = {"nominal_loss": LIVE_CORRUPT, "copies": LIVE_COPIES, "mode": "blocking", "datagrams": n,
                           "rate_pps": LIVE_UDP_RATE, "udp_payload_bytes": LIVE_UDP_SIZE, "scale": scale,
                           "topology": live["topology"], "live": live, "sim": sim}
    for name, doc in (("live", live), ("sim", sim)):
        r = doc["result"]
        actual = r["link"]["actual_loss"]
        eff = r["effective_loss"]
        theory = actual ** (LIVE_COPIES + 1)
        out[name + "_summary"] = {"actual_loss": actual, "effective": eff, "theory": theory,
                                  "theory_in_ci": eff["ci95"][0] <= theory <= eff["ci95"][1],
                                  "reordered": r["reordered"], "duplicates": r["duplicates"],
                                  "holes": r.get("linkguardian", {}).get("receiver", {}).get("holes_detected"),
                                  "timeouts": r.get("linkguardian", {}).get("receiver", {}).get("timeouts")}
    lv, sv = out["live_summary"], out["sim_summary"]
    out["intervals_overlap"] = intervals_overlap(lv["effective"]["ci95"], sv["effective"]["ci95"])
    out["reorder_intervals_overlap"] = intervals_overlap(lv["reordered"]["ci95"], sv["reordered"]["ci95"])
    out["agrees"] = out["intervals_overlap"] and out["reorder_intervals_overlap"] and lv["theory_in_ci"]
    # the fields the tables read
    out.update(actual_loss=lv["actual_loss"], effective=lv["effective"], theory=lv["theory"],
               theory_in_ci=lv["theory_in_ci"], backend=live["result"].get("impairment_backend", "auto (nft here)"))
    say(f"live-check: live {lv['effective']['lost']} of {n:,} lost (actual {lv['actual_loss']:.3e}), virtual "
        f"{sv['effective']['lost']} (actual {sv['actual_loss']:.3e}); agrees: {out['agrees']}")
    return out

