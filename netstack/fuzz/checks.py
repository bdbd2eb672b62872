"""The checks after a campaign (docs/faults.md "Fuzzing campaign"): counter snapshots read once the
run is quiet, the accounting of each fuzzed port (wire, daemon, fate, conservation), and every
daemon alive; each check is one row, ``{where, check, detail, ok}``."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar

from .. import runtime
from ..io.control import ControlError, request
from ..runtime import RunState
from .frames import KERNEL_VLAN_SHORT, Injector
from .ports import Link, iface_stats

SETTLE_MAX_S = 8.0


def snapshot(state: RunState, links: list[Link]) -> dict[str, Any]:
    """Every switch daemon's status and the kernel counters of both ends of each fuzzed link."""
    st = runtime.status(state.prefix)["daemons"]
    kernel = {}
    for link in links:
        kernel[f"{link.node}/{link.ifname}"] = iface_stats(link.ns, link.ifname)
        kernel[f"{link.far_node}/{link.far_ifname}"] = iface_stats(link.far_ns, link.far_ifname)
    return {"daemons": st, "kernel": kernel}


def _fingerprint(snap: dict[str, Any]) -> Any:
    ports = {name: {p: (c.get("rx_frames"), c.get("tx_frames"), c.get("kernel_drops"))
                    for p, c in d.get("ports", {}).items()} for name, d in snap["daemons"].items()}
    return ports, snap["kernel"]


#: reads this far apart: longer than the daemons' kernel-statistics interval (1 s), so that
#: ``kernel_drops`` is up to date when two agree
STILL_S = 1.1

T = TypeVar("T")


