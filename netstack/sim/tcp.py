"""TCP host models in virtual time: the NewReno model (:mod:`.reno`) on simulated hosts.

Live runs use the kernel's TCP; the simulator cannot, so it runs a documented model instead
(``docs/sim.md``, "Host models"). Frames are real Ethernet/IPv4/TCP (``netstack.sim.packets``),
so the switches forward, queue, drop and mark them as they do live traffic.

- :class:`TcpStack`: a host's TCP ports; one port serves many connections (demultiplexed by
  the peer's address and port);
- :func:`connect`: an established connection between two hosts (no handshake, see reno.py);
- :func:`bulk_transfer`: move N bytes one way, goodput and counters (``tcsack-transfer``'s
  ``proto = tcp`` in virtual time);
- :class:`RequestResponse`: the live ``rr-client`` / ``rr-server`` pair as a model: one
  persistent connection, a request, the response, the next request; flow completion times
  (LinkGuardian §4.3, Fig. 10: 143 B flows);
- :class:`FlowArrivals`: an open-loop workload: flows with Poisson arrivals at a load of the
  sender's line rate, sizes from a distribution (:mod:`.workload`), one connection each, FCT
  and slowdown per size class.

Scenarios: ``tcp-rr`` (both runtimes: the kernel's TCP live) and ``tcp-flows`` (virtual time).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..ethernet import WIRE_OVERHEAD_BYTES
from ..traffic import percentiles
from ..validity import Validity
from .packets import PROTO_TCP, TCP_HEADERS, ip_payload_end, tcp_fields
from .reno import RenoConnection, RenoParams, Segment
from .scenario import Context, Scenario, ScenarioError
from .scenarios import host_path, live_prefix
from .workload import FlowSizes, WorkloadError, flow_sizes

if TYPE_CHECKING:
    from .hosts import Host
    from .network import Network


class TcpStack:
    """The TCP ports of one host (``host.services["tcp"]``)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.ports: dict[int, dict[tuple[bytes, int], TcpEndpoint]] = {}
        self.unmatched = 0
        self.malformed = 0
        self._isn = random.Random(f"{host.net.seed}/{host.name}/tcp")

    @classmethod
    def of(cls, host: Host) -> TcpStack:
        stack = host.services.get("tcp")
        if stack is None:
            stack = host.services["tcp"] = cls(host)
        return stack

    def isn(self) -> int:
        """An initial sequence number, drawn from the run's seed (so transfers cross the wrap)."""
        return self._isn.getrandbits(32)

    def add(self, ep: TcpEndpoint) -> None:
        table = self.ports.get(ep.lport)
        if table is None:
            table = self.ports[ep.lport] = {}
            self.host.bind_tcp(ep.lport, self.on_frame)
        key = (ep.peer_ip, ep.rport)
        if key in table:
            raise ValueError(f"{self.host.name}: TCP port {ep.lport} already has a connection to {key}")
        table[key] = ep

    def on_frame(self, frame: bytes) -> None:
        f = tcp_fields(frame)
        if f is None:
            self.malformed += 1
            return
        sport, dport, seq, ack, flags, _window, off = f
        ep = self.ports.get(dport, {}).get((frame[26:30], sport))
        if ep is None:
            self.unmatched += 1
            return
        ep.on_segment(Segment(seq, ack, flags, frame[off:ip_payload_end(frame)]))


