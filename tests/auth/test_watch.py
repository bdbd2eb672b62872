"""The key-file watcher every keyed daemon runs (netstack.auth.watch): a rotation is loaded, a
broken file keeps the keys, and the daemons' callbacks hear of each poll."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from daemons import switch as switch_daemon
from netstack.auth.context import AuthContext
from netstack.auth.keys import KeyRing, generate, rotate
from netstack.auth.watch import KeyFileWatch

WALL = 1_700_000_000.0


def _keyfile(tmp_path: Path) -> Path:
    path = tmp_path / "lab.keys"
    generate(path, now=WALL)
    return path


def test_a_key_file_is_followed_for_rotations(tmp_path: Path) -> None:
    path = _keyfile(tmp_path)
    kf = KeyFileWatch(str(path))
    assert kf.poll() is kf.ring and kf.reloads == 0
    rotate(path, overlap_s=5, now=WALL + 1)
    os.utime(path, ns=(1, 1))  # (a rotation within the mtime's resolution would look unchanged)
    assert kf.poll().current == 2 and kf.reloads == 1
    path.write_text("not json")
    os.utime(path, ns=(2, 2))
    assert kf.poll().current == 2 and kf.errors == 1  # a broken file keeps the keys we have
    assert kf.poll().current == 2 and kf.errors == 2  # and is tried again at the next poll
    path.unlink()
    assert kf.poll().current == 2 and kf.errors == 2  # a file gone for a moment is no change


def test_a_broken_file_and_a_reload_are_said_in_the_daemons_log(tmp_path: Path, caplog) -> None:
    path = _keyfile(tmp_path)
    kf = KeyFileWatch(str(path), log=logging.getLogger("test.keys"))
    path.write_text("not json")
    os.utime(path, ns=(1, 1))
    with caplog.at_level(logging.INFO, logger="test.keys"):
        kf.poll()
        generate(path, force=True, now=WALL)
        os.utime(path, ns=(2, 2))
        kf.poll()
    assert "cannot be read (keeping the old keys)" in caplog.text and "key file reloaded: key 1" in caplog.text


@pytest.mark.asyncio
async def test_follow_tells_the_daemon_after_every_poll_whether_the_file_changed(tmp_path: Path) -> None:
    path = _keyfile(tmp_path)
    kf = KeyFileWatch(str(path))
    seen: list[tuple[int, bool]] = []

    def apply(ring: KeyRing, reloaded: bool) -> None:
        seen.append((ring.current, reloaded))
        if len(seen) == 1:
            rotate(path, overlap_s=5, now=WALL + 1)
            os.utime(path, ns=(1, 1))

    task = asyncio.create_task(kf.follow(apply, interval=0.01))
    try:
        for _ in range(500):
            if len(seen) >= 3:
                break
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert seen[:3] == [(1, False), (2, True), (2, False)]


def test_the_switch_daemon_reloads_its_context_on_a_rotation_and_refreshes_it_otherwise(tmp_path: Path) -> None:
    path = _keyfile(tmp_path)
    kf = KeyFileWatch(str(path))
    ctx = AuthContext.start(kf.ring, WALL)
    switch_daemon.apply_keys(ctx, kf.poll(), False)
    assert ctx.reloads == 0
    rotate(path, overlap_s=5, now=WALL + 1)
    os.utime(path, ns=(1, 1))
    switch_daemon.apply_keys(ctx, kf.poll(), True)
    assert ctx.reloads == 1 and ctx.ring.current == 2
