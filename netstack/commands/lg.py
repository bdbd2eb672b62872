"""``netstack lg``: turn LinkGuardian on and off on a running link, and watch it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lg", help="LinkGuardian on a link: enable, disable, status",
                       description="Link-local retransmission between two switches (seed 000). The sending "
                                   "switch stamps sequence numbers and keeps copies; the receiving switch detects "
                                   "holes, asks for retransmissions and (blocking mode) restores order.")
    lsub = p.add_subparsers(dest="lg_cmd", metavar="ACTION", required=True)
    e = lsub.add_parser("enable", help="protect a switch-to-switch link",
                        description="Enable LinkGuardian on LINK (receiver first, then sender). The data "
                                    "direction is the link's a>b unless --direction says otherwise.")
    e.add_argument("link", help="switch-to-switch link, e.g. sw1-sw2")
    e.add_argument("--mode", choices=["blocking", "nb"], default="blocking",
                   help="blocking preserves order (LinkGuardian); nb forwards out of order (LinkGuardianNB)")
    e.add_argument("--target", type=float, default=1e-8, help="target effective loss (default: %(default)g)")
    e.add_argument("--copies", type=int, help="retransmitted copies N (default: Eq. 2 from --target and "
                                              "--actual-loss)")
    e.add_argument("--actual-loss", type=float, help="measured corruption loss of the link, for Eq. 2 "
                                                     "(default: from the switches' FCS counters)")
    e.add_argument("--no-backpressure", action="store_true", help="disable the pause/resume backpressure "
                                                                  "(Fig. 9b: the reordering buffer overflows)")
    e.add_argument("--recirc-rate", default="link", metavar="RATE",
                   help="the recirculation port the reordering buffer cycles through (seed 000 §3.3): 'link' "
                        "(default: as fast as the protected link, as on Tofino at 100G), a rate such as "
                        "400Mbit, or 'instant' (held frames leave the moment they are next, at no cost)")
    e.add_argument("--direction", help="sending switch first: A:B (default: the link's a:b)")
    e.add_argument("--prefix", default="ns")
    e.set_defaults(func=cmd_enable)
    d = lsub.add_parser("disable", help="turn protection off (sender first; buffered frames are released)")
    d.add_argument("link")
    d.add_argument("--prefix", default="ns")
    d.set_defaults(func=cmd_disable)
    s = lsub.add_parser("status", help="Tx/Rx buffer occupancy, loss notifications, retransmissions, timeouts")
    s.add_argument("--prefix", default="ns")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)


def _link_ends(state: dict[str, Any], link: str, direction: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    ends = [p for p in state["ports"] if p["link"] == link]
    switches = {d["node"] for d in state["daemons"] if d["kind"] == "switch"}
    if len(ends) != 2:
        raise CommandError(f"no link {link!r}; links: {', '.join(sorted({p['link'] for p in state['ports']}))}")
    if not all(e["node"] in switches for e in ends):
        raise CommandError(f"{link} is not a switch-to-switch link: LinkGuardian runs between two switches")
    a, b = ends
    if direction:
        src, _, dst = direction.replace(">", ":").partition(":")
        if (src, dst) == (b["node"], a["node"]):
            a, b = b, a
        elif (src, dst) != (a["node"], b["node"]):
            raise CommandError(f"--direction {direction!r}: use {a['node']}:{b['node']} or {b['node']}:{a['node']}")
    return a, b


def measured_loss(prefix: str, sender: dict[str, Any], receiver: dict[str, Any]) -> float | None:
    """FCS drops at the receiver over frames the sender put on the link (since the counters
    were last cleared): the link's actual corruption loss, as corruptd sees it."""
    from ..runtime import status

    st = status(prefix)["daemons"]
    try:
        tx = st[sender["node"]]["ports"][sender["ifname"]]["tx_frames"]
        bad = st[receiver["node"]]["ports"][receiver["ifname"]]["fcs_errors"]
    except KeyError:
        return None
    return bad / tx if tx >= 1000 and bad > 0 else None


def recirc_rate(text: str | None) -> int | None:
    """``--recirc-rate``: 'link' (or nothing) -> None (the link's rate), 'instant' -> 0, else a rate."""
    from ..topo.model import TopologyError, parse_rate

    if text == "instant":
        return 0
    if text is None or text == "link":
        return None
    try:
        return parse_rate(text)
    except (TopologyError, ValueError) as exc:
        raise CommandError(f"--recirc-rate {text!r}: {exc} (or 'instant' / 'link')") from None


def lg_params(link_rate_bps: int, mode: str, target: float, copies: int | None, actual: float | None,
              backpressure: bool, recirc_rate_bps: int | None = None) -> dict[str, Any]:
    """Paper parameters (100G, seed 000 §4) scaled to the emulated rate (``linkguardian.link_params``)."""
    from ..linkguardian.params import link_params

    return link_params(link_rate_bps, mode, target, copies, actual, backpressure, recirc_rate_bps)


