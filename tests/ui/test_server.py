"""``netstack ui``'s server without a browser and without namespaces: its API against a fake testbed
whose daemons are real control sockets (``netstack.io.control.ControlServer``) with canned answers.

What the page relies on: the topology, link states (down, corrupting, protected), port views, a
daemon that does not answer, a testbed that is gone; the token (401 without it, compared as a
whole); bad input (400 with a message, nothing changed); the reports directory (nothing outside
it); the static files (no URL of elsewhere); the command's errors."""

from __future__ import annotations

import ast
import asyncio
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from aiohttp.test_utils import TestClient, TestServer

from netstack import cli, runtime
from netstack.io.control import ControlServer
from netstack.runtime import Daemon, RunLink, RunPort, RunState, write_state
from netstack.ui import INSTALL_HINT, actions, snapshot
from netstack.ui import server as uiserver

ROOT = Path(__file__).resolve().parent.parent.parent
PREFIX = "uitest"
TOKEN = "secret-" + "x" * 25
AUTH = {"Authorization": f"Bearer {TOKEN}"}
DEAD_PID = 2 ** 22 + 7  # above pid_max's default: no such process
#: the longest a fixture's teardown may take (the server's own shutdown is bounded by STOP_TIMEOUT_S)
TEARDOWN_S = 20.0
#: what the kernel backends report on sw1 -> sw2 (snapshot.kernel_impairments is replaced)
NFT = {"sw1>sw2": {"link": "sw1-sw2", "backend": "nft", "corrupt": 0.01, "loss": 0.0, "corrupted": 3, "dropped": 0}}


def _port(ifname: str, carrier: bool, n: int) -> dict[str, Any]:
    return {"ifname": ifname, "carrier": carrier, "rx_frames": 10 * n, "tx_frames": 5 * n, "rx_bytes": 1000 * n,
            "tx_bytes": 500 * n, "fcs_errors": 0, "queue_drops": 0, "buffer_used": 100, "buffer_bytes": 1000,
            "paused": [False] * 8, "impairment": None}


class Sw1:
    """sw1's daemon: ports to h1 and sw2 up, to h3 without carrier; TCD undetermined on p-sw2;
    LinkGuardian's sender on p-sw2; its counters grow by one step per status."""

    def __init__(self) -> None:
        self.n = 0

    def status(self, req: dict[str, Any]) -> dict[str, Any]:
        self.n += 1
        tcd = {"marker": "tcd", "state": "undetermined", "counters": {"class": 3, "marked_ue": self.n}}
        return {"switch": "sw1", "ports": {"p-h1": _port("p-h1", True, self.n), "p-sw2": _port("p-sw2", True, self.n),
                                           "p-h3": _port("p-h3", False, self.n)},
                "protocols": {"tcd": {"ports": {"p-sw2": tcd}}}}

    def handlers(self) -> dict[str, Any]:
        lg = {"p-sw2": {"sender": {"enabled": True, "params": {"mode": "blocking", "n_copies": 2,
                                                               "tx_buffer_limit_bytes": 200000},
                                   "counters": {"retransmissions": 4, "tx_buffer_bytes": 1500, "tx_buffer_frames": 1}}}}
        return {"status": self.status, "lg_status": lambda req: lg, "dta_status": lambda req: {"enabled": False}}


def _state(sock: Path) -> RunState:
    nodes = ("h1", "h2", "h3", "c1", "sw1", "sw2")
    ends = [("h1", "h1-sw1", "eth0", "sw1"), ("sw1", "h1-sw1", "p-h1", "h1"), ("sw1", "sw1-sw2", "p-sw2", "sw2"),
            ("sw2", "sw1-sw2", "p-sw1", "sw1"), ("sw2", "sw2-h2", "p-h2", "h2"), ("h2", "sw2-h2", "eth0", "sw2"),
            ("sw2", "sw2-c1", "p-c1", "c1"), ("c1", "sw2-c1", "eth0", "sw2"), ("sw1", "sw1-h3", "p-h3", "h3"),
            ("h3", "sw1-h3", "eth0", "sw1")]
    links = {name: RunLink(a, b, 10**8, 10_000, 1500, a.startswith("sw") and b.startswith("sw"))
             for name, a, b in (("h1-sw1", "h1", "sw1"), ("sw1-sw2", "sw1", "sw2"), ("sw2-h2", "sw2", "h2"),
                                ("sw2-c1", "sw2", "c1"), ("sw1-h3", "sw1", "h3"))}
    return RunState(
        prefix=PREFIX, topology="fake", started=1.0, namespaces={n: f"{PREFIX}-{n}" for n in nodes},
        ports=[RunPort(node, link, f"{PREFIX}-{node}", ifname, "02:00:00:00:00:01", peer, False)
               for node, link, ifname, peer in ends],
        hosts={"h1": "10.0.0.1/24", "h2": "10.0.0.2/24", "h3": "10.0.0.3/24", "c1": "10.0.0.100/24"}, links=links,
        daemons=[Daemon("sw1", "switch", os.getpid(), str(sock / "sw1.sock"), "", "sw1"),
                 Daemon("sw2", "switch", DEAD_PID, str(sock / "sw2.sock"), "/x/sw2.log", "sw2"),
                 Daemon("c1", "collector", os.getpid(), str(sock / "c1.sock"), "", "c1")])


