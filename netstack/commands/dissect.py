"""``netstack dissect``: show what a frame carries, with the fast codecs and with Scapy."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import CommandError

#: destination MAC, source MAC, EtherType: the least Scapy's Ether layer can dissect
ETHER_HEADER = 14


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
    try:
        text = sys.stdin.read() if args.hex == "-" else args.hex
    except UnicodeDecodeError:  # binary on a strict UTF-8 stdin: certainly not hex
        raise CommandError("the frame is not valid hex") from None
    cleaned = "".join(ch for ch in text if ch not in " :\n\t\r")
    try:
        return [bytes.fromhex(cleaned)]
    except ValueError:
        raise CommandError("the frame is not valid hex") from None


def run(args: argparse.Namespace) -> int:
    from headers.errors import HeaderError
    from headers.fcs import strip_fcs
    from headers.frame import describe, dissect

    from ..progress import Reporter

    rep = Reporter("dissect")
    status = 0
    bad = frames = 0
    for n, frame in enumerate(_frames(args)):
        frames = n + 1
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
                bad += 1
                continue
        if len(frame) < ETHER_HEADER and not args.no_scapy:
            # Scapy's Ether raises struct.error on it; the fast codecs (--no-scapy) report it as malformed
            after = " after its FCS" if args.fcs else ""
            raise CommandError(f"frame {n} is {len(frame)} bytes{after}, too short for an Ethernet header "
                               f"({ETHER_HEADER} bytes)")
        records, error = dissect(frame)
        for rec in records:
            print(f"  {describe(rec)}")
        if error is not None:
            print(f"  malformed: {error}")
            status = 1
            bad += 1
        if not args.no_scapy:
            print("  scapy:")
            for line in _scapy_view(n, frame):
                print(f"    {line}")
    if args.pcap:  # a capture can take a while (Scapy's view of each frame); one frame given as hex cannot
        rep.summary(f"{frames} frame(s) of {args.pcap} in {rep.took()}, {bad} with a bad FCS or malformed")
    return status


def _scapy_view(n: int, frame: bytes) -> list[str]:
    """Scapy's dissection of frame ``n``, line by line. No fuzzed frame of 14 bytes or more has
    made it raise, but it is a third party's parser: an error is one line, never a traceback."""
    from scapy.layers.l2 import Ether

    import headers.layers  # noqa: F401  (binds every layer)

    try:
        shown: str = Ether(frame).show(dump=True) or ""
    except Exception as exc:
        raise CommandError(f"frame {n}: Scapy cannot dissect it: {type(exc).__name__}: {exc}") from None
    return shown.splitlines()
