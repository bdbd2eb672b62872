"""The ``netstack ui`` web server (aiohttp): the page, its API, the poller and the reports.

Routes (docs/ui.md "The API"):

- ``GET /``, ``/static/...``: the page (netstack/ui/static: no external URL, no build step);
- ``GET /api/topology``: the graph (:func:`netstack.ui.layout.graph`) and each link's actions;
- ``GET /api/state``: the latest snapshot (:mod:`.snapshot`, with :mod:`.history`'s rates and
  timelines); ``seq`` counts the polls;
- ``GET /api/auth``: ``{"write": true}`` when the request carries the token (never a 401: a page
  asks it to decide whether to show its buttons);
- ``POST /api/link``, ``/api/impair``, ``/api/action``: :mod:`.actions`, with
  ``Authorization: Bearer <token>`` (401 without it, compared in constant time), one at a time;
- ``GET /reports/...``: the ``--reports`` directory as static files (``netstack reproduce``'s).

One poller task asks the testbed every ``interval`` seconds (in a thread: the control sockets'
client blocks), whatever the number of pages; an action wakes it at once, so that the page shows
its effect without waiting for the next period. Bound to a loopback address, the server answers
only requests addressed to a loopback name (a web page elsewhere cannot reach it by DNS
rebinding); state changes need the token on any address.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import json
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from aiohttp import web

from .. import runtime
from ..errors import NetstackError
from . import UIError, UIInputError, actions, layout, snapshot, views
from .history import History

log = logging.getLogger("netstack.ui")

STATIC = Path(__file__).resolve().parent / "static"
#: the largest request body accepted (an action is a few dozen bytes)
MAX_BODY = 16 * 1024
#: how often the kernel's impairments (two subprocesses per port end) are read again: every 3 s, or
#: less often where a scan takes long (a big topology), so that scans take at most 1/20 of the time
IMPAIR_EVERY_S = 3.0
IMPAIR_SHARE = 20
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
#: the page's own policy: its files and its API only (the reports directory is served without
#: it: a report is someone else's page)
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

Action = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Settings:
    prefix: str
    token: str
    interval_s: float = 0.5
    host: str = "127.0.0.1"
    port: int = 8787
    reports: Path | None = None


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_NAMES or host.startswith("127.")


def _hostname(header: str) -> str:
    """The name of a Host header, without its port (``[::1]:80`` -> ``::1``)."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _json(doc: Any, status: int = 200) -> web.Response:
    return web.json_response(doc, status=status, dumps=functools.partial(json.dumps, default=str))