@pytest_asyncio.fixture
async def bed(tmp_path, monkeypatch):
    """The fake testbed: its run state in a run directory of its own, sw1 and c1 answering, sw2 dead."""
    sock = Path(tempfile.mkdtemp(prefix="nsui", dir="/tmp"))  # (a Unix socket path has at most 107 bytes)
    run = tmp_path / "run"
    (run / PREFIX).mkdir(parents=True)
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(run))
    monkeypatch.setenv("NETSTACK_RUNTIME", "netns")
    monkeypatch.setattr(runtime, "stale_reason", lambda prefix: None)  # (no namespaces here)
    monkeypatch.setattr(snapshot, "kernel_impairments", lambda prefix: NFT)
    state = _state(sock)
    write_state(runtime.state_path(PREFIX), state)
    collector = {"collector": "c1", "regions": {"keywrite": {"writes": 5, "atomics": 1}}, "responses_sent": 6}
    servers = [ControlServer(str(sock / "sw1.sock"), Sw1().handlers()),
               ControlServer(str(sock / "c1.sock"), {"status": lambda req: collector})]
    for s in servers:
        await s.start()
    reports = tmp_path / "reports"
    (reports / "fig").mkdir(parents=True)
    (reports / "index.html").write_text("<html><body><img src='fig/a.png'></body></html>")
    (reports / "fig" / "a.png").write_bytes((ROOT / "docs" / "img" / "tcd-fig3.png").read_bytes())
    (tmp_path / "secret.txt").write_text("outside the reports")
    try:
        yield {"state": state, "reports": reports, "run": run}
    finally:
        try:
            for s in servers:
                await _bounded(f"closing {s.path}", s.close())
        finally:
            shutil.rmtree(sock, ignore_errors=True)


