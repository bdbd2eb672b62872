"""``netstack metrics``: every daemon's Prometheus metrics, scraped and merged into one snapshot."""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import CommandError
from .common import acts_on_testbed

EPILOG = """\
examples:
  netstack up --metrics-port 9400               daemons serve http://127.0.0.1:9400.../metrics
  netstack metrics                              one merged snapshot, Prometheus text
  netstack metrics --match rx_frames            only the metrics whose name contains rx_frames
  netstack metrics --json                       {name: [{labels, value}, ...]}
  netstack metrics --scrape-config              a prometheus.yml scrape job for these daemons

The metric names are the counters' names in 'netstack status', prefixed netstack_; the node, port,
class and protocol they belong to are labels (docs/testbed.md "Metrics")."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("metrics", help="scrape every daemon's Prometheus metrics into one snapshot",
                       description="Scrape the Prometheus endpoint of every daemon of the running testbed (started "
                                   "with [topology] metrics_port or 'netstack up --metrics-port') and print one "
                                   "merged snapshot.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prefix", default="ns", help="which topology (default: %(default)s)")
    p.add_argument("--match", action="append", default=None, metavar="TEXT",
                   help="only metrics whose name contains TEXT (repeatable)")
    p.add_argument("--json", action="store_true", help="print {name: [{labels, value}]} instead of Prometheus text")
    p.add_argument("--scrape-config", action="store_true", help="print a Prometheus scrape job for the daemons")
    p.set_defaults(func=run)
    acts_on_testbed(p)


def run(args: argparse.Namespace) -> int:
    from ..runtime import load_state

    state = load_state(args.prefix)
    daemons = [d for d in state.daemons if d.metrics]
    if not daemons:
        raise CommandError(f"the daemons of {args.prefix!r} serve no metrics: start the topology with "
                           "'netstack up --metrics-port PORT' or set [topology] metrics_port")
    if args.scrape_config:
        print(scrape_config(args.prefix, [d.metrics for d in daemons]))
        return 0
    families, failed = collect([d.metrics for d in daemons], args.match)
    for where, why in failed:
        print(f"metrics: {where} did not answer: {why}", file=sys.stderr)
    if args.json:
        print(json.dumps({name: [{"labels": lab, "value": v} for lab, v in rows] for name, rows in families.items()},
                         indent=2))
    else:
        print(render_text(families), end="")
    print(f"{sum(len(r) for r in families.values())} samples in {len(families)} metrics from "
          f"{len(daemons) - len(failed)} of {len(daemons)} daemons", file=sys.stderr)
    return 1 if failed else 0


def collect(addresses: list[str], match: list[str] | None
            ) -> tuple[dict[str, list[tuple[dict[str, str], float]]], list[tuple[str, str]]]:
    """Scrape and parse (prometheus-client's parser) every address: samples per metric name."""
    from prometheus_client.parser import text_string_to_metric_families

    from ..io.metrics import scrape

    families: dict[str, list[tuple[dict[str, str], float]]] = {}
    failed = []
    for where in addresses:
        try:
            text = scrape(where)
        except OSError as exc:
            failed.append((where, str(getattr(exc, "reason", None) or exc)))
            continue
        for fam in text_string_to_metric_families(text):
            if match and not any(m in fam.name for m in match):
                continue
            families.setdefault(fam.name, []).extend((dict(s.labels), float(s.value)) for s in fam.samples)
    return dict(sorted(families.items())), failed


def render_text(families: dict[str, list[tuple[dict[str, str], float]]]) -> str:
    lines = []
    for name, rows in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in rows:
            inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{inner}}} {value:g}" if inner else f"{name} {value:g}")
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def scrape_config(prefix: str, addresses: list[str]) -> str:
    """A Prometheus scrape job (YAML) for ``addresses``."""
    targets = "\n".join(f"          - {a}" for a in addresses)
    return (f"scrape_configs:\n  - job_name: netstack-{prefix}\n    scrape_interval: 5s\n"
            f"    static_configs:\n      - targets:\n{targets}\n        labels:\n          prefix: {prefix}")
