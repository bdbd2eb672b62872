"""``python -m netstack.onepipe.authbench``: what authenticated beacons and barriers cost in a
switch's 1Pipe feature (docs/onepipe.md "Authenticated beacons and barriers", "Cost").

One ToR (two edge ports, one fabric port) runs 1Pipe with and without keys; each row is the
best of ``--rounds`` rounds of ``--frames`` frames (the least disturbed by the rest of the
machine), in microseconds per frame, of:

- ``host beacon in``: a process's BEACON arriving at an edge port (without keys: parsed and its
  register set; with keys: also opened: context, AES-CMAC, replay window);
- ``data stamped``: a DATA frame from one process to another across the ToR (with keys: opened,
  stamped, sealed anew for its receiver, UDP checksum moved);
- ``switch beacon out``: a beacon the ToR makes for a process (template patched; with keys: sealed).

Frames are sealed beforehand (a process's cost, not the switch's). Nothing here is asserted:
the numbers go into the docs.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from headers.inet import build_udp_frame
from headers.onepipe import OnePipeFlag, OnePipeHeader, OnePipeOpcode, ts_from_ns

from ..auth.context import AuthContext
from ..auth.keys import KeyRing
from ..switch import PortConfig, Switch, SwitchConfig
from . import feature
from .auth import HostAuth
from .params import OnePipeParams

MS = 1_000_000
WALL = 1_700_000_000.0


def _mac(i: int) -> bytes:
    return bytes([2, 0, 10, 0, 0, i])


def _ip(i: int) -> bytes:
    return bytes([10, 0, 0, i])


def _switch(keys: KeyRing | None) -> Switch:
    sw = Switch(SwitchConfig("tor1", (PortConfig("p-h1", role="edge"), PortConfig("p-h2", role="edge"),
                                      PortConfig("p-spine1", role="fabric")),
                             {_mac(1): "p-h1", _mac(2): "p-h2"}))
    if keys is not None:
        sw.auth = AuthContext.start(keys, WALL)
    feature.enable(sw, {"p-h1": "down", "p-h2": "down", "p-spine1": "up"}, OnePipeParams(t_beacon_ns=MS), 0,
                   domain="bench" if keys is not None else None, peers={"p-spine1": "spine1:p-tor1"})
    return sw


def _frames(keys: KeyRing | None, n: int, opcode: OnePipeOpcode) -> list[bytes]:
    host = HostAuth.from_ring(keys, "bench", ("10.0.0.1", 40101), 7, WALL) if keys is not None else None
    out = []
    for k in range(n):
        ts = ts_from_ns(10 * MS + k)
        beacon = opcode is OnePipeOpcode.BEACON
        hdr = OnePipeHeader(ts, ts, 0, k, opcode, 0 if beacon else OnePipeFlag.EOM).to_bytes()
        body = hdr + (b"" if beacon else b"x" * 8)
        dst = ("10.0.0.255", 40100) if beacon else ("10.0.0.2", 40101)
        if host is not None:
            body = host.seal(dst, body)
        dip = _ip(255) if beacon else _ip(2)
        out.append(build_udp_frame(_mac(1), b"\xff" * 6 if beacon else _mac(2), _ip(1), dip, 40101, dst[1], body))
    return out


def _per_frame(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / n / 1000


def _ingress(keys: KeyRing | None, n: int, opcode: OnePipeOpcode) -> float:
    sw = _switch(keys)
    frames = _frames(keys, n, opcode)
    f = feature.features(sw)["p-h1"]
    if opcode is OnePipeOpcode.DATA:  # the receiver is known (its MAC, its input): the steady state
        sw.receive("p-h2", _frames(None, 1, OnePipeOpcode.BEACON)[0] if keys is None
                   else _h2_beacon(keys), 10 * MS)
    now = 10 * MS

    def run() -> None:
        for fr in frames:
            f.on_ingress(fr, now)

    return _per_frame(run, n)


def _h2_beacon(keys: KeyRing) -> bytes:
    host = HostAuth.from_ring(keys, "bench", ("10.0.0.2", 40101), 7, WALL)
    ts = ts_from_ns(10 * MS)
    body = host.seal(("10.0.0.255", 40100), OnePipeHeader(ts, ts, 0, 0, OnePipeOpcode.BEACON).to_bytes())
    return build_udp_frame(_mac(2), b"\xff" * 6, _ip(2), _ip(255), 40101, 40100, body)


def _beacon_out(keys: KeyRing | None, n: int) -> float:
    sw = _switch(keys)
    state = feature._STATE[sw]
    sw.receive("p-h1", _frames(keys, 1, OnePipeOpcode.BEACON)[0], 10 * MS)
    oid = ("p-h1", _ip(1), 40101)

    def run() -> None:
        for k in range(n):
            state._send_beacon(oid, 10 * MS + k, None, 10 * MS)
            if k % 64 == 63:
                sw.transmit(10 * MS)  # (keep the queue from tail-dropping them)

    return _per_frame(run, n)


def measure(frames: int = 2000, rounds: int = 7) -> dict[str, dict[str, float]]:
    keys = KeyRing({1: os.urandom(32)}, {1: None}, 1, "bench")
    rows: dict[str, Callable[[KeyRing | None], float]] = {
        "host beacon in": lambda k: _ingress(k, frames, OnePipeOpcode.BEACON),
        "data stamped": lambda k: _ingress(k, frames, OnePipeOpcode.DATA),
        "switch beacon out": lambda k: _beacon_out(k, frames),
    }
    out: dict[str, dict[str, float]] = {}
    for name, fn in rows.items():
        plain = min(fn(None) for _ in range(rounds))
        sealed = min(fn(keys) for _ in range(rounds))
        out[name] = {"without_keys_us": round(plain, 2), "with_keys_us": round(sealed, 2),
                     "auth_us": round(sealed - plain, 2)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m netstack.onepipe.authbench", description=__doc__.split("\n\n")[0])
    p.add_argument("--frames", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    res = measure(args.frames, args.rounds)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    print(f"{'per frame (us)':<20}{'without keys':>14}{'with keys':>12}{'auth':>8}")
    for name, r in res.items():
        print(f"{name:<20}{r['without_keys_us']:>14.2f}{r['with_keys_us']:>12.2f}{r['auth_us']:>8.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