class TcpEndpoint:
    """A :class:`RenoConnection` on a host: frames out through the NIC, segments in from the
    stack, its retransmission timer on the event loop. ``on_data(ep)`` runs when bytes arrived
    in order, ``on_acked(ep)`` when everything written has been acknowledged."""

    def __init__(self, host: Host, peer: Host, lport: int, rport: int, conn: RenoConnection) -> None:
        self.host = host
        self.loop = host.loop
        self.peer_ip = peer.ip
        self.lport = lport
        self.rport = rport
        self.conn = conn
        self.flow = host.flow(peer.ip, PROTO_TCP)
        self.on_data: Callable[[TcpEndpoint], None] | None = None
        self.on_acked: Callable[[TcpEndpoint], None] | None = None
        self._timer: int | None = None
        TcpStack.of(host).add(self)

    def write(self, data: bytes) -> None:
        self.conn.write(data)
        self._poll()

    def on_segment(self, seg: Segment) -> None:
        conn = self.conn
        had = conn.unacked
        conn.receive(seg, self.loop.now)
        if conn.received and self.on_data is not None:
            self.on_data(self)
        if had and not conn.unacked and self.on_acked is not None:
            self.on_acked(self)
        self._poll()

    def _tick(self, token: int) -> None:
        if token != self._timer:
            return  # superseded
        self._timer = None
        self._poll()

    def _poll(self) -> None:
        now = self.loop.now
        send, flow, lp, rp = self.host.send, self.flow, self.lport, self.rport
        for s in self.conn.poll(now):
            send(flow.tcp(lp, rp, s.seq, s.ack, s.flags, 65535, s.payload))
        d = self.conn.next_deadline()
        if d is not None and (self._timer is None or d < self._timer):
            self._timer = max(d, now)
            self.loop.call_at(self._timer, self._tick, self._timer)


def connect(client: Host, server: Host, port: int, params: RenoParams | None = None, *,
            isns: tuple[int, int] | None = None) -> tuple[TcpEndpoint, TcpEndpoint]:
    """An established connection from an ephemeral port of ``client`` to ``server``'s ``port``;
    ``isns``: the two ends' initial sequence numbers (default: drawn from the run's seed)."""
    cs, ss = TcpStack.of(client), TcpStack.of(server)
    c_isn, s_isn = isns if isns is not None else (cs.isn(), ss.isn())
    sport = client.ephemeral_port()
    a = TcpEndpoint(client, server, sport, port, RenoConnection(params, isn=c_isn, peer_isn=s_isn))
    b = TcpEndpoint(server, client, port, sport, RenoConnection(params, isn=s_isn, peer_isn=c_isn))
    return a, b


def _run_until(net: Network, done: Callable[[], bool], max_ns: int) -> None:
    loop = net.loop
    end = loop.now + max_ns
    while not done() and loop.next_time() is not None and loop.now <= end:
        loop.run(end, max_events=20_000)


def bulk_transfer(net: Network, src: str, dst: str, data: bytes | int, *, max_ns: int = 60_000_000_000,
                  params: RenoParams | None = None, port: int = 5001,
                  isns: tuple[int, int] | None = None) -> dict[str, Any]:
    """``data`` (bytes, or a number of zero bytes) from ``src`` to ``dst`` on one connection.
    ``done_ns``: when the sender saw the last byte acknowledged (None: not within ``max_ns``);
    ``ok``: the receiver got exactly ``data``, in order, and the sender knows it."""
    payload = bytes(data) if isinstance(data, int) else data
    t0 = net.now
    a, b = connect(net.host(src), net.host(dst), port, params, isns=isns)
    done: list[int] = [] if payload else [t0]  # nothing to send: done at once
    a.on_acked = lambda ep: done.append(ep.loop.now)
    got = bytearray()
    b.on_data = lambda ep: got.extend(ep.conn.read())
    a.write(payload)
    _run_until(net, lambda: bool(done), max_ns)
    done_ns = done[0] - t0 if done else None
    return {"ok": got == payload and done_ns is not None, "done_ns": done_ns, "bytes": len(got),
            "goodput_bps": len(payload) * 8e9 / done_ns if done_ns else None,
            "sender": a.conn.counters(), "receiver": b.conn.counters()}


