"""``netstack onepipe run``'s start-up handshake (runner._go, live._wait_for_go): the runner tells
the processes when to join only once every interpreter runs; a process killed while it starts
(``onepipe kill`` works at any moment) does not stop the run, one that fails to start does."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import pytest

from netstack.onepipe import live, runner
from netstack.onepipe.control import OnePipeControlError


class FakeProc:
    def __init__(self, returncode: int | None = None) -> None:
        self.returncode = returncode

    def poll(self) -> int | None:
        return self.returncode


@pytest.fixture
def go(tmp_path, monkeypatch):
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path))
    return tmp_path / runner.GO_FILE


def test_the_go_comes_once_every_process_is_ready_and_the_processes_read_it(go):
    running = {"p1": FakeProc(), "p2": FakeProc()}

    async def both() -> list[tuple[float, float]]:
        async def runner_side() -> float:
            return await asyncio.to_thread(runner._go, "t", go, running, lambda _m: None)

        r = asyncio.create_task(runner_side())
        await asyncio.sleep(0.1)
        assert not go.exists()  # nobody is ready yet
        got = await asyncio.gather(live._wait_for_go(go, ["p1"]), live._wait_for_go(go, ["p2"]))
        join_at = await r
        assert all(j == join_at and s == join_at + 0.5 for j, s in got)
        return got

    before = time.time()
    asyncio.run(both())
    d = json.loads(go.read_text())
    assert d["join_at"] > before and d["start_at"] == d["join_at"] + 0.5
    runner._clear_go(go)
    assert not go.exists() and not go.with_name(go.name + ".ready").exists()


def test_a_process_killed_while_it_starts_does_not_stop_the_run(go):
    ready = go.with_name(go.name + ".ready")
    ready.mkdir()
    (ready / "p1").touch()
    running = {"p1": FakeProc(), "p2": FakeProc(-signal.SIGKILL)}
    assert runner._go("t", go, running, lambda _m: None) > 0 and go.exists()


def test_a_process_that_fails_to_start_is_a_clear_error(go):
    running = {"p1": FakeProc(), "p2": FakeProc(1)}
    with pytest.raises(OnePipeControlError, match=r"p2 exited \(status 1\) before it was ready \(0 of 2 ready\)"):
        runner._go("t", go, running, lambda _m: None)
    assert not go.exists()
