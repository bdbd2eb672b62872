"""``netstack bench headers``: encode and decode rate of every header, fast codec vs Scapy and vs struct.

Both sides encode the same field values and decode the same bytes in the same run, so the
ratio is the speed-up the data path gets from never running Scapy per packet (docs/architecture.md
"The live runtime"). Each case also times a bare ``struct.unpack_from`` of the same wire fields
(its ``baseline``): ``decode_vs_struct`` says how far above that floor the decoder is (issue 19).
Cases come from ``netstack/bench/cases/<protocol>.py`` (``cases() -> list[Case]``).
A second table (JSON key ``auth``) times sealing and opening the authentication trailer
(netstack.auth.frame) against a fresh CMAC object per frame.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import pkgutil
import sys
from collections.abc import Callable
from hmac import compare_digest

from headers.auth import AUTH_INPUT, TRAILER_LEN, decode_trailer
from netstack.auth.frame import Opener, Sealer, mac
from netstack.auth.keys import DerivedKeys

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
    auth_selected = [a for a in AUTH_ROWS if not args.only or any(s in a for s in args.only)]
    if not selected and not auth_selected:
        print("no header matches --only", file=sys.stderr)
        return 2
    rows = []
    records = []
    for n, case in enumerate(selected, 1):
        print(f"[{n}/{len(selected)}] {case.name} ...", file=sys.stderr, flush=True)
        rec = _measure_case(case, args.min_time)
        records.append(rec)
        rows.append([case.name, rec["codec_encode_per_s"], rec["scapy_build_per_s"], f"{rec['encode_speedup']:.0f}x",
                     rec["codec_decode_per_s"], rec["scapy_dissect_per_s"], rec["struct_unpack_per_s"],
                     f"{rec['decode_speedup']:.0f}x", f"{rec['decode_vs_struct']:.2f}"])
    auth_records = [_measure_auth(name, args.min_time) for name in auth_selected]
    path = write_results(args.results_dir, "bench-headers", {
        "min_time_s": args.min_time,
        "method": METHOD,
        "results": records,
        "auth": {"method": AUTH_METHOD, "results": auth_records},
    })
    if rows:
        print(format_table(
            ["header", "codec enc/s", "scapy build/s", "enc x", "codec dec/s", "scapy dissect/s", "struct unpack/s",
             "dec vs scapy", "struct/dec"], rows))
    if auth_records:
        print(("\n" if rows else "") + format_table(
            ["auth (AES-CMAC trailer)", "frames/s", "us/frame", "fresh CMAC/s", "fresh us/frame", "x"],
            [[r["name"], r["per_s"], f"{r['us_per_frame']:.2f}", r["fresh_cmac_per_s"],
              f"{r['fresh_cmac_us_per_frame']:.2f}", f"{r['speedup']:.1f}x"] for r in auth_records]))
    print(f"\nwrote {path}")
    return 0


#: alternating rounds in which a decoder and its struct baseline are timed (the best of each kept)
PAIRED_ROUNDS = 9
METHOD = ("calls/s of the fast struct codec and of the Scapy layer on the same values, and of a bare "
          "struct.unpack_from of the same wire fields of the same bytes, same process, same run; decode and "
          f"struct rates are the best of {PAIRED_ROUNDS} alternating rounds of min_time/3 each; "
          "decode_vs_struct = struct_unpack_per_s / codec_decode_per_s (issue 19: at most 3)")


def _measure_case(case: Case, min_time: float) -> dict[str, object]:
    """One header's rates. The decoder and its struct baseline are timed in alternation, in
    short rounds, keeping each one's best round: a burst of load from another process on this
    2-core machine then skews their ratio as little as possible."""
    enc = measure_rate(case.encode, min_time)
    dec, base = _paired_rates(case.decode, case.baseline, min_time)
    s_enc = measure_rate(case.scapy_build, min_time)
    s_dec = measure_rate(case.scapy_dissect, min_time)
    return {
        "header": case.name,
        "codec_encode_per_s": enc, "codec_decode_per_s": dec,
        "scapy_build_per_s": s_enc, "scapy_dissect_per_s": s_dec,
        "encode_speedup": enc / s_enc, "decode_speedup": dec / s_dec,
        "struct_unpack_per_s": base, "decode_vs_struct": base / dec,
    }


def _paired_rates(a: Callable[[], object], b: Callable[[], object], min_time: float,
                  rounds: int = PAIRED_ROUNDS) -> tuple[float, float]:
    """The best rate of ``a`` and of ``b`` over ``rounds`` alternating rounds of ``min_time / 3``:
    short rounds, so that some of them fall between the bursts of other processes."""
    best_a = best_b = 0.0
    for _ in range(rounds):
        best_a = max(best_a, measure_rate(a, min_time / 3))
        best_b = max(best_b, measure_rate(b, min_time / 3))
    return best_a, best_b


# --- the authentication trailer (netstack.auth.frame) --------------------------------------------
#
# Not a header codec with a Scapy twin, so a table of its own: the Sealer/Opener as the daemons
# use them (one pre-keyed CMAC per key, copied per frame) against the same work with a fresh CMAC
# object per frame (netstack.auth.frame.mac), the obvious way to write it, measured in the same run.

AUTH_SIZES = (64, 1500)
AUTH_ROWS = tuple(f"auth.{op}.{size}B" for size in AUTH_SIZES for op in ("seal", "open"))
AUTH_METHOD = ("frames/s of Sealer.seal / Opener.open (pre-keyed AES-CMAC copied per frame, 8-byte tag, replay "
               "window) on frames of the given total size, vs the same with a fresh CMAC object per frame")
#: distinct sealed frames the open rows cycle through (a fresh Opener per cycle, so none is a replay)
_OPEN_RING = 4096


class _Frames:
    """Cycles through ``frames`` sealed in order, with a fresh Opener per cycle so that no frame
    offered is a replay (building the Opener costs ~10 us, spread over the cycle's frames)."""

    def __init__(self, keys: DerivedKeys, frames: list[bytes]) -> None:
        self.keys, self.frames, self.i, self.j = keys, frames, 0, 0
        self.opener = Opener(keys)

    def open_next(self) -> bytes:
        if self.i == len(self.frames):
            self.i, self.opener = 0, Opener(self.keys)
        self.i += 1
        return self.opener.open(self.frames[self.i - 1])

    def fresh_open(self) -> bytes:
        """The same check with a fresh CMAC per frame (and no replay window: it only does less)."""
        frame = self.frames[self.j % len(self.frames)]
        self.j += 1
        t = decode_trailer(frame)
        if not compare_digest(mac(self.keys.keys[t.key_id], frame[:-TRAILER_LEN], t.key_id, t.era,
                                  t.seq), t.mac):
            raise AssertionError("fresh-CMAC baseline disagrees with the Sealer")
        return frame[:-TRAILER_LEN]


def _auth_fns(op: str, size: int) -> tuple[Callable[[], object], Callable[[], object]]:
    """(the Sealer/Opener call, the fresh-CMAC baseline) for ``size``-byte frames (trailer included)."""
    keys = DerivedKeys({1: os.urandom(16)}, 1)
    data = os.urandom(size - TRAILER_LEN)
    sealer = Sealer(keys, era=1)
    if op == "seal":
        seqs = itertools.count(1)

        def fresh_seal() -> bytes:
            seq = next(seqs)
            return data + AUTH_INPUT.pack(1, 1, seq) + mac(keys.keys[1], data, 1, 1, seq)

        return (lambda: sealer.seal(data)), fresh_seal
    frames = _Frames(keys, [sealer.seal(data) for _ in range(_OPEN_RING)])
    return frames.open_next, frames.fresh_open


def _measure_auth(name: str, min_time: float) -> dict[str, object]:
    _, op, size_text = name.split(".")
    size = int(size_text.removesuffix("B"))
    print(f"[auth] {name} ...", file=sys.stderr, flush=True)
    fast, fresh = _auth_fns(op, size)
    per_s = measure_rate(fast, min_time)
    fresh_per_s = measure_rate(fresh, min_time)
    return {"name": name, "op": op, "frame_bytes": size, "per_s": per_s, "us_per_frame": 1e6 / per_s,
            "fresh_cmac_per_s": fresh_per_s, "fresh_cmac_us_per_frame": 1e6 / fresh_per_s,
            "speedup": per_s / fresh_per_s}