async def _bounded(what: str, aw: Awaitable[Any]) -> None:
    """Await ``aw`` for at most TEARDOWN_S, in a task of its own waited for with ``asyncio.wait``
    (which holds even if something inside swallows a cancel); then fail, naming the tasks left."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=TEARDOWN_S)
    if not done:
        task.cancel()
        me = asyncio.current_task()
        left = [f"{t.get_name()}: {t.get_coro()!r}" for t in asyncio.all_tasks() if t is not me]
        pytest.fail(f"{what} did not end within {TEARDOWN_S:g} s; tasks left: {left}")
    task.result()


@pytest_asyncio.fixture
async def client(bed):
    ui = uiserver.UIServer(uiserver.Settings(prefix=PREFIX, token=TOKEN, interval_s=0.1, reports=bed["reports"]))
    c = TestClient(TestServer(ui.app()))
    await c.start_server()
    try:
        yield c
    finally:
        await _bounded("the server's shutdown", c.close())
        assert ui._poller is None and not [j for j in ui._jobs if not j.done()]  # nothing left running


async def _state_after(client: TestClient, seq: int) -> dict[str, Any]:
    """The snapshot once the poller has made ``seq`` of them."""
    for _ in range(100):
        resp = await client.get("/api/state")
        doc = await resp.json()
        if doc.get("seq", 0) >= seq:
            return doc
        await asyncio.sleep(0.05)
    raise AssertionError(f"no snapshot {seq}: {doc}")


# ----------------------------------------------------------------------------- reading


@pytest.mark.asyncio
async def test_the_topology_has_every_node_and_link_in_layers(client, bed):
    resp = await client.get("/api/topology")
    assert resp.status == 200 and resp.headers["Cache-Control"] == "no-store"
    doc = await resp.json()
    nodes = {n["name"]: n for n in doc["nodes"]}
    assert set(nodes) == set(bed["state"].namespaces) and {x["name"] for x in doc["links"]} == set(bed["state"].links)
    assert {n: v["kind"] for n, v in nodes.items()} == {"h1": "host", "h2": "host", "h3": "host", "c1": "collector",
                                                         "sw1": "switch", "sw2": "switch"}
    # other kinds on top, then the switches, then the hosts; each row left to right under its switch
    assert nodes["c1"]["y"] < nodes["sw1"]["y"] == nodes["sw2"]["y"] < nodes["h1"]["y"]
    assert nodes["sw1"]["x"] < nodes["sw2"]["x"] and nodes["h1"]["x"] < nodes["h2"]["x"]
    actions_of = {x["name"]: [a["id"] for a in x["actions"]] for x in doc["links"]}
    assert "linkguardian:enable" in actions_of["sw1-sw2"] and actions_of["h1-sw1"] == []


@pytest.mark.asyncio
async def test_the_state_has_link_states_views_and_an_unreachable_daemon(client):
    doc = await _state_after(client, 3)
    assert doc["testbed"] == "up" and doc["interval_s"] == 0.1
    links = doc["links"]
    assert links["h1-sw1"]["state"] == "up" and links["sw1-h3"]["state"] == "down"
    assert links["sw2-h2"]["state"] == "unknown"  # its only switch end does not answer
    assert links["sw1-sw2"]["corrupting"] and not links["h1-sw1"]["corrupting"]
    assert links["sw1-sw2"]["marks"] == {"protected": ["LinkGuardian sender sw1/p-sw2"]}
    assert doc["nodes"]["sw2"]["status"] == "unreachable"
    assert "not running" in doc["nodes"]["sw2"]["daemons"]["sw2"]["error"]
    assert doc["nodes"]["sw1"]["status"] == "ok" and doc["nodes"]["h1"]["status"] == "host"
    port = doc["ports"]["sw1/p-sw2"]
    assert port["rates"]["rx_frames"] > 0  # sw1's counters grow by 10 frames a poll
    tcd = next(v for v in port["views"] if v["protocol"] == "tcd")
    assert tcd["state"]["value"] == "undetermined" and tcd["state"]["tone"] == "warn"
    assert tcd["state"]["timeline"][0][1] == "undetermined"
    lg = next(v for v in port["views"] if v["protocol"] == "linkguardian")
    assert lg["gauge"] == {"label": "Tx buffer (1 frames)", "value": 1500, "max": 200000, "unit": "B"}
    assert {"label": "repairs (retransmitted copies)", "count": 4, "per_s": 0.0} in lg["rates"]
    collector = doc["nodes"]["c1"]["views"][0]
    assert collector["title"] == "DTA collector" and collector["rates"][0]["count"] == 5


@pytest.mark.asyncio
async def test_a_testbed_that_is_gone_is_said_so(client, bed):
    await _state_after(client, 1)
    runtime.state_path(PREFIX).unlink()
    for _ in range(100):
        doc = await (await client.get("/api/state")).json()
        if doc["testbed"] == "gone":
            break
        await asyncio.sleep(0.05)
    assert doc["testbed"] == "gone" and f"prefix '{PREFIX}'" in doc["message"]
    resp = await client.get("/api/topology")
    assert resp.status == 503 and "no topology is running" in (await resp.json())["error"]


# ----------------------------------------------------------------------------- shutdown


def _bare_server(monkeypatch: pytest.MonkeyPatch, poll: Any) -> uiserver.UIServer:
    ui = uiserver.UIServer(uiserver.Settings(prefix=PREFIX, token=TOKEN, interval_s=0.1), mods={})
    monkeypatch.setattr(ui, "poll_once", poll)
    return ui


async def _stop_within(ui: uiserver.UIServer, seconds: float) -> tuple[bool, asyncio.Task[None]]:
    """``ui``'s shutdown: whether it ended within ``seconds``; its poller stopped in any case (a
    poller that outlived its cancel is cancelled again, so that a failing test does not hang)."""
    poller = ui._poller
    assert poller is not None
    stop = asyncio.ensure_future(ui._stop(None))  # (what aiohttp's cleanup calls)
    done, _ = await asyncio.wait({stop}, timeout=seconds)
    for _ in range(100):
        if poller.done():
            break
        poller.cancel()
        await asyncio.sleep(0.01)
    await asyncio.wait({stop}, timeout=1.0)
    return bool(done), poller


@pytest.mark.asyncio
@pytest.mark.parametrize("turns", range(4))
async def test_the_poller_stops_when_the_server_stops_just_after_an_action(monkeypatch, turns):
    """An action wakes the poller; the server stops ``turns`` loop turns later. (The hang this
    guards against: Python 3.11's ``asyncio.wait_for`` swallowed a cancel that came while the
    wake-up it waited for had just happened, so the poller polled on and the shutdown, awaiting
    it, never ended.)"""
    ui = _bare_server(monkeypatch, lambda: {})
    await ui._start(None)
    try:
        await asyncio.sleep(0.05)  # the poller waits for its next period
        assert ui._wake is not None
        ui._wake.set()
        for _ in range(turns):
            await asyncio.sleep(0)
        ended, poller = await _stop_within(ui, 3.0)
    finally:
        if ui._poller is not None:
            ui._poller.cancel()
    assert ended, "the shutdown did not end: the poller swallowed its cancel"
    assert poller.cancelled()


@pytest.mark.asyncio
async def test_a_poll_stuck_in_its_thread_does_not_hold_the_shutdown(monkeypatch):
    """A poll that does not return (a daemon or a tool that hangs): shutdown waits for it a bounded
    time only, and the loop's default executor (which asyncio.run waits for without a bound) is
    never used."""
    release = threading.Event()
    entered = threading.Event()

    def stuck() -> dict[str, Any]:
        entered.set()
        release.wait(30)
        return {}

    monkeypatch.setattr(uiserver, "STOP_TIMEOUT_S", 0.3)
    ui = _bare_server(monkeypatch, stuck)
    await ui._start(None)
    try:
        for _ in range(200):
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        assert entered.is_set() and any(t.name.startswith("netstack-ui") for t in threading.enumerate())
        assert asyncio.get_running_loop()._default_executor is None  # type: ignore[attr-defined]
        t0 = time.monotonic()
        ended, poller = await _stop_within(ui, 5.0)
        took = time.monotonic() - t0
    finally:
        release.set()
    assert ended and poller.cancelled() and took < 2.0, took


@pytest.mark.asyncio
async def test_an_action_that_does_not_end_is_a_504_and_the_next_one_waits(client, monkeypatch):
    from netstack import faults

    release = threading.Event()
    monkeypatch.setattr(uiserver, "ACTION_TIMEOUT_S", 0.2)
    monkeypatch.setattr(faults, "run_state", lambda prefix: runtime.load_state(prefix))
    monkeypatch.setattr(faults, "set_link", lambda *a: release.wait(30) and {"state": "down"})
    try:
        resp = await client.post("/api/link", json={"link": "sw1-sw2", "action": "down"}, headers=AUTH)
        assert resp.status == 504 and "did not finish" in (await resp.json())["error"]
        resp = await client.post("/api/link", json={"link": "sw1-sw2", "action": "up"}, headers=AUTH)
        assert resp.status == 409 and "still running" in (await resp.json())["error"]
    finally:
        release.set()
    for _ in range(100):
        resp = await client.post("/api/link", json={"link": "sw1-sw2", "action": "up"}, headers=AUTH)
        if resp.status != 409:
            break
        await asyncio.sleep(0.02)
    assert resp.status == 200 and (await resp.json())["result"] == {"state": "down"}


# ----------------------------------------------------------------------------- the token


@pytest.mark.asyncio
@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                                     {"Authorization": f"Bearer {TOKEN[:-1]}"}, {"Authorization": "Bearer"}])
async def test_changes_without_the_token_are_refused_401(client, monkeypatch, headers):
    called = []
    monkeypatch.setattr(actions, "set_link", lambda *a: called.append(a) or {})
    for path in ("/api/link", "/api/impair", "/api/action"):
        resp = await client.post(path, json={"link": "sw1-sw2", "action": "down"}, headers=headers)
        assert resp.status == 401 and "token" in (await resp.json())["error"]
        assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert called == []
    assert (await (await client.get("/api/auth", headers=headers)).json()) == {"write": False}


@pytest.mark.asyncio
async def test_with_the_token_changes_go_to_the_library(client, monkeypatch):
    from netstack import faults, impairctl
    from netstack.linkguardian import control as lg

    seen: list[Any] = []
    monkeypatch.setattr(faults, "run_state", lambda prefix: runtime.load_state(prefix))
    monkeypatch.setattr(faults, "set_link", lambda *a: seen.append(("link", *a)) or {"state": "down"})
    monkeypatch.setattr(impairctl, "impair_link", lambda *a: seen.append(("impair", *a)) or [])
    monkeypatch.setattr(lg, "enable_link", lambda *a, **k: seen.append(("lg", *a, k)) or {"ok": 1})
    assert (await (await client.get("/api/auth", headers=AUTH)).json()) == {"write": True}
    for path, body in (("/api/link", {"link": "sw1-sw2", "action": "down"}),
                       ("/api/impair", {"link": "sw1-sw2", "corrupt": 0.01, "direction": "sw1>sw2"}),
                       ("/api/action", {"link": "sw1-sw2", "action": "linkguardian:enable-nb"})):
        resp = await client.post(path, json=body, headers=AUTH)
        assert resp.status == 200, await resp.text()
        assert (await resp.json())["ok"] is True
    assert seen[0] == ("link", PREFIX, "sw1-sw2", False, "both")
    assert seen[1][:4] == ("impair", PREFIX, "sw1-sw2", "sw1>sw2") and seen[1][4].corrupt == 0.01
    assert seen[2] == ("lg", PREFIX, "sw1-sw2", {"mode": "nb"})


@pytest.mark.asyncio
@pytest.mark.parametrize(("path", "body", "says"), [
    ("/api/link", b"{not json", "JSON object"),
    ("/api/link", b"[1, 2]", "JSON object"),
    ("/api/link", {"link": "nosuch", "action": "down"}, "no link 'nosuch'"),
    ("/api/link", {"link": "sw1-sw2", "action": "sideways"}, "'action' must be"),
    ("/api/link", {"link": "sw1-sw2", "action": "down", "end": "Z"}, "--end"),
    ("/api/link", {"link": 7, "action": "down"}, "'link' must be"),
    ("/api/impair", {"link": "sw1-sw2", "corrupt": 2}, "from 0 to 1"),
    ("/api/impair", {"link": "sw1-sw2", "loss": "x"}, "from 0 to 1"),
    ("/api/impair", {"link": "sw1-sw2", "corrupt": True}, "from 0 to 1"),
    ("/api/impair", {"link": "sw1-sw2", "clear": "yes"}, "'clear' must be"),
    ("/api/impair", {"link": "sw1-sw2"}, "give 'corrupt' or 'loss'"),
    ("/api/action", {"link": "sw1-sw2", "action": "linkguardian:explode"}, "no action"),
    ("/api/action", {"link": "h1-sw1", "action": "linkguardian:enable"}, "no action"),
    ("/api/action", {"link": "sw1-sw2", "action": "nosuch:enable"}, "offered: linkguardian:enable"),
])
async def test_bad_input_is_a_400_with_a_message_and_changes_nothing(client, monkeypatch, path, body, says):
    from netstack import faults, impairctl
    from netstack.linkguardian import control as lg

    changed: list[Any] = []
    monkeypatch.setattr(faults, "run_state", lambda prefix: runtime.load_state(prefix))
    for mod, name in ((faults, "set_link"), (impairctl, "impair_link"), (lg, "enable_link")):
        monkeypatch.setattr(mod, name, lambda *a, **k: changed.append(a) or {})
    kw = {"data": body} if isinstance(body, bytes) else {"json": body}
    resp = await client.post(path, headers={**AUTH, "Content-Type": "application/json"}, **kw)
    assert resp.status == 400
    assert says in (await resp.json())["error"]
    assert changed == []


@pytest.mark.asyncio
async def test_a_request_for_another_host_name_is_refused(client):
    resp = await client.get("/api/state", headers={"Host": "evil.example:8787"})
    assert resp.status == 403  # (DNS rebinding: the server is bound to 127.0.0.1)
    assert (await client.get("/api/state", headers={"Host": "localhost:8787"})).status == 200


# ----------------------------------------------------------------------------- files


@pytest.mark.asyncio
async def test_the_page_and_its_files_are_served_with_a_strict_policy(client):
    resp = await client.get("/")
    text = await resp.text()
    assert resp.status == 200 and "<svg id=\"graph\"" in text
    assert "script-src 'self'" in resp.headers["Content-Security-Policy"]
    for ref in re.findall(r'(?:src|href)="([^"]+)"', text):
        if ref.startswith("data:") or ref.startswith("/reports/"):
            continue
        assert ref.startswith("/static/"), ref
        assert (await client.get(ref)).status == 200, ref


@pytest.mark.asyncio
async def test_the_reports_are_served_and_nothing_outside_them(client, bed):
    resp = await client.get("/reports", allow_redirects=False)
    assert resp.status == 302 and resp.headers["Location"] == "/reports/"
    resp = await client.get("/reports/")
    assert resp.status == 200 and "fig/a.png" in await resp.text()
    assert "Content-Security-Policy" not in resp.headers  # a report is someone else's page
    resp = await client.get("/reports/fig/a.png")
    assert resp.status == 200 and (await resp.read())[:4] == b"\x89PNG"
    for path in ("/reports/../secret.txt", "/reports/%2e%2e/secret.txt", "/reports/fig/../../secret.txt",
                 "/reports/nosuch.png"):
        resp = await client.get(path)
        assert resp.status == 404 and "outside the reports" not in await resp.text(), path


def test_the_static_files_name_no_url_of_elsewhere():
    """The page works offline: no CDN, no font or script of another site, not even a namespace URL."""
    files = sorted(uiserver.STATIC.iterdir())
    assert {f.name for f in files} >= {"index.html", "app.js", "style.css"}
    for f in files:
        text = f.read_text()
        found = re.findall(r"https?://|//cdn|\bcdn\.|@import|url\(\s*['\"]?(?!data:)", text, re.I)
        assert found == [], f"{f.name}: {found}"


def test_the_static_files_are_package_data():
    text = (ROOT / "pyproject.toml").read_text()
    assert '"netstack.ui" = ["static/*.html", "static/*.js", "static/*.css"]' in text
    assert {f.suffix for f in uiserver.STATIC.iterdir()} <= {".html", ".js", ".css"}


#: the protocol names (tests/test_architecture.py's rule for the generic layers)
PROTOCOL_WORDS = re.compile(r"linkguardian|\blg_|\bdta\b|collector|tcsack|onepipe|1pipe|\btcd\b", re.I)


def test_the_generic_ui_names_no_protocol():
    """netstack/ui finds the protocols' views through the registry: no protocol in its code (docstrings
    and comments may name them as examples), nor in the page's script."""
    words = []
    for path in sorted((ROOT / "netstack" / "ui").glob("*.py")):
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                words += [f"{path.name}: {w}" for w in PROTOCOL_WORDS.findall(node.value)]
            elif isinstance(node, ast.Name | ast.Attribute | ast.alias):
                words += [f"{path.name}: {w}" for w in PROTOCOL_WORDS.findall(getattr(node, "id", None)
                                                                             or getattr(node, "attr", None)
                                                                             or node.name)]
    script = re.sub(r"//[^\n]*", "", (uiserver.STATIC / "app.js").read_text())
    words += [f"app.js: {w}" for w in PROTOCOL_WORDS.findall(script)]
    assert words == []