class UIServer:
    """The application and what it keeps between requests: the snapshot, the history, the lock
    actions take."""

    def __init__(self, settings: Settings, mods: dict[str, ModuleType] | None = None) -> None:
        self.settings = settings
        self.mods = views.modules() if mods is None else mods
        self.history = History()
        self.snapshot: dict[str, Any] = {**snapshot.gone(settings.prefix, "not polled yet"), "testbed": "starting"}
        self.seq = 0
        self.impairments: dict[str, Any] = {}
        self.impairments_due = float("-inf")  # (time.monotonic)
        self._wake: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._poller: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ the application
    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.guard], client_max_size=MAX_BODY)
        r = app.router
        r.add_get("/", self.index)
        r.add_static("/static/", STATIC, follow_symlinks=False)
        r.add_get("/api/topology", self.topology)
        r.add_get("/api/state", self.state)
        r.add_get("/api/auth", self.auth)
        r.add_post("/api/link", functools.partial(self.act, actions.set_link))
        r.add_post("/api/impair", functools.partial(self.act, actions.impair))
        r.add_post("/api/action", functools.partial(self.act, self._protocol_action))
        r.add_get("/reports", self.reports_root)
        r.add_get("/reports/{path:.*}", self.report)
        app.on_startup.append(self._start)
        app.on_cleanup.append(self._stop)
        return app

    def authorized(self, request: web.Request) -> bool:
        """The request carries ``Authorization: Bearer <token>`` (compared in constant time)."""
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.settings.token.encode())

    @web.middleware
    async def guard(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        if is_loopback(self.settings.host) and not is_loopback(_hostname(request.host)):
            return _json({"error": f"this server answers requests for {self.settings.host} only"}, 403)
        api = request.path.startswith("/api/")
        if request.method == "POST" and not self.authorized(request):
            resp: web.StreamResponse = _json({"error": "this changes the testbed: it needs the token "
                                                       "(Authorization: Bearer <token>, printed by netstack ui)"}, 401)
            resp.headers["WWW-Authenticate"] = 'Bearer realm="netstack ui"'
            return resp
        try:
            resp = await handler(request)
        except (UIInputError, NetstackError) as exc:
            resp = _json({"error": str(exc)}, 400)
        except web.HTTPException as exc:
            if not api:
                raise  # (a redirect, a missing file: aiohttp's own answer)
            resp = _json({"error": exc.reason}, exc.status)
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "no-referrer")
        if not request.path.startswith("/reports"):
            resp.headers.setdefault("Content-Security-Policy", CSP)
        if api:
            resp.headers["Cache-Control"] = "no-store"
        return resp

    # ------------------------------------------------------------------ the poller
    async def _start(self, app: web.Application) -> None:
        self._wake, self._lock = asyncio.Event(), asyncio.Lock()
        self._poller = asyncio.get_running_loop().create_task(self.poll_forever())

    async def _stop(self, app: web.Application) -> None:
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller

    def poll_once(self) -> dict[str, Any]:
        """One snapshot, with the history's rates and timelines (blocking: in the poller's thread)."""
        started = time.monotonic()
        if started >= self.impairments_due:
            self.impairments = snapshot.kernel_impairments(self.settings.prefix)
            took = time.monotonic() - started
            self.impairments_due = started + max(IMPAIR_EVERY_S, IMPAIR_SHARE * took)
        timeout = min(1.0, max(0.25, 2 * self.settings.interval_s))
        snap = self.history.update(snapshot.collect(self.settings.prefix, self.mods, self.impairments, timeout))
        self.seq += 1
        return {**snap, "seq": self.seq, "interval_s": self.settings.interval_s}

    async def poll_forever(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            self._wake.clear()
            try:
                self.snapshot = await asyncio.to_thread(self.poll_once)
            except Exception:  # a bug in a view must not stop the page: logged, next poll
                log.exception("netstack ui: a poll failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), max(0.0, self.settings.interval_s - (loop.time() - started)))

    # ------------------------------------------------------------------ handlers
    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    async def topology(self, request: web.Request) -> web.StreamResponse:
        try:
            state = runtime.load_state(self.settings.prefix)
        except NetstackError as exc:
            return _json({"error": str(exc), "testbed": "gone"}, 503)
        doc = layout.graph(state)
        for link in doc["links"]:
            link["actions"] = views.link_actions(self.mods, state, link["name"])
        return _json({"prefix": self.settings.prefix, "topology": state.topology, "run_id":
                      f"{state.topology}@{state.started}", "interval_s": self.settings.interval_s,
                      "reports": "/reports/" if self.settings.reports is not None else None, **doc})

    async def state(self, request: web.Request) -> web.StreamResponse:
        return _json(self.snapshot)

    async def auth(self, request: web.Request) -> web.StreamResponse:
        return _json({"write": self.authorized(request)})

    def _protocol_action(self, prefix: str, body: dict[str, Any]) -> dict[str, Any]:
        return actions.protocol_action(prefix, body, self.mods)

    async def act(self, action: Action, request: web.Request) -> web.StreamResponse:
        """Carry out ``action`` with the request's JSON body, one action at a time; then poll at once."""
        try:
            body = await request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            raise UIInputError(f"the body must be a JSON object: {exc}") from None
        if not isinstance(body, dict):
            raise UIInputError("the body must be a JSON object")
        assert self._lock is not None and self._wake is not None
        async with self._lock:
            result = await asyncio.to_thread(action, self.settings.prefix, body)
        self.impairments_due = float("-inf")  # read the kernel's impairments again at the next poll
        self._wake.set()
        return _json({"ok": True, "result": result})

    async def reports_root(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/reports/")

    async def report(self, request: web.Request) -> web.StreamResponse:
        """A file of the reports directory (a directory: its index.html); nothing outside it."""
        root = self.settings.reports
        if root is None or not root.is_dir():
            return web.Response(status=404, text=f"no reports directory ({root}): 'netstack reproduce' writes one, "
                                                 "or give netstack ui --reports DIR")
        base = root.resolve()
        target = (base / request.match_info["path"]).resolve()
        if target != base and base not in target.parents:
            raise web.HTTPNotFound()
        if target.is_dir():
            target = target / "index.html"
        if not target.is_file():
            raise web.HTTPNotFound()
        return web.FileResponse(target)


def write_token_file(prefix: str, port: int, token: str) -> Path | None:
    """The token in ``<run dir>/ui-<port>.token``, mode 0600 from its creation (None when the run
    has no directory here, e.g. a container deployment's, or it is not ours to write in)."""
    folder = runtime.run_dir(prefix)
    path = folder / f"ui-{port}.token"
    try:
        if not folder.is_dir():
            return None
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return path


async def serve(settings: Settings, ready: Callable[[int], None]) -> None:
    """Serve until SIGINT or SIGTERM; ``ready(port)`` once it listens (the port it got, for 0)."""
    server = UIServer(settings)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        site = web.TCPSite(runner, settings.host, settings.port)
        try:
            await site.start()
        except OSError as exc:
            raise UIError(f"cannot listen on {settings.host} port {settings.port}: {exc.strerror or exc} "
                          "(--port 0 picks a free port)") from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        try:
            ready(runner.addresses[0][1])
            await stop.wait()
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
    finally:
        await runner.cleanup()


__all__ = ["CSP", "STATIC", "Settings", "UIServer", "is_loopback", "serve", "write_token_file"]