def enable_link(prefix: str, link: str, *, mode: str = "blocking", target: float = 1e-8, copies: int | None = None,
                actual: float | None = None, backpressure: bool = True, direction: str | None = None,
                recirc_rate_bps: int | None = None) -> dict:
    from ..runtime import control, load_state

    state = load_state(prefix)
    sender, receiver = _link_ends(state, link, direction)
    if copies is None and actual is None:
        actual = measured_loss(prefix, sender, receiver)
    rate = state.get("links", {}).get(link, {}).get("rate_bps") or 100_000_000
    params = lg_params(rate, mode, target, copies, actual, backpressure, recirc_rate_bps)
    r = control(prefix, receiver["node"], "lg_enable", port=receiver["ifname"], role="receiver", params=params)
    s = control(prefix, sender["node"], "lg_enable", port=sender["ifname"], role="sender", params=params)
    return {"link": link, "sender": f"{sender['node']}/{sender['ifname']}",
            "receiver": f"{receiver['node']}/{receiver['ifname']}", "params": s["params"], "receiver_params": r}


def disable_link(prefix: str, link: str) -> list[str]:
    from ..runtime import control, load_state

    state = load_state(prefix)
    a, b = _link_ends(state, link, None)
    done = []
    for end in (a, b):  # whichever is the sender is disabled first by the engine order anyway
        done += [f"{end['node']}/{end['ifname']}:{r}" for r in
                 control(prefix, end["node"], "lg_disable", port=end["ifname"])]
    return done


def cmd_enable(args: argparse.Namespace) -> int:
    from ..io.control import ControlError
    from ..runtime import RuntimeErrorNS

    try:
        out = enable_link(args.prefix, args.link, mode=args.mode, target=args.target, copies=args.copies,
                          actual=args.actual_loss, backpressure=not args.no_backpressure, direction=args.direction,
                          recirc_rate_bps=recirc_rate(args.recirc_rate))
    except (RuntimeErrorNS, ControlError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    p = out["params"]
    print(f"LinkGuardian{'NB' if p['mode'] == 'nb' else ''} on {out['link']}: sender {out['sender']}, "
          f"receiver {out['receiver']}; copies N={p.get('copies') or 'Eq. 2'} "
          f"(target {p['target_loss']:g}, actual {p.get('actual_loss')}), ackNoTimeout "
          f"{p['ack_no_timeout_ns'] / 1e6:g} ms, pause/resume {p['pause_threshold_bytes']}/"
          f"{p.get('resume_threshold_bytes')} B, backpressure {'on' if p['backpressure'] else 'off'}")
    return 0


def cmd_disable(args: argparse.Namespace) -> int:
    from ..io.control import ControlError
    from ..runtime import RuntimeErrorNS

    try:
        done = disable_link(args.prefix, args.link)
    except (RuntimeErrorNS, ControlError) as exc:
        raise CommandError(str(exc)) from None
    print(f"LinkGuardian disabled on {args.link}: {', '.join(done) or 'it was not enabled'}")
    return 0


SENDER_COLS = ["protected_frames", "retransmissions", "loss_notifications_rx", "dummies_sent",
               "tx_buffer_frames", "tx_buffer_max_bytes", "pauses_rx"]
RECEIVER_COLS = ["delivered", "holes_detected", "loss_notifications_sent", "duplicates", "timeouts",
                 "reorder_buffer_frames", "reorder_buffer_max_bytes", "pauses_sent", "resumes_sent"]


def cmd_status(args: argparse.Namespace) -> int:
    from ..bench.common import format_table
    from ..io.control import ControlError
    from ..runtime import RuntimeErrorNS, daemons_of, load_state
    from ..runtime import control as ctl

    try:
        state = load_state(args.prefix)
        out = {d.node: ctl(args.prefix, d.node, "lg_status") for d in daemons_of(state) if d.kind == "switch"}
    except (RuntimeErrorNS, ControlError) as exc:
        raise CommandError(str(exc)) from None
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    srows, rrows = [], []
    for node, ports in out.items():
        for port, roles in ports.items():
            for role, st in roles.items():
                c = st.get("counters", {})
                row = [f"{node}/{port}", "on" if st.get("enabled") else "off", st.get("params", {}).get("mode", "")]
                if role == "sender":
                    srows.append(row + [c.get(k, "") for k in SENDER_COLS])
                else:
                    rrows.append(row + [c.get(k, "") for k in RECEIVER_COLS])
    if not srows and not rrows:
        print("LinkGuardian is not enabled on any link ('netstack lg enable LINK')")
        return 0
    if srows:
        print("senders:")
        print(format_table(["port", "state", "mode", *SENDER_COLS], srows))
    if rrows:
        print("receivers:")
        print(format_table(["port", "state", "mode", *RECEIVER_COLS], rrows))
    return 0
