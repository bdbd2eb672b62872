"""Prometheus metrics of a daemon: its ``status`` answer as Prometheus text, served over HTTP.

Every number a daemon reports in ``netstack status`` becomes one sample, under the name it has
there: ``ports.p-sw2.rx_frames`` is ``netstack_rx_frames{node="sw1",port="p-sw2"}``. The
levels of the status object that are keyed by a name the topology or the protocol chose (ports,
classes, protocols, QPs...) become labels (:data:`LABEL_OF`); the fixed levels between them
join the name (``receiver``, ``sender``...), except ``counters``, which only groups. Booleans are
0/1. Text is left out (Prometheus samples are numbers). prometheus-client renders the text
(``generate_latest``) and parses it in the tests; the HTTP side is a few lines on the daemon's
own asyncio loop, so a scrape reads the counters between two events, never while one runs.

The listening socket is made in the namespace the runtime hands the daemon as an open file (its
own, the machine's: :data:`METRICS_NETNS_ENV` names ``/proc/self/fd/N``), so a Prometheus on
the machine scrapes ``127.0.0.1:PORT`` although the daemon runs in a node's namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import Callable, Iterator
from typing import Any

#: status keys whose children are named by the topology or the protocol: child key -> label
LABEL_OF = {"ports": "port", "classes": "class", "protocols": "protocol", "queues": "queue", "qps": "qp",
            "regions": "region", "links": "link", "peers": "peer", "flows": "flow", "inputs": "input",
            "outputs": "output", "daemons": "daemon", "reporters": "reporter"}
#: status keys two levels deep in names, whose numbers are one metric: key -> (outer label,
#: inner label, metric name); a switch's ``ecmp`` ({destination: {port: frames}}) is
#: ``netstack_ecmp_frames{dst="h3",port="p-spine1"}``
NESTED = {"ecmp": ("dst", "port", "ecmp_frames")}
#: levels that only group, left out of the names
SILENT = {"counters"}
PREFIX = "netstack_"
_BAD = re.compile(r"[^a-zA-Z0-9_]")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: the environment ``netstack up`` starts a daemon with: ``HOST:PORT`` to serve metrics on, and
#: the namespace (a path) the listening socket is made in
METRICS_ENV = "NETSTACK_METRICS"
METRICS_NETNS_ENV = "NETSTACK_METRICS_NETNS"


def samples(status: dict[str, Any], labels: dict[str, str]) -> Iterator[tuple[str, dict[str, str], float]]:
    """``(metric name, labels, value)`` for every number in ``status``."""
    yield from _walk(status, [], dict(labels))


def _walk(obj: Any, name: list[str], labels: dict[str, str]) -> Iterator[tuple[str, dict[str, str], float]]:
    if isinstance(obj, int | float):  # bool included: 0/1
        yield _name(name), labels, float(obj)
    elif isinstance(obj, dict) and name and name[-1] in NESTED:
        outer, inner, metric = NESTED[name[-1]]
        for a, sub in obj.items():
            for b, value in (sub.items() if isinstance(sub, dict) else ()):
                yield from _walk(value, [*name[:-1], metric], {**labels, outer: str(a), inner: str(b)})
    elif isinstance(obj, dict):
        label = LABEL_OF.get(name[-1]) if name else None
        for key, value in obj.items():
            if label is not None:
                yield from _walk(value, name[:-1], {**labels, label: str(key)})
            elif key in SILENT:
                yield from _walk(value, name, labels)
            else:
                yield from _walk(value, [*name, str(key)], labels)
    elif isinstance(obj, list) and obj and all(isinstance(v, int | float) and not isinstance(v, bool) for v in obj):
        # per-class arrays (tx_frames_class...): one sample per index
        for i, value in enumerate(obj):
            yield _name(name), {**labels, "index": str(i)}, float(value)


def _name(parts: list[str]) -> str:
    return PREFIX + _BAD.sub("_", "_".join(parts) or "value")


def render(status: dict[str, Any], labels: dict[str, str]) -> bytes:
    """The Prometheus text of ``status`` (prometheus-client's exposition format)."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    families: dict[str, GaugeMetricFamily] = {}
    label_names: dict[str, list[str]] = {}
    rows = list(samples(status, labels))
    for name, lab, _ in rows:
        names = label_names.setdefault(name, [])
        names.extend(k for k in lab if k not in names)
    for name, lab, value in rows:
        fam = families.get(name)
        if fam is None:
            fam = families[name] = GaugeMetricFamily(name, f"netstack status: {name[len(PREFIX):]}",
                                                     labels=label_names[name])
        fam.add_metric([lab.get(k, "") for k in label_names[name]], value)

    class _Snapshot:
        def collect(self) -> Iterator[GaugeMetricFamily]:
            yield from families.values()

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot())  # type: ignore[arg-type]
    return generate_latest(registry)


def listening_socket(host: str, port: int, netns: str | None) -> socket.socket:
    """A TCP listener on ``host:port``, made in namespace ``netns`` (a path; None: the caller's)."""
    from ..topo.nsenter import in_netns

    ctx = in_netns(netns) if netns else contextlib.nullcontext()
    with ctx:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(16)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


async def serve(sock: socket.socket, status: Callable[[], dict[str, Any]], labels: dict[str, str]) -> asyncio.Server:
    """Answer ``GET /metrics`` on ``sock`` from the running loop (and ``/`` with a pointer)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5.0)
            parts = request.split(b" ", 2)
            path = parts[1].split(b"?")[0] if len(parts) > 1 else b""
            if parts[0] != b"GET":
                code, body, ctype = b"405 Method Not Allowed", b"only GET\n", b"text/plain"
            elif path == b"/metrics":
                code, body, ctype = b"200 OK", render(status(), labels), CONTENT_TYPE.encode()
            else:
                code, body, ctype = b"404 Not Found", b"metrics are at /metrics\n", b"text/plain"
            writer.write(b"HTTP/1.1 " + code + b"\r\nContent-Type: " + ctype + b"\r\nContent-Length: "
                         + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            pass  # a scraper that hung up or sent garbage: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    return await asyncio.start_server(handle, sock=sock)


def scrape(address: str, timeout: float = 3.0) -> str:
    """``GET http://ADDRESS/metrics``: the text a daemon serves."""
    import urllib.request

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as r:
        return str(r.read().decode())


async def serve_from_env(status: Callable[[], dict[str, Any]], labels: dict[str, str],
                         say: Callable[[str], None] = print) -> asyncio.Server | None:
    """In a daemon: serve its metrics where ``netstack up`` said (:data:`METRICS_ENV`), or not at
    all. A port that cannot be had is said on the log and the daemon runs on without metrics."""
    import os

    where = os.environ.get(METRICS_ENV, "")
    if not where:
        return None
    host, _, port = where.rpartition(":")
    try:
        sock = listening_socket(host or "127.0.0.1", int(port), os.environ.get(METRICS_NETNS_ENV) or None)
        server = await serve(sock, status, labels)
    except (OSError, ValueError) as exc:
        say(f"metrics: cannot serve on {where}: {exc}; running without metrics")
        return None
    say(f"metrics: serving on http://{where}/metrics")
    return server