class RequestResponse:
    """``rr-client`` / ``rr-server`` as a model: on one connection the client writes a request of
    a size drawn from ``sizes``, the server answers with ``response`` bytes (None: as many as the
    request, the live ``rr-server``'s echo), and the client starts the next request when the
    whole response is in. FCT: request written -> response complete, in us."""

    def __init__(self, net: Network, client: str, server: str, *, sizes: FlowSizes, flows: int,
                 response: int | None = None, port: int = 5003, params: RenoParams | None = None,
                 seed: int = 1) -> None:
        if flows < 1:
            raise ValueError("flows must be >= 1")
        self.net = net
        self.sizes = sizes
        self.flows = flows
        self.response = response
        self.rng = random.Random(f"{seed}/rr")
        self.cl, self.sv = connect(net.host(client), net.host(server), port, params)
        self.cl.on_data = self._client_data
        self.sv.on_data = self._server_data
        self._requests: deque[tuple[int, int]] = deque()  # (request bytes, response bytes) in flight
        self._srv_got = 0
        self._cli_got = 0
        self._pending_reply = 0
        self.fct_us: list[float] = []
        self.request_bytes = 0
        self._t0 = 0
        self._start()

    def _start(self) -> None:
        size = self.sizes.sample(self.rng)
        reply = self.response if self.response is not None else size
        self._requests.append((size, reply))
        self.request_bytes += size
        self._cli_got = 0
        self._t0 = self.net.now
        self.cl.write(bytes(size))

    def _server_data(self, ep: TcpEndpoint) -> None:
        self._srv_got += len(ep.conn.read())
        while self._requests and self._srv_got >= self._requests[0][0]:
            size, reply = self._requests.popleft()
            self._srv_got -= size
            self._pending_reply = reply
            ep.write(bytes(reply))

    def _client_data(self, ep: TcpEndpoint) -> None:
        self._cli_got += len(ep.conn.read())
        if self._cli_got >= self._pending_reply:
            self.fct_us.append((self.net.now - self._t0) / 1e3)
            if len(self.fct_us) < self.flows:
                self._start()

    @property
    def done(self) -> bool:
        return len(self.fct_us) >= self.flows

    def result(self) -> dict[str, Any]:
        return {"tool": "rr-client", "flows": len(self.fct_us), "size": self.sizes.name,
                "fct_us": percentiles(self.fct_us), "client": self.cl.conn.counters(),
                "server": self.sv.conn.counters()}


#: flow-size classes the open-loop workload reports FCT for (bytes, upper bound included)
SIZE_CLASSES: tuple[tuple[str, float], ...] = (("<=1 packet", 1460), ("<=100KB", 100_000), ("<=10MB", 10_000_000),
                                              (">10MB", math.inf))


