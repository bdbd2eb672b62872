"""1Pipe's asyncio API in one small program: run it in two or more hosts of a testbed with 1Pipe
enabled, each naming its own address first and every process of the run after it; each sends
``--count`` scatterings to all of them and prints what it delivers, in the total order, as JSON
lines. Every process prints the same sequence of (ts, src, msg).

    netstack up onepipe && netstack onepipe enable
    netstack exec --prefix op h1 -- .venv/bin/python docs/examples/onepipe_hello.py \\
        10.0.0.1:40101 10.0.0.1:40101 10.0.0.3:40101 &
    netstack exec --prefix op h3 -- .venv/bin/python docs/examples/onepipe_hello.py \\
        10.0.0.3:40101 10.0.0.1:40101 10.0.0.3:40101
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json

from netstack.onepipe.api import OnePipeEndpoint


def addr(text: str) -> tuple[str, int]:
    ip, _, port = text.rpartition(":")
    return ip, int(port)


async def main(me: tuple[str, int], everyone: list[tuple[str, int]], count: int, wait: float) -> None:
    failed: list[tuple[str, int]] = []
    async with OnePipeEndpoint(me, on_send_fail=lambda ts, dst, msg: failed.append(dst)) as ep:
        await asyncio.sleep(1.0)  # let every process start and join (its beacons reach the ToR)
        for i in range(count):
            msg = f"{me[0]}:{me[1]} #{i}".encode()
            await ep.send([(dst, msg) for dst in everyone])  # one timestamp for all of them
            await asyncio.sleep(0.01)
        expected = count * len(everyone)
        got = 0
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                async for ts, src, msg in ep:
                    print(json.dumps({"ts": ts, "src": f"{src[0]}:{src[1]}", "msg": msg.decode()}), flush=True)
                    got += 1
                    if got + len(failed) >= expected:
                        break
    print(json.dumps({"delivered": got, "send_failed": len(failed)}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("me", type=addr, help="this process's IP:PORT (a port in 40100-40199)")
    p.add_argument("everyone", type=addr, nargs="+", help="every process of the run, IP:PORT")
    p.add_argument("--count", type=int, default=5, help="scatterings to send (default 5)")
    p.add_argument("--wait", type=float, default=5.0, help="seconds to wait for deliveries (default 5)")
    a = p.parse_args()
    asyncio.run(main(a.me, a.everyone, a.count, a.wait))
