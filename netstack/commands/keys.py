"""``netstack keys``: create, rotate and inspect the key file that authenticates netstack's frames."""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from ..errors import CommandError
from .common import add_json, print_json

DESCRIPTION = """\
Manage a netstack key file: the shared master secrets from which every node derives the keys
that authenticate LinkGuardian control, DTA reports and 1Pipe barriers (an AES-CMAC trailer with
a replay counter on each frame). A topology names the file with

  [topology]
  keys = "path/to/keys.json"

and every node of the deployment must read the same file. It is JSON, mode 0600 (netstack refuses
a file others can read or change), and holds one current key plus older keys still accepted until
their "not_after" time. Secrets are never printed.

Beside it, "generate" (or the first "netstack up" of a topology with 1Pipe's controller) makes
the 1Pipe controller's signing pair: FILE.controller (Ed25519 private key, mode 0600, for the
controller only) and FILE.controller.pub (for the processes). It does not rotate."""

EPILOG = """\
examples:
  netstack keys generate keys.json                 a new file with one fresh key (refuses to overwrite)
  netstack keys rotate keys.json --overlap 300     a new current key; the old one stays valid 5 more minutes
  netstack keys show keys.json                     ids, creation, expiry, which key is current

After a rotation, give the file to every node before the overlap ends: until then nodes accept
frames under both keys."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keys", help="create, rotate and show the key file that authenticates frames",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ksub = p.add_subparsers(dest="keys_cmd", metavar="ACTION", required=True)
    g = ksub.add_parser("generate", help="write a new key file with one fresh random key (mode 0600)")
    g.add_argument("file", metavar="FILE", help="the key file to create")
    g.add_argument("--force", action="store_true", help="replace an existing file (atomically); its keys are lost")
    add_json(g, "the file and its current key's id")
    g.set_defaults(func=cmd_generate)
    r = ksub.add_parser("rotate", help="add a new current key; the previous one stays valid for --overlap seconds")
    r.add_argument("file", metavar="FILE", help="the key file to rotate (rewritten atomically, mode 0600)")
    r.add_argument("--overlap", type=float, default=60.0, metavar="SECONDS",
                   help="how long the previous key is still accepted (default: %(default)s; >= 0)")
    add_json(r, "the file, its new current key's id and the overlap")
    r.set_defaults(func=cmd_rotate)
    s = ksub.add_parser("show", help="list the keys: id, created, not_after, current, valid now (never secrets)")
    s.add_argument("file", metavar="FILE", help="the key file to show")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=cmd_show)


def cmd_generate(args: argparse.Namespace) -> int:
    from ..auth.keys import generate
    from ..auth.sign import ensure_signing_key, signing_paths

    kid = generate(args.file, force=args.force)
    made = ensure_signing_key(args.file)  # 1Pipe's controller signs with it (netstack/auth/sign.py)
    private, public = signing_paths(args.file)
    if getattr(args, "json", False):
        print_json({"file": args.file, "current": kid, "controller_signing_key": str(private),
                    "controller_public_key": str(public), "signing_key_made": made})
        return 0
    print(f"wrote {args.file}: key {kid} is current (mode 0600; the secret is not shown)")
    print(f"{'wrote' if made else 'kept'} {private} (mode 0600) and {public}: the 1Pipe controller's signing pair")
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    from ..auth.keys import rotate

    overlap = args.overlap
    if not math.isfinite(overlap) or overlap < 0:
        raise CommandError(f"--overlap must be a finite number of seconds >= 0, not {overlap}")
    kid = rotate(args.file, overlap_s=overlap, now=time.time())
    if getattr(args, "json", False):
        print_json({"file": args.file, "current": kid, "overlap_s": overlap})
        return 0
    print(f"rotated {args.file}: key {kid} is current; the previous key is accepted for {overlap:g} s more")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from ..auth.keys import describe, load

    now = time.time()
    ring = load(args.file)
    rows = describe(ring, now)
    if args.json:
        print(json.dumps({"file": args.file, "now": now, "current": ring.current, "keys": rows}, indent=2))
        return 0
    print(_table(rows))
    return 0


def _when(t: Any) -> str:
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(t))


def _table(rows: list[dict[str, Any]]) -> str:
    head = ["id", "created (UTC)", "not_after (UTC)", "current", "valid"]
    cells = [head] + [[str(r["id"]), _when(r["created"]), _when(r["not_after"]), "yes" if r["current"] else "",
                       "yes" if r["valid"] else "no"] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)
