"""``netstack ui`` in a real browser (headless Chromium, tests/browser.py) against a live testbed.

One testbed for the module: the default topology (h1 - sw1 = sw2 - h2, the collector c1 on sw2)
with its impairment (sw1 corrupts 1e-3 of what it sends to sw2) and a TCD marker on sw1's port
to sw2; one ``netstack ui`` server (the command itself, a subprocess) and one browser. The tests
run in file order and the last ones take the testbed away: a daemon frozen, then the testbed
down, then the server stopped with Ctrl-C. Screenshots go to ``$NETSTACK_TEST_ARTIFACTS``
(default results/test-artifacts/).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from netstack import runtime
from netstack.topo.model import load_topology
from tests.browser import broken_images, console_errors, screenshot, wait_images, wait_until

pytestmark = [pytest.mark.netns, pytest.mark.browser]

ROOT = Path(__file__).resolve().parent.parent.parent
TOKEN = "browser-test-" + uuid.uuid4().hex
#: the page's promise (docs/ui.md): a link taken down is down in the page within this long
DOWN_WITHIN_S = 2.0
TCD_STATES = {"non_congestion", "undetermined", "congestion"}
#: how long the server may take to say where it listens, and to stop after Ctrl-C
START_S = 30.0
STOP_S = 10.0


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("namespace tests need root")
    # a prefix of its own (NETSTACK_UI_TEST_PREFIX names one, for a shared machine's conventions)
    prefix = os.environ.get("NETSTACK_UI_TEST_PREFIX") or "ui" + uuid.uuid4().hex[:6]
    with pytest.MonkeyPatch.context() as mp:  # (the run directory is the module's: given back after)
        if not os.environ.get("NETSTACK_RUN_DIR"):
            mp.setenv("NETSTACK_RUN_DIR", str(tmp_path_factory.mktemp("run")))
        state = runtime.up(load_topology(None), prefix, apply_impairments=True)
        try:
            from netstack.tcd import control as tcd

            tcd.enable(prefix, "sw1", "p-sw2")
            yield state
        finally:
            runtime.down(prefix)


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A reports directory like ``netstack reproduce``'s: an index.html with figures, and a page
    with a figure that is not there (to show that the check finds one)."""
    folder = tmp_path_factory.mktemp("reports")
    for name in ("linkguardian-fig8.png", "tcd-fig3.png"):
        (folder / name).write_bytes((ROOT / "docs" / "img" / name).read_bytes())
    head = '<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>r</title></head>'
    (folder / "index.html").write_text(f'{head}<body><h1>reports</h1><img src="linkguardian-fig8.png" alt="a">'
                                       '<img src="tcd-fig3.png" alt="b"></body></html>')
    (folder / "broken.html").write_text(f'{head}<body><img src="no-such-figure.png" alt="c"></body></html>')
    return folder


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    """The server's first line of output, or "" if it says nothing within ``timeout`` (it prints
    whole lines, flushed)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


@pytest.fixture(scope="module")
def server(testbed, reports, tmp_path_factory):
    """``netstack ui`` on a free port; stopped (SIGINT, then killed) at the end of the module. Its
    stderr goes to a file (a pipe nobody reads could fill up and block it); nothing of it is left."""
    argv = [sys.executable, "-m", "netstack.cli", "ui", "--prefix", testbed.prefix, "--port", "0", "--token", TOKEN,
            "--reports", str(reports), "--interval", "0.5"]
    log = tmp_path_factory.mktemp("ui-server") / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    try:
        first = _first_line(proc, START_S)
        assert " at http://127.0.0.1:" in first, f"{first!r}; stderr: {log.read_text()}"
        url = first.split(" at ", 1)[1].strip()
        yield {"url": url, "proc": proc, "port": int(url.rstrip("/").rsplit(":", 1)[1]), "stderr": log}
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=STOP_S)
        proc.stdout.close()


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def click(driver, selector: str) -> None:
    """A click on an SVG element (selenium refuses a flat line: a horizontal link has no height)."""
    js(driver, "document.querySelector(arguments[0]).dispatchEvent(new MouseEvent('click', {bubbles: true}))",
       selector)


def _open(driver, url: str) -> None:
    driver.get(url)
    wait_until(lambda: js(driver, "return document.querySelectorAll('#graph [data-node]').length"), 10,
               "the page drew no graph")


def test_the_graph_has_every_node_and_link(chromium, testbed, server):
    _open(chromium, server["url"])
    nodes = js(chromium, "return [...document.querySelectorAll('#graph [data-node]')].map(e => e.dataset.node)")
    links = js(chromium, "return [...document.querySelectorAll('#graph [data-link]')].map(e => e.dataset.link)")
    assert sorted(nodes) == sorted(testbed.namespaces)
    assert sorted(links) == sorted(testbed.links)
    kinds = js(chromium, "return Object.fromEntries([...document.querySelectorAll('#graph [data-node]')]"
                         ".map(e => [e.dataset.node, e.dataset.kind]))")
    assert kinds == {"h1": "host", "h2": "host", "sw1": "switch", "sw2": "switch", "c1": "collector"}
    # every link up, the impaired one drawn corrupting; read-only: no action buttons without the token
    wait_until(lambda: js(chromium, "return [...document.querySelectorAll('#graph [data-link]')]"
                                    ".every(e => e.dataset.state === 'up')"), 5, "not every link shown up")
    wait_until(lambda: js(chromium, "return document.querySelector('[data-link=\"sw1-sw2\"]')"
                                    ".classList.contains('corrupting')"), 5, "sw1-sw2 not shown corrupting")
    click(chromium, '[data-link="sw1-sw2"] line.hit')
    assert js(chromium, "return document.querySelectorAll('#panel-actions button').length") == 0
    screenshot(chromium, "ui-graph")
    assert console_errors(chromium) == []


def test_a_link_taken_down_turns_down_in_the_page_within_2s(chromium, testbed, server):
    from netstack import faults

    state_of = "return document.querySelector('[data-link=\"sw2-h2\"]').dataset.state"
    assert js(chromium, state_of) == "up"
    t0 = time.monotonic()
    try:
        faults.set_link(testbed.prefix, "sw2-h2", False)  # what 'netstack link sw2-h2 down' does
        wait_until(lambda: js(chromium, state_of) == "down", DOWN_WITHIN_S - (time.monotonic() - t0),
                   "sw2-h2 not shown down")
        took = time.monotonic() - t0
        screenshot(chromium, "ui-link-down")
    finally:
        faults.set_link(testbed.prefix, "sw2-h2", True)
    print(f"sw2-h2 shown down {took:.2f} s after 'netstack link sw2-h2 down' began")
    assert took <= DOWN_WITHIN_S
    wait_until(lambda: js(chromium, state_of) == "up", DOWN_WITHIN_S, "sw2-h2 not shown up again")
    assert console_errors(chromium) == []


def test_a_tcd_ports_state_shows_with_its_timeline(chromium, testbed, server):
    # a few frames through sw1's marked port make its detector (no state before the first frame)
    ping = subprocess.run(["ip", "netns", "exec", testbed.namespaces["h1"], "ping", "-c", "3", "-i", "0.2", "-W", "1",
                           "10.0.0.2"], capture_output=True, text=True, timeout=20, check=False)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    port = "document.querySelector('circle.port[data-port=\"sw1/p-sw2\"]')"
    wait_until(lambda: js(chromium, f"return {port}.dataset.state") in TCD_STATES, 5, "no TCD state on sw1/p-sw2")
    assert js(chromium, f"return getComputedStyle({port}).fill") != js(
        chromium, "return getComputedStyle(document.querySelector('circle.port[data-port=\"sw2/p-h2\"]')).fill")
    click(chromium, 'circle.port[data-port="sw1/p-sw2"]')
    view = '#panel [data-port-panel="sw1/p-sw2"] [data-view="TCD"]'
    badge = wait_until(lambda: js(chromium, f"return document.querySelector('{view} .badge')"), 5, "no TCD view")
    assert badge.get_attribute("data-state") in TCD_STATES
    assert js(chromium, f"return document.querySelectorAll('{view} svg.timeline rect').length") >= 1
    screenshot(chromium, "ui-tcd-port")
    assert console_errors(chromium) == []


def test_with_the_token_the_page_changes_the_testbed(chromium, testbed, server):
    _open(chromium, server["url"] + "#token=" + TOKEN)
    wait_until(lambda: js(chromium, "return document.body.classList.contains('can-write')"), 5, "token not taken")
    assert "token" not in chromium.current_url  # taken out of the address bar
    click(chromium, '[data-link="sw1-sw2"] line.hit')
    button = wait_until(lambda: chromium.find_elements("css selector", '[data-action="linkguardian:enable"]'), 5,
                        "no LinkGuardian button")[0]
    button.click()
    wait_until(lambda: js(chromium, "return document.querySelector('[data-link=\"sw1-sw2\"]')"
                                    ".classList.contains('protected')"), 5, "sw1-sw2 not shown protected")
    assert "LinkGuardian sender" in js(chromium, "return document.querySelector('#panel-live').textContent")
    screenshot(chromium, "ui-protected")
    assert console_errors(chromium) == []


def test_a_frozen_daemon_shows_unreachable_and_the_rest_goes_on(chromium, testbed, server):
    c1 = next(d for d in testbed.daemons if d.node == "c1")
    os.kill(c1.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: js(chromium, "return document.querySelector('[data-node=\"c1\"]').dataset.status")
                   == "unreachable", 5, "c1 not shown unreachable")
        before = js(chromium, "return document.querySelector('#updated').textContent")
        wait_until(lambda: js(chromium, "return document.querySelector('#updated').textContent") != before, 5,
                   "the page stopped updating")
        assert js(chromium, "return document.querySelector('[data-node=\"sw1\"]').dataset.status") == "ok"
        screenshot(chromium, "ui-unreachable")
    finally:
        os.kill(c1.pid, signal.SIGCONT)
    wait_until(lambda: js(chromium, "return document.querySelector('[data-node=\"c1\"]').dataset.status") == "ok",
               5, "c1 not back")
    assert console_errors(chromium) == []


def test_the_reports_figures_all_load(chromium, server):
    chromium.get(server["url"] + "reports/")
    wait_images(chromium)
    assert js(chromium, "return document.images.length") == 2
    assert broken_images(chromium) == []
    assert console_errors(chromium) == []
    screenshot(chromium, "ui-reports")
    chromium.get(server["url"] + "reports/broken.html")  # the check finds a figure that is not there
    wait_images(chromium)
    assert broken_images(chromium) == ["no-such-figure.png"]
    assert any("no-such-figure.png" in e for e in console_errors(chromium))


def test_the_page_says_when_the_testbed_is_gone_and_ctrl_c_leaves_nothing(chromium, testbed, server):
    _open(chromium, server["url"])
    token_file = runtime.run_dir(testbed.prefix) / f"ui-{server['port']}.token"
    runtime.down(testbed.prefix)
    wait_until(lambda: js(chromium, "return document.querySelector('#pill').dataset.status") == "gone", 5,
               "the page did not say the testbed is gone")
    assert testbed.prefix in js(chromium, "return document.querySelector('#banner').textContent")
    screenshot(chromium, "ui-gone")
    assert console_errors(chromium) == []
    proc = server["proc"]
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=STOP_S) == 0
    assert "stopped" in server["stderr"].read_text()
    assert not token_file.exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(server["url"] + "api/state", timeout=2)

