"""The report ``netstack reproduce`` writes, loaded in headless Chromium (issue 35: "the report's
figures all load (no broken images)", "no console errors"): a real run of TCD's virtual-time
experiment (§3.1's scenarios, about 10 s of CPU), its report opened from disk with no server and
no network, screenshots kept as test artifacts."""

from __future__ import annotations

import pytest

from tests.browser import broken_images, console_errors, screenshot, wait_images

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def report(tcd_sim_report):
    """The session's one run of TCD's virtual-time experiment and its report (conftest.py)."""
    return tcd_sim_report


def test_the_reports_figures_all_load_without_console_errors(chromium, report):
    out, doc = report
    images = [i for f in doc["papers"][0]["figures"] for i in f["images"] if i["path"]]
    assert len(images) >= 2  # the scenarios' PNGs (Figs. 3 and 4 at least)
    for page, shot in (("index.html", "reproduce-index"), ("tcd.html", "reproduce-tcd")):
        chromium.get((out / page).as_uri())
        wait_images(chromium)
        assert broken_images(chromium) == []
        assert console_errors(chromium) == []
        screenshot(chromium, shot)
    n = chromium.execute_script("return document.images.length")
    assert n == len(images)


def test_the_index_links_every_paper_page_and_counts_every_verdict(chromium, report):
    out, doc = report
    chromium.get((out / "index.html").as_uri())
    links = chromium.execute_script("return Array.from(document.links).map(a => a.getAttribute('href'))")
    assert "tcd.html" in links
    cells = chromium.execute_script(
        "return Array.from(document.querySelectorAll('table')[1].rows[1].cells).map(c => c.textContent)")
    assert [int(c) for c in cells[1:5]] == list(doc["counts"].values())
    assert sum(doc["counts"].values()) > 10
