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
its effect without waiting for the next period. The blocking work runs in the server's own
threads (never the loop's default executor, which ``asyncio.run`` would wait for without a bound),
each job waited for a bounded time; shutdown cancels the poller and waits a bounded time for it
and for the jobs still running, so that it always ends.

Bound to a loopback address, the server answers only requests addressed to a loopback name (a
web page elsewhere cannot reach it by DNS rebinding); state changes need the token on any address.
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
from concurrent.futures import Future, ThreadPoolExecutor
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
#: the longest an action (link, impairment, a protocol's action) is waited for: then a 504, and
#: the next action is refused (409) until it has finished in its thread
ACTION_TIMEOUT_S = 60.0
#: after this long, a poll still running is logged (it is not started again until it ends)
POLL_WARN_S = 30.0
#: how long shutdown waits for the poller, then for the jobs still running in their threads
STOP_TIMEOUT_S = 5.0
#: the server's threads: one poll, one action, and room for the page's file reads
THREADS = 4
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
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: set[Future[Any]] = set()  # running in self._pool
        self._action: Future[Any] | None = None  # the latest action's job
        self._closing = False

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
        self._closing = False
        self._pool = ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="netstack-ui")
        self._poller = asyncio.get_running_loop().create_task(self.poll_forever(), name="netstack-ui-poller")

    async def _stop(self, app: web.Application) -> None:
        """Cancel the poller and wait for it, then for the jobs still in their threads: each wait
        bounded (STOP_TIMEOUT_S), so that shutdown always ends (a job that does not end is logged
        and left to its own timeouts: its thread is not waited for)."""
        self._closing = True
        poller, self._poller = self._poller, None
        if poller is not None:
            poller.cancel()
            done, _ = await asyncio.wait({poller}, timeout=STOP_TIMEOUT_S)
            if not done:
                log.warning("netstack ui: the poller did not stop within %g s", STOP_TIMEOUT_S)
            elif not poller.cancelled() and poller.exception() is not None:
                log.error("netstack ui: the poller failed", exc_info=poller.exception())
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
            running = [asyncio.wrap_future(f) for f in self._jobs if not f.done()]
            if running:  # (the loop goes on meanwhile: a job may be waiting for an answer it serves)
                _, late = await asyncio.wait(running, timeout=STOP_TIMEOUT_S)
                for f in late:
                    f.cancel()  # (the asyncio side only: the thread ends by its own timeouts)
                if late:
                    log.warning("netstack ui: %d job(s) still running after %g s, not waited for",
                                len(late), STOP_TIMEOUT_S)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """``fn(*args)`` in the server's threads (never the loop's default executor)."""
        if self._pool is None or self._closing:
            raise web.HTTPServiceUnavailable(reason="the server is stopping")
        job = self._pool.submit(fn, *args)
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)
        return job

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

    async def _poll(self) -> dict[str, Any]:
        """:meth:`poll_once` in a thread. One at a time: a poll that takes longer than POLL_WARN_S
        is logged and waited for (its requests and subprocesses have timeouts of their own), never
        started again alongside; a cancel (shutdown) returns at once."""
        job: asyncio.Future[dict[str, Any]] = asyncio.wrap_future(self._submit(self.poll_once))
        done, _ = await asyncio.wait({job}, timeout=POLL_WARN_S)
        if not done:
            log.warning("netstack ui: a poll has been running for %g s", POLL_WARN_S)
        return await job

    async def poll_forever(self) -> None:
        """Poll, then wait until the next period or an action's wake-up, until cancelled.

        (No ``asyncio.wait_for`` around the wake-up: before Python 3.12 it swallows a cancel that
        comes while the awaited event has just been set, and the poller would then never stop.)"""
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        while not self._closing:
            started = loop.time()
            self._wake.clear()
            try:
                self.snapshot = await self._poll()
            except Exception:  # a bug in a view must not stop the page: logged, next poll
                log.exception("netstack ui: a poll failed")
            if self._closing:
                break
            timer = loop.call_at(started + self.settings.interval_s, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()

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
            if self._action is not None and not self._action.done():
                return _json({"error": f"the previous action has been running for more than {ACTION_TIMEOUT_S:g} s "
                                       "and is still running: try again later"}, 409)
            self._action = self._submit(action, self.settings.prefix, body)
            job = asyncio.wrap_future(self._action)
            try:
                done, _ = await asyncio.wait({job}, timeout=ACTION_TIMEOUT_S)
            finally:
                self.impairments_due = float("-inf")  # read the kernel's impairments again at the next poll
                self._wake.set()
            if not done:
                return _json({"error": f"the action did not finish within {ACTION_TIMEOUT_S:g} s; it goes on "
                                       "(the page shows its effect when it ends)"}, 504)
            result = job.result()
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
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=STOP_TIMEOUT_S)
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
