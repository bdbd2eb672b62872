"""The control socket: JSON lines, errors for bad requests, never a crash."""

import asyncio
import json

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
