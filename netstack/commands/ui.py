"""``netstack ui``: a live web view of a running testbed (netstack/ui; docs/ui.md)."""

from __future__ import annotations

import argparse
import secrets
import sys
from pathlib import Path

from ..argtypes import int_between, positive_float
from ..errors import CommandError
from .common import acts_on_testbed

EPILOG = """\
examples:
  netstack up && netstack ui                 the default testbed at http://127.0.0.1:8787/ (read-only
                                             until the page is given the token it prints)
  netstack ui --prefix tcd --port 0          testbed 'tcd' on a free port (printed)
  netstack ui --reports results/reproduce    also serve 'netstack reproduce' reports under /reports/
  netstack ui --interval 0.25                poll the daemons every 0.25 s (default 0.5)

The page draws the topology (nodes, links up/down, corrupting, protected) and each switch port's
counters with each protocol's view of it (LinkGuardian repairs and Tx buffer, TCD's state and its
timeline, 1Pipe's barriers per input, DTA's ingest and window). Changes (link down/up, impair, a
protocol's link actions such as LinkGuardian on) need the token: open the URL it prints with
#token=..., or paste the token into the page. Ctrl-C stops the server."""

#: the shortest --token accepted: a short one could be guessed by anything that reaches the port
MIN_TOKEN = 16
#: bytes of randomness in a generated token (secrets.token_urlsafe: 32 characters)
TOKEN_BYTES = 24


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="a live web view of a running testbed (graph, link states, per-port counters)",
                       description="Serve a web page that draws the running testbed and updates it from the "
                                   "daemons' control sockets; read-only without the token.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefix", default="ns", help="which testbed (default: %(default)s)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s; any other is reachable from elsewhere: "
                        "it prints a warning)")
    p.add_argument("--port", type=int_between(0, 65535, "a TCP port"), default=8787,
                   help="TCP port (default: %(default)s; 0: a free one, printed)")
    p.add_argument("--token", default=None,
                   help=f"the token state changes need (at least {MIN_TOKEN} characters; default: a random one, "
                        "printed once and written to the run directory, mode 0600)")
    p.add_argument("--reports", default="results/reproduce", metavar="DIR",
                   help="a directory served under /reports/ ('netstack reproduce' writes it; default: %(default)s)")
    p.add_argument("--interval", type=positive_float("the interval"), default=0.5, metavar="S",
                   help="seconds between two polls of the daemons (default: %(default)s; at most 1)")
    p.set_defaults(func=run)
    acts_on_testbed(p)


def run(args: argparse.Namespace) -> int:
    from .. import runtime
    from ..ui import require_aiohttp

    require_aiohttp()
    from ..ui.server import Settings, is_loopback, serve, write_token_file

    if args.interval > 1.0:
        raise CommandError(f"--interval {args.interval:g}: the page updates at least once a second (at most 1)")
    if args.token is not None and len(args.token) < MIN_TOKEN:
        raise CommandError(f"--token: at least {MIN_TOKEN} characters (or leave it out for a random one)")
    state = runtime.load_state(args.prefix)  # no such testbed: the runtime's error, exit 2
    if not is_loopback(args.host):
        print(f"netstack ui: warning: listening on {args.host}: the testbed's view is readable from the network "
              "(changes still need the token)", file=sys.stderr)
    token = args.token or secrets.token_urlsafe(TOKEN_BYTES)
    reports = Path(args.reports)
    settings = Settings(prefix=args.prefix, token=token, interval_s=args.interval, host=args.host, port=args.port,
                        reports=reports)
    written: list[Path] = []

    def ready(port: int) -> None:
        host = f"[{args.host}]" if ":" in args.host else args.host
        url = f"http://{host}:{port}/"
        print(f"netstack ui: testbed {args.prefix} ({state.topology}) at {url}", flush=True)
        path = write_token_file(args.prefix, port, token)
        if path is not None:
            written.append(path)
        where = f" (also in {path}, mode 0600)" if path else ""
        if args.token is None:
            print(f"  token: {token}{where}\n  with it, the page can change the testbed: {url}#token={token}")
        else:
            print(f"  token: the one given with --token{where}")
        have = "" if (reports / "index.html").is_file() else " (nothing there yet: 'netstack reproduce' writes it)"
        print(f"  reports: {reports} at {url}reports/{have}\n  Ctrl-C stops it", flush=True)

    import asyncio

    try:
        asyncio.run(serve(settings, ready))
    finally:
        for path in written:
            path.unlink(missing_ok=True)
    print("netstack ui: stopped", file=sys.stderr)
    return 0
