"""Reliable 1Pipe's asyncio API in one small program: run it in two or more hosts of a testbed whose
topology has the 1Pipe controller (the shipped onepipe topology: node ctl, 10.0.0.100:40100), each
naming its own address first and every process of the run after it. Each registers with the
controller, sends ``--count`` scatterings to all of them and prints, as JSON lines, what it
delivers (in the total order: every process prints the same sequence of (ts, src, msg)), its
registration, and every process-fail callback (a process the controller declared failed, and its
failure timestamp T_f); then how many it delivered, and how many of its own failed.

    netstack up onepipe && netstack onepipe enable
    netstack exec --prefix op h1 -- .venv/bin/python docs/examples/onepipe_reliable.py \\
        10.0.0.1:40101 10.0.0.1:40101 10.0.0.3:40101 &
    netstack exec --prefix op h3 -- .venv/bin/python docs/examples/onepipe_reliable.py \\
        10.0.0.3:40101 10.0.0.1:40101 10.0.0.3:40101

Kill one of them (``kill -9``) while the other waits and the other prints ``proc_fail`` for it.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from netstack.onepipe.api import OnePipeEndpoint


def addr(text: str) -> tuple[str, int]:
    ip, _, port = text.rpartition(":")
    return ip, int(port)


def show(a: tuple[str, int]) -> str:
    return f"{a[0]}:{a[1]}"


def say(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


async def main(me: tuple[str, int], everyone: list[tuple[str, int]], controller: tuple[str, int], count: int,
               idle: float) -> None:
    failed: list[tuple[str, int]] = []
    proc_fails: list[tuple[str, int]] = []

    def proc_fail(proc: tuple[str, int], t_f: int) -> None:
        # 1Pipe's process-fail callback: everything proc sent with ts <= t_f is delivered everywhere,
        # nothing later anywhere; our messages to it that it had not acknowledged were recalled
        proc_fails.append(proc)
        say(proc_fail=show(proc), t_f=t_f)

    async with OnePipeEndpoint(me, reliable=True, controller=controller,
                               on_send_fail=lambda ts, dst, msg: failed.append(dst),
                               on_proc_fail=proc_fail,
                               on_register=lambda incarnation: say(registered=incarnation)) as ep:
        await asyncio.sleep(1.0)  # let every process start and register (sends would wait for it anyway)
        for i in range(count):
            await ep.send([(dst, f"{show(me)} #{i}".encode()) for dst in everyone])  # one ts for all of them
            await asyncio.sleep(0.01)
        # receive until nothing has come for --idle seconds: a prepared message is delivered once
        # the commit barrier passes it, or recalled if a receiver failed before acknowledging it
        got = 0
        while True:
            try:
                ts, src, msg = await asyncio.wait_for(ep.recv(), timeout=idle)
            except TimeoutError:
                break
            say(ts=ts, src=show(src), msg=msg.decode())
            got += 1
    say(delivered=got, send_failed=len(failed), proc_failed=len(proc_fails))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("me", type=addr, help="this process's IP:PORT (a port in 40101-40199)")
    p.add_argument("everyone", type=addr, nargs="+", help="every process of the run, IP:PORT")
    p.add_argument("--controller", type=addr, default=("10.0.0.100", 40100),
                   help="the 1Pipe controller's IP:PORT (default: the shipped topology's, 10.0.0.100:40100)")
    p.add_argument("--count", type=int, default=5, help="scatterings to send (default 5)")
    p.add_argument("--idle", type=float, default=2.0,
                   help="stop after this many seconds without a delivery (default 2)")
    a = p.parse_args()
    asyncio.run(main(a.me, a.everyone, a.controller, a.count, a.idle))