class FlowArrivals:
    """Open-loop flows ``src`` -> ``dst``: Poisson arrivals offering ``load`` x the sender's line
    rate in payload bytes, sizes from ``sizes``, each flow on a connection of its own; a flow
    completes when its last byte reaches the receiver. Slowdown: FCT over the flow's time on an
    empty path (every link's delay, the first packet's store-and-forward at each hop, the rest
    at the slowest link's rate)."""

    def __init__(self, net: Network, src: str, dst: str, *, sizes: FlowSizes, load: float, flows: int,
                 port: int = 5010, params: RenoParams | None = None, seed: int = 1) -> None:
        if not 0 < load <= 1.0:
            raise ValueError(f"load must be in (0, 1], got {load}")
        if flows < 1:
            raise ValueError("flows must be >= 1")
        self.net = net
        self.src, self.dst = src, dst
        self.sizes = sizes
        self.load = load
        self.flows = flows
        self.port = port
        self.params = params or RenoParams()
        self.rng = random.Random(f"{seed}/flows")
        host = net.host(src)
        rate = host.nic.nic.rate if host.nic.nic is not None else 0
        if not rate:
            raise ValueError(f"{src}'s link has no rate: an offered load needs one")
        #: mean time between arrivals (ns) for ``load`` of the line rate
        self.mean_gap_ns = sizes.mean() * 8e9 / (load * rate)
        self._path_links = _path_links(net, src, dst)
        self.started = 0
        self.records: list[tuple[int, int, int]] = []  # (size, start ns, fct ns)
        self.active = 0
        self.active_peak = 0
        net.loop.call_at(net.loop.now, self._arrival)

    def _arrival(self) -> None:
        net = self.net
        now = net.now
        size = self.sizes.sample(self.rng)
        a, b = connect(net.host(self.src), net.host(self.dst), self.port, self.params)
        got = [0]

        def consume(ep: TcpEndpoint, t0: int = now, size: int = size) -> None:
            got[0] += len(ep.conn.read())
            if got[0] >= size:
                ep.on_data = None
                self.active -= 1
                self.records.append((size, t0, net.now - t0))

        b.on_data = consume
        self.started += 1
        self.active += 1
        self.active_peak = max(self.active_peak, self.active)
        a.write(bytes(size))
        if self.started < self.flows:
            gap = self.rng.expovariate(1.0 / self.mean_gap_ns)
            net.loop.call_at(now + max(1, round(gap)), self._arrival)

    @property
    def done(self) -> bool:
        return len(self.records) >= self.flows

    def ideal_ns(self, size: int) -> float:
        """The flow's completion time alone on the path (class docstring)."""
        mss = self.params.mss
        packets = max(1, math.ceil(size / mss))
        per_packet = TCP_HEADERS + WIRE_OVERHEAD_BYTES  # headers, FCS, preamble and gap
        wire = size + packets * per_packet
        first = min(size, mss) + per_packet
        slowest = min(rate for rate, _ in self._path_links)
        return (sum(delay for _, delay in self._path_links) + sum(first * 8e9 / rate for rate, _ in self._path_links)
                + (wire - first) * 8e9 / slowest)

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"flows": len(self.records), "started": self.started, "workload": self.sizes.name,
                               "load": self.load, "mean_size": round(self.sizes.mean()),
                               "active_peak": self.active_peak}
        fct = [f / 1e3 for _, _, f in self.records]
        slow = [f / self.ideal_ns(s) for s, _, f in self.records]
        out["fct_us"] = percentiles(fct)
        out["slowdown"] = percentiles(slow)
        classes: dict[str, Any] = {}
        lo = 0.0
        for name, hi in SIZE_CLASSES:
            sel = [(f / 1e3, f / self.ideal_ns(s)) for s, _, f in self.records if lo < s <= hi]
            if sel:
                classes[name] = {"flows": len(sel), "fct_us": percentiles([x for x, _ in sel]),
                                 "slowdown": percentiles([y for _, y in sel])}
            lo = hi
        out["by_size"] = classes
        return out


def _path_links(net: Network, src: str, dst: str) -> list[tuple[int, int]]:
    """(rate, delay) of every link from ``src`` to ``dst``."""
    path = host_path(net.topology, src, dst)
    out = []
    for u, v in itertools.pairwise(path):
        link = next(lk for lk in net.topology.links_of(u) if lk.peer(u).node == v)
        out.append((link.rate_bps, link.delay_ns))
    return out


# ----------------------------------------------------------------------------- scenarios
RR_PARAMS: dict[str, Any] = {"src": "h1", "dst": "h2", "flows": 2000, "size": "143", "response": 0,
                             "port": 5003, "min_rto_ms": 200.0}
FLOW_PARAMS: dict[str, Any] = {"src": "h1", "dst": "h2", "workload": "websearch", "load": 0.5, "flows": 500,
                               "port": 5010, "min_rto_ms": 200.0}


def _reno(p: dict[str, Any], scenario: str) -> RenoParams:
    rto = int(p["min_rto_ms"] * 1e6)
    if rto <= 0:
        raise ScenarioError(f"scenario {scenario}: min_rto_ms must be > 0")
    return RenoParams(min_rto_ns=rto, init_rto_ns=max(rto, RenoParams.init_rto_ns))


