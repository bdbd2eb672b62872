"""1Pipe's asyncio API in one small program: run it in two or more hosts of a testbed with 1Pipe
enabled, each naming its own address first and every process of the run after it; each sends
``--count`` scatterings to all of them and prints what it delivers, in the total order, as JSON
lines, then how many it delivered and how many of its own were reported lost. Every process
prints the same sequence of (ts, src, msg).

    netstack up onepipe && netstack onepipe enable
    netstack exec --prefix op h1 -- .venv/bin/python docs/examples/onepipe_hello.py \\
        10.0.0.1:40101 10.0.0.1:40101 10.0.0.3:40101 &
    netstack exec --prefix op h3 -- .venv/bin/python docs/examples/onepipe_hello.py \\
        10.0.0.3:40101 10.0.0.1:40101 10.0.0.3:40101
"""

from __future__ import annotations

import argparse
import asyncio
import json

from netstack.onepipe.api import OnePipeEndpoint


def addr(text: str) -> tuple[str, int]:
    ip, _, port = text.rpartition(":")
    return ip, int(port)


async def main(me: tuple[str, int], everyone: list[tuple[str, int]], count: int, idle: float) -> None:
    failed: list[tuple[str, int]] = []
    unknown: list[tuple[str, int]] = []  # no ACK, no NAK in time: maybe delivered (do not resend blindly)
    async with OnePipeEndpoint(me, on_send_fail=lambda ts, dst, msg: failed.append(dst),
                               on_send_unknown=lambda ts, dst, msg: unknown.append(dst)) as ep:
        await asyncio.sleep(1.0)  # let every process start and join (its beacons reach the ToR)
        for i in range(count):
            msg = f"{me[0]}:{me[1]} #{i}".encode()
            await ep.send([(dst, msg) for dst in everyone])  # one timestamp for all of them
            await asyncio.sleep(0.01)
        # receive until nothing has come for --idle seconds: by then every message's fate is
        # known (delivered here, or reported to its sender within the ACK timeout)
        got = 0
        while True:
            try:
                ts, src, msg = await asyncio.wait_for(ep.recv(), timeout=idle)
            except TimeoutError:
                break
            print(json.dumps({"ts": ts, "src": f"{src[0]}:{src[1]}", "msg": msg.decode()}), flush=True)
            got += 1
    print(json.dumps({"delivered": got, "send_failed": len(failed), "send_unknown": len(unknown)}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("me", type=addr, help="this process's IP:PORT (a port in 40100-40199)")
    p.add_argument("everyone", type=addr, nargs="+", help="every process of the run, IP:PORT")
    p.add_argument("--count", type=int, default=5, help="scatterings to send (default 5)")
    p.add_argument("--idle", type=float, default=1.0,
                   help="stop after this many seconds without a delivery (default 1)")
    a = p.parse_args()
    asyncio.run(main(a.me, a.everyone, a.count, a.idle))
