"""``netstack dissect``: show what a frame carries, with the fast codecs and with Scapy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import CommandError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "dissect", help="dissect a frame (hex, hex file or pcap) with the fast codecs and Scapy",
        description="Dissect Ethernet frames carrying netstack headers. Prints the fast-codec records "
                    "(what the daemons see) and Scapy's view (what Wireshark-style tools see).",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("hex", nargs="?", help="the frame as hex (spaces and colons allowed); '-' reads stdin")
    src.add_argument("--pcap", type=Path, help="dissect every frame of a pcap file")
    p.add_argument("--fcs", action="store_true",
                   help="the frame ends with netstack's 4-byte software FCS: check and strip it first")
    p.add_argument("--no-scapy", action="store_true", help="only the fast-codec records")
    p.add_argument("--limit", type=int, default=100, help="at most this many pcap frames (default: %(default)s)")
    p.set_defaults(func=run)


def _frames(args: argparse.Namespace) -> list[bytes]:
    if args.pcap is not None:
        from scapy.utils import rdpcap

        try:
            return [bytes(p) for p in rdpcap(str(args.pcap), count=args.limit)]
        except (OSError, EOFError) as exc:
            raise CommandError(f"cannot read {args.pcap}: {exc}") from None
        except Exception as exc:  # Scapy raises its own Scapy_Exception for non-pcap files
            raise CommandError(f"{args.pcap} is not a pcap file: {exc}") from None
    text = sys.stdin.read() if args.hex == "-" else args.hex
    cleaned = "".join(ch for ch in text if ch not in " :\n\t\r")
    try:
        return [bytes.fromhex(cleaned)]
    except ValueError:
        raise CommandError("the frame is not valid hex") from None


def run(args: argparse.Namespace) -> int:
    from headers.errors import HeaderError
    from headers.fcs import strip_fcs
    from headers.frame import describe, dissect

    status = 0
    for n, frame in enumerate(_frames(args)):
        if n:
            print()
        print(f"frame {n}: {len(frame)} bytes")
        if args.fcs:
            try:
                frame = strip_fcs(frame)
                print("  software FCS: ok")
            except HeaderError as exc:
                print(f"  software FCS: BAD ({exc})")
                status = 1
                continue
        records, error = dissect(frame)
        for rec in records:
            print(f"  {describe(rec)}")
        if error is not None:
            print(f"  malformed: {error}")
            status = 1
        if not args.no_scapy:
            from scapy.layers.l2 import Ether

            import headers.layers  # noqa: F401  (binds every layer)

            print("  scapy:")
            for line in Ether(frame).show(dump=True).splitlines():
                print(f"    {line}")
    return status
