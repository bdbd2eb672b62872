"""The control socket: JSON lines, errors for bad requests, never a crash."""

import asyncio
import json
import os
import socket
import stat

import pytest
import pytest_asyncio

from netstack.io.control import ControlError, ControlServer, request


@pytest_asyncio.fixture
async def server(tmp_path):
    state = {"n": 0}

    def bump(req):
        state["n"] += int(req.get("by", 1))
        return state["n"]

    async def slow(req):
        await asyncio.sleep(0)
        return "done"

    def refuse(req):
        raise ControlError("no such port 'x'")

    srv = ControlServer(str(tmp_path / "ctl.sock"), {"bump": bump, "slow": slow, "refuse": refuse})
    await srv.start()
    yield srv
    await srv.close()


async def _ask(path, payload: bytes) -> dict:
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(payload)
    await writer.drain()
    line = await reader.readline()
    writer.close()
    await writer.wait_closed()
    return json.loads(line)


@pytest.mark.asyncio
async def test_requests_and_errors(server):
    assert await _ask(server.path, b'{"cmd": "bump", "by": 2}\n') == {"ok": True, "result": 2}
    assert await _ask(server.path, b'{"cmd": "slow"}\n') == {"ok": True, "result": "done"}
    reply = await _ask(server.path, b'{"cmd": "refuse"}\n')
    assert reply == {"ok": False, "error": "no such port 'x'"}
    reply = await _ask(server.path, b'{"cmd": "nope"}\n')
    assert not reply["ok"] and "unknown cmd" in reply["error"]
    reply = await _ask(server.path, b"not json\n")
    assert not reply["ok"] and "not JSON" in reply["error"]
    reply = await _ask(server.path, b"[1, 2]\n")
    assert not reply["ok"]
    reply = await _ask(server.path, b'{"cmd": "bump", "by": "x"}\n')
    assert not reply["ok"] and "bad arguments" in reply["error"]
    reply = await _ask(server.path, b"\xff\xfe\n")
    assert not reply["ok"]


@pytest.mark.asyncio
async def test_blocking_client(server):
    result = await asyncio.to_thread(request, server.path, "bump", by=5)
    assert result == 5
    with pytest.raises(ControlError, match="no such port"):
        await asyncio.to_thread(request, server.path, "refuse")


@pytest.mark.asyncio
async def test_several_requests_on_one_connection(server):
    reader, writer = await asyncio.open_unix_connection(server.path)
    writer.write(b'{"cmd": "bump"}\n{"cmd": "bump"}\n')
    await writer.drain()
    first = json.loads(await reader.readline())
    second = json.loads(await reader.readline())
    writer.close()
    assert (first["result"], second["result"]) == (1, 2)


# --------------------------------------------------------------------------- the socket's permissions
# (docs/security.md, "Topology files, the CLI and the control socket", finding 5: the socket
# must never be reachable by others, not even between its creation and a later chmod)


@pytest.fixture
def permissive_umask():
    old = os.umask(0o022)
    yield 0o022
    os.umask(old)


@pytest.mark.asyncio
@pytest.mark.parametrize("umask", [0o000, 0o022, 0o077])
async def test_socket_is_private_from_the_moment_it_exists(tmp_path, monkeypatch, umask, permissive_umask):
    """The mode the socket file has when bind() creates it is already 0600, whatever the umask."""
    os.umask(umask)
    seen: dict[str, int] = {}
    real_bind = socket.socket.bind

    def bind(self, address):
        real_bind(self, address)
        if isinstance(address, str):
            seen[address] = stat.S_IMODE(os.stat(address).st_mode)

    monkeypatch.setattr(socket.socket, "bind", bind)
    path = str(tmp_path / "ctl.sock")
    srv = ControlServer(path, {"ping": lambda req: "pong"})
    await srv.start()
    try:
        assert seen == {path: 0o600}
        assert stat.S_ISSOCK(os.stat(path).st_mode) and stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert os.umask(umask) == umask  # restored
        assert await asyncio.to_thread(request, path, "ping") == "pong"
    finally:
        await srv.close()


@pytest.mark.asyncio
async def test_umask_is_restored_when_bind_fails(tmp_path, permissive_umask):
    srv = ControlServer(str(tmp_path / "missing-dir" / "ctl.sock"), {})
    with pytest.raises(OSError):
        await srv.start()
    assert os.umask(0o022) == 0o022


@pytest.mark.asyncio
async def test_start_replaces_a_stale_socket(tmp_path, permissive_umask):
    path = tmp_path / "ctl.sock"
    path.write_text("stale")
    os.chmod(path, 0o666)
    srv = ControlServer(str(path), {"ping": lambda req: "pong"})
    await srv.start()
    try:
        assert stat.S_ISSOCK(os.stat(path).st_mode) and stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert await asyncio.to_thread(request, str(path), "ping") == "pong"
    finally:
        await srv.close()
    assert not path.exists()