def _sizes(spec: Any, scenario: str) -> FlowSizes:
    try:
        return flow_sizes(spec)
    except WorkloadError as exc:
        raise ScenarioError(f"scenario {scenario}: {exc}") from None


def rr_sim(net: Network, ctx: Context) -> dict[str, Any]:
    p = ctx.params
    if p["flows"] < 1:
        raise ScenarioError("scenario tcp-rr: flows must be >= 1")
    rr = RequestResponse(net, p["src"], p["dst"], sizes=_sizes(p["size"], "tcp-rr"), flows=int(p["flows"]),
                         response=int(p["response"]) or None, port=int(p["port"]), params=_reno(p, "tcp-rr"),
                         seed=ctx.seed)
    _run_until(net, lambda: rr.done, ctx.duration_ns or 3600 * 10**9)
    return rr.result()


def rr_live(ctx: Context) -> dict[str, Any]:
    """The kernel's TCP: ``rr-server`` / ``rr-client`` in the hosts' namespaces (fixed sizes only)."""
    from .. import experiment, runtime

    p = ctx.params
    if not str(p["size"]).isdigit() or int(p["response"]):
        raise ScenarioError("scenario tcp-rr live: the rr tools echo fixed sizes; give size=BYTES and response=0")
    topo = ctx.topology
    prefix = live_prefix(ctx)
    ctx.progress(f"live: bringing up {topo.name} under prefix {prefix}")
    state = runtime.up(topo, prefix)
    try:
        size = str(int(p["size"]))
        server = experiment.start_tool(state, p["dst"], "rr-server", "--port", str(p["port"]), "--size", size)
        dst_ip = str(topo.node(p["dst"]).ip.ip)  # type: ignore[union-attr]
        extra = ["--max-seconds", str(ctx.duration_ns / 1e9)] if ctx.duration_ns else []
        lag = experiment.LagWindow(prefix).start()
        res = experiment.run_tool(state, p["src"], "rr-client", "--dst", dst_ip, "--port", str(p["port"]),
                                  "--flows", str(p["flows"]), "--size", size, *extra)
        lag.stop()
        lag.add_tool(f"{p['src']} rr-client", res)
        lag.add_tool(f"{p['dst']} rr-server", experiment.finish_tool(server))
        # every exchange planned took place (a duration may cut the run short on purpose), and an
        # FCT tail is the network's, not a process waiting for the CPU (netstack.validity)
        v = Validity()
        if not ctx.duration_ns:
            v.planned("flows completed", int(res.get("flows", 0)), int(p["flows"]), share=1.0)
        lag.check(v)
        return v.annotate(res)
    finally:
        runtime.down(prefix)


def flows_sim(net: Network, ctx: Context) -> dict[str, Any]:
    p = ctx.params
    try:
        fa = FlowArrivals(net, p["src"], p["dst"], sizes=_sizes(p["workload"], "tcp-flows"), load=float(p["load"]),
                          flows=int(p["flows"]), port=int(p["port"]), params=_reno(p, "tcp-flows"), seed=ctx.seed)
    except ValueError as exc:
        raise ScenarioError(f"scenario tcp-flows: {exc}") from None
    _run_until(net, lambda: fa.done, ctx.duration_ns or 3600 * 10**9)
    return fa.result()


SCENARIOS = [
    Scenario("tcp-rr", "request/response over one TCP connection (sim: the NewReno model; live: rr-client/rr-server "
             "on the kernel's TCP): FCT percentiles; size = bytes, a shipped workload or a CDF file", RR_PARAMS,
             run_sim=rr_sim, run_live=rr_live),
    Scenario("tcp-flows", "open-loop TCP flows (NewReno model) with Poisson arrivals at a load of the sender's line "
             "rate, sizes from a workload: FCT and slowdown by flow size", FLOW_PARAMS, run_sim=flows_sim),
]

__all__ = ["SCENARIOS", "FlowArrivals", "RequestResponse", "TcpEndpoint", "TcpStack", "bulk_transfer", "connect"]