def until_still(read: Callable[[], T], fingerprint: Callable[[T], Any],
                timeout: float = SETTLE_MAX_S) -> tuple[T, bool]:
    """``read()`` once two reads in a row, :data:`STILL_S` apart, agree by ``fingerprint``:
    nothing in flight, ``kernel_drops`` up to date; ``(read, True)``, or the last read and False
    after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    snap = read()
    while True:
        time.sleep(STILL_S)
        again = read()
        if fingerprint(again) == fingerprint(snap):
            return again, True
        snap = again
        if time.monotonic() > deadline:
            return snap, False


def settled(state: RunState, links: list[Link], timeout: float = SETTLE_MAX_S) -> tuple[dict[str, Any], bool]:
    """A snapshot of every switch daemon and the fuzzed links' kernel counters, once still
    (:func:`until_still`)."""
    return until_still(lambda: snapshot(state, links), _fingerprint, timeout)


def _port(snap: dict[str, Any], node: str, ifname: str) -> dict[str, Any]:
    return dict(snap["daemons"][node]["ports"][ifname])


def _delta(before: dict[str, Any], after: dict[str, Any], node: str, ifname: str, key: str) -> int:
    a = _port(after, node, ifname)[key]
    b = _port(before, node, ifname)[key]
    if isinstance(a, list):
        return sum(a) - sum(b)
    return int(a) - int(b)


#: counters an ingress frame ends in before forwarding (netstack/switch/core.py)
DISPOSITIONS = ("fcs_errors", "malformed", "edge_drops_pfc", "mac_control_rx", "edge_drops_switch_only",
                "edge_drops_spoofed", "feature_consumed", "mac_control_dropped", "filtered")


#: what a switch port sends of its own accord as MAC control (its PFC frames)
PFC_SENT = ("pauses_tx", "resumes_tx", "pause_refreshes_tx")


def account(inj: list[Injector], before: dict[str, Any], after: dict[str, Any],
            featureless: Callable[[str, str], bool]) -> list[dict[str, Any]]:
    """The accounting checks of each fuzzed port (module docstring); one row per check."""
    rows: list[dict[str, Any]] = []
    by_link: dict[str, list[Injector]] = {}
    for i in inj:
        by_link.setdefault(f"{i.link.node}/{i.link.ifname}", []).append(i)
    for key, group in by_link.items():
        link = group[0].link
        n, p = link.node, link.ifname
        d = {k: _delta(before, after, n, p, k) for k in ("rx_frames", "kernel_drops", *DISPOSITIONS)}
        kb, ka = before["kernel"], after["kernel"]
        far = f"{link.far_node}/{link.far_ifname}"
        t_k = ka[far]["tx_packets"] - kb[far]["tx_packets"]
        r_k = ka[key]["rx_packets"] - kb[key]["rx_packets"]
        veth = ka[far]["tx_dropped"] - kb[far]["tx_dropped"]
        k = d["kernel_drops"]
        sent = sum(i.sent for i in group)
        rows.append(row(key, "wire", f"far end sent {t_k} (injected {sent} + its own {t_k - sent}) = "
                         f"port received {r_k} + veth drops {veth}", t_k == r_k + veth and t_k >= sent))
        fates: Counter[str] = Counter()
        for i in group:
            fates.update(i.fate)
        short = fates[KERNEL_VLAN_SHORT]
        rows.append(row(key, "daemon", f"port received {r_k} = rx_frames {d['rx_frames']} + kernel_drops {k} + "
                         f"short 802.1Q frames the kernel dropped before any socket {short}",
                         r_k == d["rx_frames"] + k + short))
        peer_pfc = 0
        if link.far_node in after["daemons"] and "ports" in after["daemons"][link.far_node]:
            peer_pfc = sum(_delta(before, after, link.far_node, link.far_ifname, c) for c in PFC_SENT)
        for counter in ("fcs_errors", "edge_drops_pfc", "edge_drops_switch_only", "edge_drops_spoofed",
                        "mac_control_rx"):
            want = fates[counter] + (peer_pfc if counter == "mac_control_rx" else 0)
            got = d[counter]
            ok = want - k <= got <= want
            rows.append(row(key, counter, f"{got} counted, {want} expected"
                             + (f" ({fates[counter]} injected + {peer_pfc} PFC from {link.far_node})"
                                if counter == "mac_control_rx" and peer_pfc else "")
                             + (f" (within kernel_drops {k})" if k else ""), ok))
        other = _other_port(after, n, p)
        if other is not None and featureless(n, other):
            fwd = sum(_delta(before, after, n, other, c) for c in ("tx_frames_class", "queue_drops", "mtu_drops"))
            total = sum(d[c] for c in DISPOSITIONS) + fwd
            rows.append(row(key, "conservation", f"rx_frames {d['rx_frames']} = drops and consumed "
                             f"{total - fwd} + forwarded out of {other} {fwd}", d["rx_frames"] == total))
    return rows


def _other_port(snap: dict[str, Any], node: str, ifname: str) -> str | None:
    ports = list(snap["daemons"][node]["ports"])
    return next(p for p in ports if p != ifname) if len(ports) == 2 else None


def row(where: str, check: str, detail: str, ok: bool) -> dict[str, Any]:
    return {"where": where, "check": check, "detail": detail, "ok": bool(ok)}


def liveness(state: RunState) -> list[dict[str, Any]]:
    """Every daemon of the run alive and answering ``ping``; switches without internal errors."""
    rows = []
    for dmn in runtime.daemons_of(state):
        alive = dmn.alive()
        answer = "no control socket"
        if dmn.control:
            try:
                answer = str(request(dmn.control, "ping", timeout=2.0))
            except (OSError, ControlError, ValueError) as exc:
                answer = f"no answer ({exc})"
        ok = alive and (not dmn.control or answer == "pong")
        rows.append(row(dmn.key, "alive", f"pid {dmn.pid} {'alive' if alive else 'GONE'}, ping: {answer}", ok))
        if dmn.kind == "switch" and dmn.control and ok:
            errors = request(dmn.control, "status", timeout=2.0).get("internal_errors")
            rows.append(row(dmn.key, "internal_errors", f"{errors}", errors == 0))
        elif dmn.kind == "onepipe-controller" and dmn.control and ok:
            shell = request(dmn.control, "status", timeout=2.0).get("shell") or {}
            errors = shell.get("internal_errors")
            rows.append(row(dmn.key, "internal_errors", f"{errors}", errors == 0))
    return rows