# ----------------------------------------------------------------------------- the command


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("NETSTACK_RUN_DIR", str(tmp_path))
    monkeypatch.setenv("NETSTACK_RUNTIME", "netns")
    from netstack.topo import netns

    monkeypatch.setattr(netns, "list_running", lambda: [])


@pytest.mark.parametrize(("argv", "says"), [
    (["ui", "--prefix", "nosuch"], "no topology is running under prefix 'nosuch'"),
    (["ui", "--prefix", "nosuch", "--interval", "2"], "at least once a second"),
    (["ui", "--prefix", "nosuch", "--token", "short"], "at least 16 characters"),
])
def test_the_commands_errors_are_one_line_and_exit_2(fresh, capsys, argv, says):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("netstack ui: error: ") and says in err and err.count("\n") == 1, err


def test_without_aiohttp_the_command_says_how_to_install_it(fresh, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # (import aiohttp then raises ImportError)
    assert cli.main(["ui", "--prefix", "nosuch"]) == 2
    assert INSTALL_HINT in capsys.readouterr().err and "pip install 'netstack[ui]'" in INSTALL_HINT


def test_the_token_file_is_private_and_only_where_the_run_is(fresh, tmp_path):
    (tmp_path / "p1").mkdir()
    path = uiserver.write_token_file("p1", 8787, TOKEN)
    assert path == tmp_path / "p1" / "ui-8787.token" and path.read_text() == TOKEN + "\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert uiserver.write_token_file("nosuch", 8787, TOKEN) is None
