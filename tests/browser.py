"""Headless Chromium for tests that load a page in a real browser (marker ``browser``).

The distribution's Chromium and its driver (Debian: ``chromium``, ``chromium-driver``;
scripts/install.sh installs them) through selenium, offline: selenium is given the driver's path,
so it never runs its Selenium Manager (which would try to download a browser), and
``SE_MANAGER_PATH`` points at a file that does not exist, so that any attempt fails loudly instead
of reaching the network. The browser starts with a fresh profile and without background
networking, component updates, sync or QUIC.

Reuse it from any test folder: import the fixture in its conftest.py (as tests/ui/conftest.py does),
then::

    from tests.browser import broken_images, console_errors, screenshot

    @pytest.mark.browser
    def test_my_page(chromium):
        chromium.get(url)
        assert broken_images(chromium) == []
        assert console_errors(chromium) == []
        screenshot(chromium, "my-page")

``chromium`` is module-scoped (one browser per test module: it takes ~2 s to start) and skips the
test where the browser or its driver is not installed. Screenshots go to
``$NETSTACK_TEST_ARTIFACTS`` (default ``results/test-artifacts/``) as PNG.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: what the browser runs with: headless, no sandbox (root in CI), and nothing that reaches the network
CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", "--window-size=1400,900")
ARTIFACTS_ENV = "NETSTACK_TEST_ARTIFACTS"
#: selenium's own offline switch, and a manager path that fails if selenium ever tries to run it
OFFLINE_ENV = {"SE_OFFLINE": "1", "SE_MANAGER_PATH": "/nonexistent/selenium-manager-must-not-run"}


def artifacts_dir() -> Path:
    """Where screenshots go (made if missing)."""
    path = Path(os.environ.get(ARTIFACTS_ENV) or ROOT / "results" / "test-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]'; scripts/install.sh does it)"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"{path} is missing (apt-get install {package}; scripts/install.sh does it)"
    return None


def start_chromium(profile: Path) -> Any:
    """A headless Chromium with a fresh profile in ``profile``, its console log kept (``console_errors``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in (*CHROMIUM_ARGS, f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    before = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)  # (selenium reads them while it starts the driver)
    try:
        driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    driver.set_page_load_timeout(20)
    return driver


@pytest.fixture(scope="module")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One headless Chromium for the test module; quit (and its profile removed) afterwards."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    profile = tmp_path_factory.mktemp("chromium-profile")
    driver = start_chromium(profile)
    try:
        yield driver
    finally:
        try:
            driver.quit()  # (the browser and its driver: selenium kills the driver if it does not stop)
        finally:
            shutil.rmtree(profile, ignore_errors=True)


def console_errors(driver: Any) -> list[str]:
    """The console's errors (level SEVERE: uncaught exceptions, console.error, failed loads) logged
    since the last call: reading the log empties it."""
    return [f"{e.get('source')}: {e.get('message')}" for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def broken_images(driver: Any) -> list[str]:
    """The ``src`` of every ``<img>`` of the page that did not load (not complete, or no pixels)."""
    return driver.execute_script(
        "return Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
        ".map(i => i.getAttribute('src'));")


def wait_images(driver: Any, timeout: float = 10.0) -> None:
    """Until every ``<img>`` has finished loading or failing (``complete``)."""
    wait_until(lambda: driver.execute_script("return Array.from(document.images).every(i => i.complete)"),
               timeout, "images still loading")


def screenshot(driver: Any, name: str) -> Path:
    """The window as ``<artifacts>/<name>.png``."""
    path = artifacts_dir() / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def wait_until(check: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """``check()``'s first true value within ``timeout`` seconds; AssertionError naming ``what`` and
    the last value otherwise."""
    deadline = time.monotonic() + timeout
    value = check()
    while not value:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (after {timeout:g} s; last: {value!r})")
        time.sleep(step)
        value = check()
    return value


__all__ = ["CHROMEDRIVER", "CHROMIUM", "CHROMIUM_ARGS", "artifacts_dir", "broken_images", "chromium",
           "console_errors", "missing", "screenshot", "start_chromium", "wait_images", "wait_until"]
