"""The per-daemon control socket: JSON lines over a Unix stream socket.

A request is one JSON object per line, ``{"cmd": NAME, ...args}``; the reply is one line,
``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``. Malformed requests get an
error reply, never a crash (docs/architecture.md "Engines are sans-IO": bad control requests get a clear error).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .. import looplag
from ..errors import NetstackError

Handler = Callable[[dict[str, Any]], Any | Awaitable[Any]]

#: Longest request line accepted (a status request is a few bytes; configs a few KB).
MAX_REQUEST = 1 << 20
#: The umask the socket is bound under: it is created 0600 (owner read/write only). A chmod
#: after bind() would leave it open to others for a moment, with the process umask's mode.
SOCKET_UMASK = 0o177


class ControlError(NetstackError):
    """Raised by a handler for a request it refuses; sent back as ``{"ok": false}``."""


class ControlServer:
    """Every daemon's control socket. It also measures the daemon's event-loop lag (its scheduling
    delay, :mod:`netstack.looplag`) from :meth:`start` on, answered by the built-in ``loop_lag``
    command, so that every live run can tell whether the machine starved it."""

    def __init__(self, path: str, handlers: dict[str, Handler]) -> None:
        self.path = path
        self.lag = looplag.LagHistogram(time.monotonic_ns())
        self.handlers = {"loop_lag": lambda req: self.lag.snapshot(), **handlers}
        self._server: asyncio.base_events.Server | None = None
        self._lag_task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self._lag_task is None:
            self._lag_task = asyncio.get_running_loop().create_task(looplag.monitor(self.lag))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = bind_private(self.path)
        try:
            self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_REQUEST)
        except BaseException:
            sock.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            raise

    async def close(self) -> None:
        if self._lag_task is not None:
            self._lag_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lag_task
            self._lag_task = None
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    line = await reader.readline()
                except (asyncio.LimitOverrunError, ValueError):
                    writer.write(_encode({"ok": False, "error": f"request longer than {MAX_REQUEST} bytes"}))
                    break
                if not line:
                    break
                writer.write(_encode(await self.dispatch(line)))
                await writer.drain()
        except (ConnectionError, BrokenPipeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def dispatch(self, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return {"ok": False, "error": f"request is not JSON: {exc}"}
        if not isinstance(request, dict) or not isinstance(request.get("cmd"), str):
            return {"ok": False, "error": 'request must be an object with a string "cmd"'}
        handler = self.handlers.get(request["cmd"])
        if handler is None:
            return {"ok": False, "error": f"unknown cmd {request['cmd']!r}; known: {sorted(self.handlers)}"}
        try:
            result = handler(request)
            if asyncio.iscoroutine(result):
                result = await result
        except ControlError as exc:
            return {"ok": False, "error": str(exc)}
        except (KeyError, TypeError, ValueError) as exc:
            return {"ok": False, "error": f"bad arguments for {request['cmd']!r}: {exc!r}"}
        return {"ok": True, "result": result}


def bind_private(path: str) -> socket.socket:
    """A Unix stream socket bound at ``path`` with mode 0600 from the moment the file exists.

    The umask is process-wide: for the instant of bind() another thread creating a file gets
    0600 at most, which errs on the private side. It is restored even when bind() fails.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(SOCKET_UMASK)
    try:
        sock.bind(path)
    except BaseException:
        sock.close()
        raise
    finally:
        os.umask(old)
    return sock


def _encode(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, default=str) + "\n").encode()


def request(path: str, cmd: str, timeout: float = 5.0, **args: Any) -> Any:
    """Blocking client used by the CLI and tests: send one request, return ``result``.

    Raises :class:`ControlError` with the daemon's message when it refuses, and OSError when
    the daemon is not there.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(path)
        sock.sendall(_encode({"cmd": cmd, **args}))
        buf = bytearray()
        while not buf.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                raise ControlError(f"{path}: daemon closed the connection without replying")
            buf += chunk
    reply = json.loads(buf)
    if not reply.get("ok"):
        raise ControlError(reply.get("error", "unknown error"))
    return reply.get("result")
