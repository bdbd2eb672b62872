"""The ``tcsack-transfer`` scenario: move bytes from one host to another with T/C-SACK (T/C-SACK draft
§2), the go-back-N baseline or TCP, in virtual time or on the live testbed.

- virtual time (``netstack.sim``): the engines as host apps (``netstack.tcsack.simhosts``) through
  the topology's real switches; ``proto = tcp`` is the simulator's Reno model (``netstack.sim.tcp``);
- live: ``python -m netstack.tcsack send|recv`` in the hosts' namespaces (``tcp`` = kernel TCP, with
  the congestion control ``cc`` names, e.g. ``cubic`` or ``bbr``; empty: the host's default), the
  receiver's SHA-256 checked against the sender's.

Both report ``{"proto", "ok", "seconds", "goodput_bps", "sender": counters, ...}``.
:func:`path_topology` builds the benchmark's path (h1 - sw1 = sw2 - h2, delay and loss on the
switch-to-switch link, both directions) as a topology document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..sim.scenario import Context, Scenario, ScenarioError
from ..sim.scenarios import live_prefix, two_switch_topology
from .control import transfer
from .live import data_for
from .params import TcsParamError, TcsParams

if TYPE_CHECKING:
    from ..runtime import RunState

PARAMS: dict[str, Any] = {"proto": "tcsack", "bytes": 2_000_000, "rate_bps": 80_000_000, "t_ms": 2.0, "n": 16,
                          "payload": 1200, "src": "h1", "dst": "h2", "data_seed": 1, "max_seconds": 60.0,
                          "cc": ""}
PROTOS = ("tcsack", "gbn", "tcp")


def params_of(p: dict[str, Any]) -> TcsParams:
    try:
        return TcsParams(rate_bps=int(p["rate_bps"]), t_ns=int(p["t_ms"] * 1_000_000), n=int(p["n"]),
                         payload=int(p["payload"]))
    except TcsParamError as exc:
        raise ScenarioError(f"scenario tcsack-transfer: {exc}") from None


def _check(p: dict[str, Any]) -> None:
    if p["proto"] not in PROTOS:
        raise ScenarioError(f"scenario tcsack-transfer: proto {p['proto']!r} is not one of {', '.join(PROTOS)}")
    if p["bytes"] < 1:
        raise ScenarioError("scenario tcsack-transfer: bytes must be >= 1")
    if p.get("cc") and p["proto"] != "tcp":
        raise ScenarioError("scenario tcsack-transfer: cc (a kernel TCP congestion control) needs proto tcp")


def transfer_sim(net: Any, ctx: Context) -> dict[str, Any]:
    p = ctx.params
    _check(p)
    data = data_for(int(p["bytes"]), int(p["data_seed"]))
    max_ns = int(p["max_seconds"] * 1e9) if ctx.duration_ns is None else ctx.duration_ns
    if p["proto"] == "tcp":
        from ..sim.tcp import bulk_transfer

        if p.get("cc"):
            raise ScenarioError("scenario tcsack-transfer: cc is the live kernel's; virtual time's TCP is the "
                                "simulator's Reno model (docs/sim.md)")
        res = bulk_transfer(net, p["src"], p["dst"], len(data), max_ns=max_ns)
        out = {"proto": "tcp", "ok": res["ok"], "seconds": (res["done_ns"] or 0) / 1e9,
               "goodput_bps": res["goodput_bps"] or 0.0, "sender": res["sender"], "receiver": res["receiver"]}
        return _sim_validity(p, out, bool(res["ok"]), res["done_ns"] is not None).annotate(out)
    from .simhosts import transfer

    res = transfer(net, p["proto"], params_of(p), data, src=p["src"], dst=p["dst"], max_ns=max_ns)
    out = {"proto": p["proto"], "ok": res["delivered_ok"] and res["done_ns"] is not None,
           "seconds": (res["done_ns"] or 0) / 1e9, "goodput_bps": res["goodput_bps"] or 0.0,
           "sender": res["sender"], "receiver": res["receiver"]}
    return _sim_validity(p, out, res["delivered_ok"], res["done_ns"] is not None).annotate(out)


def _sim_validity(p: dict[str, Any], out: dict[str, Any], intact: bool, done: bool) -> Any:
    """The live transfer's checks on a virtual-time run (netstack/tcsack/verdict.py): nothing can
    starve it; ``intact``: the receiver delivered exactly the data."""
    from .verdict import transfer_validity

    n = int(p["bytes"])
    send = {"done": done, "sha256": "data", "counters": out["sender"]}
    recv = {"complete": intact, "bytes": n if intact else 0, "sha256": "data" if intact else None}
    return transfer_validity(p["proto"], n, send, recv, rate_bps=None if p["proto"] == "tcp" else int(p["rate_bps"]),
                             t_ns=int(p["t_ms"] * 1_000_000), lags=None)


def transfer_live(ctx: Context, state: RunState | None = None) -> dict[str, Any]:
    """On the live testbed: brought up from the topology for this run (or ``state``, one already up)."""
    from .. import runtime

    p = ctx.params
    _check(p)
    params_of(p)
    prefix = None
    if state is None:
        prefix = live_prefix(ctx)
        ctx.progress(f"live: bringing up {ctx.topology.name} under prefix {prefix}")
        state = runtime.up(ctx.topology, prefix)
    try:
        res = transfer(state, p["proto"], int(p["bytes"]), src=p["src"], dst=p["dst"], rate_bps=int(p["rate_bps"]),
                       t_ms=p["t_ms"], n=int(p["n"]), payload=int(p["payload"]), seed=int(p["data_seed"]),
                       timeout=max(30.0, p["max_seconds"] * 1.5), cc=p.get("cc") or None)
    finally:
        if prefix is not None:
            runtime.down(prefix)
    send, recv = res["sender"], res["receiver"]
    return {"proto": p["proto"], "ok": res["ok"], "seconds": send["seconds"], "goodput_bps": send["goodput_bps"],
            "cc": send.get("cc"), "sender": send.get("counters", {}), "receiver": recv.get("counters", {}),
            "sha256_equal": res["ok"],
            "valid": res["valid"], "checks": res["checks"]}


def path_topology(*, rate_bps: int = 100_000_000, one_way_ns: int = 2_000_000, loss: float = 0.0,
                  corrupt: float = 0.0, name: str = "tcsack-path") -> dict[str, Any]:
    """h1 - sw1 = sw2 - h2 at ``rate_bps``, ``one_way_ns`` on sw1 = sw2, i.i.d. ``loss`` and
    ``corrupt`` on both of its directions (data and ACKs alike), host links without delay."""
    core: dict[str, Any] = {"delay": f"{one_way_ns}ns"}
    if loss or corrupt:
        core["impairment"] = {"direction": "both", **({"loss": loss} if loss else {}),
                              **({"corrupt": corrupt} if corrupt else {})}
    return two_switch_topology(core, name=name, prefix="tcp", rate_bps=rate_bps)


SCENARIOS = [
    Scenario("tcsack-transfer", "move bytes src -> dst with T/C-SACK, go-back-N (RoCE RC) or TCP (sim: the Reno "
             "model; live: the kernel's): goodput, resends, probes", PARAMS, run_sim=transfer_sim,
             run_live=transfer_live),
]

__all__ = ["PARAMS", "PROTOS", "SCENARIOS", "params_of", "path_topology", "transfer_live",
           "transfer_sim"]
