"""``netstack lg``: turn LinkGuardian on and off on a running link, and watch it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import CommandError
from .common import acts_on_testbed, add_json, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lg", help="LinkGuardian on a link: enable, disable, status",
                       description="Link-local retransmission between two switches (LinkGuardian paper). The sending "
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
                   help="the recirculation port the reordering buffer cycles through (LinkGuardian §3.3): 'link' "
                        "(default: as fast as the protected link, as on Tofino at 100G), a rate such as "
                        "400Mbit, or 'instant' (held frames leave the moment they are next, at no cost)")
    e.add_argument("--recirc-order", choices=["seq", "fifo"], default="seq",
                   help="where a frame that starts waiting joins the recirculating buffer: seq (default: in "
                        "sequence order, so it drains at the port's rate) or fifo (at the queue's tail; at a "
                        "steady rate below the port's the held frames end up scrambled: docs/linkguardian.md)")
    e.add_argument("--direction", help="sending switch first: A:B (default: the link's a:b)")
    e.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    add_json(e, "both ends' settings")
    e.set_defaults(func=cmd_enable)
    d = lsub.add_parser("disable", help="turn protection off (sender first; buffered frames are released)")
    d.add_argument("link")
    d.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    add_json(d, "the ends turned off")
    d.set_defaults(func=cmd_disable)
    s = lsub.add_parser("status", help="Tx/Rx buffer occupancy, loss notifications, retransmissions, timeouts")
    s.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_status)
    acts_on_testbed(e, d, s)


def recirc_rate(text: str | None) -> int | None:
    """``--recirc-rate``: 'link' (or nothing) -> None (the link's rate), 'instant' -> 0, else a rate."""
    from ..linkguardian.params import recirc_rate_bps

    try:
        return recirc_rate_bps(text)
    except ValueError as exc:
        raise CommandError(f"--recirc-rate {text!r}: {exc} (or 'instant' / 'link')") from None


def cmd_enable(args: argparse.Namespace) -> int:
    from ..linkguardian.control import enable_link

    try:
        out = enable_link(args.prefix, args.link, mode=args.mode, target=args.target, copies=args.copies,
                          actual=args.actual_loss, backpressure=not args.no_backpressure, direction=args.direction,
                          recirc_rate_bps=recirc_rate(args.recirc_rate), recirc_order=args.recirc_order)
    except ValueError as exc:  # Eq. 2's own checks (params.link_params): a bad --target or loss
        raise CommandError(str(exc)) from None
    if args.json:
        print_json(out)
        return 0
    p = out["params"]
    print(f"LinkGuardian{'NB' if p['mode'] == 'nb' else ''} on {out['link']}: sender {out['sender']}, "
          f"receiver {out['receiver']}; {copies_text(p)}, ackNoTimeout "
          f"{p['ack_no_timeout_ns'] / 1e6:g} ms, pause/resume {p['pause_threshold_bytes']}/"
          f"{p.get('resume_threshold_bytes')} B, backpressure {'on' if p['backpressure'] else 'off'}")
    return 0


def copies_text(p: dict[str, Any]) -> str:
    """``copies N=3 (Eq. 2: target 1e-08, actual loss 0.01)``: the N the sender uses (its
    ``n_copies``), where it came from, and the link's loss only when it is known."""
    n = p.get("n_copies") or p.get("copies")
    if p.get("copies"):
        return f"copies N={n} (given)"
    actual = p.get("actual_loss")
    known = f", actual loss {actual:g}" if isinstance(actual, int | float) else ""
    return f"copies N={n if n is not None else '?'} (Eq. 2: target {p['target_loss']:g}{known})"


def cmd_disable(args: argparse.Namespace) -> int:
    from ..linkguardian.control import disable_link

    done = disable_link(args.prefix, args.link)
    if args.json:
        print_json({"link": args.link, "disabled": done})
        return 0
    print(f"LinkGuardian disabled on {args.link}: {', '.join(done) or 'it was not enabled'}")
    return 0


SENDER_COLS = ["protected_frames", "retransmissions", "loss_notifications_rx", "dummies_sent",
               "tx_buffer_frames", "tx_buffer_max_bytes", "pauses_rx"]
RECEIVER_COLS = ["delivered", "holes_detected", "loss_notifications_sent", "duplicates", "timeouts",
                 "reorder_buffer_frames", "reorder_buffer_max_bytes", "pauses_sent", "resumes_sent"]


def cmd_status(args: argparse.Namespace) -> int:
    from ..bench.common import format_table
    from ..linkguardian.control import status_all

    out = status_all(args.prefix)
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
                    srows.append(row + [c.get(k, "") for k in SENDER_COLS] + [_auth_cell(c, role)])
                else:
                    rrows.append(row + [c.get(k, "") for k in RECEIVER_COLS] + [_auth_cell(c, role)])
    if not srows and not rrows:
        print("LinkGuardian is not enabled on any link ('netstack lg enable LINK')")
        return 0
    if srows:
        print("senders:")
        print(format_table(["port", "state", "mode", *SENDER_COLS, "auth"], srows))
    if rrows:
        print("receivers:")
        print(format_table(["port", "state", "mode", *RECEIVER_COLS, "auth"], rrows))
    return 0


def _auth_cell(c: dict[str, Any], role: str) -> str:
    """Authenticated control (docs/security.md): off, or what was sealed / accepted and refused."""
    if not c.get("auth"):
        return "off"
    if role == "receiver":
        return f"sealed {c.get('auth_sealed', 0)}"
    refused = {k: v for k, v in (c.get("auth_refused") or {}).items() if v}
    return f"ok {c.get('auth_ok', 0)}" + "".join(f", {k} {v}" for k, v in sorted(refused.items()))
