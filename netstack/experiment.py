"""Driving real traffic through a running testbed: the pieces `netstack demo` and the
benchmarks share (host tools run with ``ip netns exec``, counters read from the daemons)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from . import looplag, runtime, toolproc
from .errors import NetstackError
from .validity import Validity


class ExperimentError(NetstackError, toolproc.ToolError):
    """A traffic tool did not start, did not finish, or failed."""


def tool_argv(state: runtime.RunState, node: str, *args: str) -> list[str]:
    return runtime.node_exec_argv(state, node, [sys.executable, "-m", "netstack.traffic", *args])


def start_tool(state: runtime.RunState, node: str, *args: str) -> subprocess.Popen[str]:
    """Start a server-side tool and wait until it says it is ready (the traffic tools say so on
    stderr)."""
    return toolproc.start(tool_argv(state, node, *args), f"{args[0]} in {node}", ready_on="stderr",
                          error=ExperimentError)


def finish_tool(proc: subprocess.Popen[str], timeout: float = 300) -> dict[str, Any]:
    """A tool's JSON result once it exits (killed after ``timeout`` s)."""
    return toolproc.result(proc, "a traffic tool", timeout, error=ExperimentError)


def run_tool(state: runtime.RunState, node: str, *args: str, timeout: float = 600,
             progress: bool = False) -> dict[str, Any]:
    """Run a client-side tool to its end: its JSON result; ``progress`` passes its stderr through."""
    return toolproc.run(tool_argv(state, node, *args), f"{args[0]} in {node}", timeout, progress=progress,
                        error=ExperimentError)


def link_counters(prefix: str, sender: tuple[str, str], receiver: tuple[str, str]) -> dict[str, int]:
    """Frames the sending switch put on a link and FCS drops at the receiving switch (the
    paper's counters B and C: actual loss = drops / sent)."""
    st = runtime.status(prefix)["daemons"]
    s = st[sender[0]]["ports"][sender[1]]
    r = st[receiver[0]]["ports"][receiver[1]]
    return {"sent": s["tx_frames"], "fcs_drops": r["fcs_errors"], "received": r["rx_frames"]}


def diff(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


class LagWindow:
    """The daemons' scheduling delay over one run: snapshots at :meth:`start` and :meth:`stop`
    (:mod:`netstack.looplag`), plus what the run's traffic tools reported (``add_tool``)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.before: dict[str, Any] = {}
        self.lags: dict[str, dict[str, Any] | None] = {}

    def start(self) -> LagWindow:
        self.before = runtime.loop_lags(self.prefix)
        return self

    def stop(self) -> dict[str, dict[str, Any] | None]:
        for key, snap in runtime.loop_lags(self.prefix).items():
            self.lags[key] = looplag.summary(looplag.diff(snap, self.before.get(key))) if snap else None
        return self.lags

    def add_tool(self, name: str, result: dict[str, Any] | None) -> None:
        """A traffic tool's own ``sched`` summary (tools measure theirs, see netstack.traffic)."""
        self.lags[name] = (result or {}).get("sched")

    def check(self, validity: Validity, **limits: float) -> bool:
        return validity.not_starved(self.lags, **limits)
