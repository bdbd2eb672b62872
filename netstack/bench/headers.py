"""``netstack bench headers``: encode and decode rate of every header, fast codec vs Scapy.

Both sides encode the same field values and decode the same bytes in the same run, so the
ratio is the speed-up the data path gets from never running Scapy per packet (docs/architecture.md
"The live runtime").
Cases come from ``netstack/bench/cases/<protocol>.py`` (``cases() -> list[Case]``).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import cases as cases_pkg
from .common import Case, measure_rate
from .output import format_table, write_results


def all_cases() -> list[Case]:
    found: list[Case] = []
    for info in sorted(pkgutil.iter_modules(cases_pkg.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{cases_pkg.__name__}.{info.name}")
        found.extend(module.cases())
    return found


def main(args: argparse.Namespace) -> int:
    selected = [c for c in all_cases() if not args.only or any(s in c.name for s in args.only)]
    if not selected:
        print("no header matches --only", file=sys.stderr)
        return 2
    rows = []
    records = []
    for n, case in enumerate(selected, 1):
        print(f"[{n}/{len(selected)}] {case.name} ...", file=sys.stderr, flush=True)
        enc = measure_rate(case.encode, args.min_time)
        dec = measure_rate(case.decode, args.min_time)
        s_enc = measure_rate(case.scapy_build, args.min_time)
        s_dec = measure_rate(case.scapy_dissect, args.min_time)
        records.append({
            "header": case.name,
            "codec_encode_per_s": enc, "codec_decode_per_s": dec,
            "scapy_build_per_s": s_enc, "scapy_dissect_per_s": s_dec,
            "encode_speedup": enc / s_enc, "decode_speedup": dec / s_dec,
        })
        rows.append([case.name, enc, s_enc, f"{enc / s_enc:.0f}x", dec, s_dec, f"{dec / s_dec:.0f}x"])
    path = write_results(args.results_dir, "bench-headers", {
        "min_time_s": args.min_time,
        "method": "calls/s of the fast struct codec and of the Scapy layer on the same values, same process, same run",
        "results": records,
    })
    print(format_table(
        ["header", "codec enc/s", "scapy build/s", "enc x", "codec dec/s", "scapy dissect/s", "dec x"], rows))
    print(f"\nwrote {path}")
    return 0
