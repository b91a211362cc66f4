"""The demo postmortem opened in headless Chromium with the network disabled.

Every chart container must hold a drawn ``svg`` or ``canvas``, the page must log nothing to
the console (errors included) and load nothing from the network, and its first screen
(1400 × 900) must show the verdict and the gap. Screenshots are saved under the session's
temp dir for a reader to look at. Skipped without Chromium (``.ci/run`` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cdp import Browser, Page

from toolkit.report.offline import external_refs
from toolkit.report.render import Report

DRAWN = (
    "(() => { const c = [...document.querySelectorAll('.ppscope-chart')];"
    " return c.length > 0 && c.every(e => e.querySelector('svg, canvas')); })()"
)


@pytest.fixture(scope="module")
def demo(rendered: dict[str, Report]) -> Path:
    return rendered["postmortem"].html


@pytest.fixture(scope="module")
def page(browser: Browser, demo: Path) -> Iterator[Page]:
    """The demo, every chart drawn (or the wait fails), in a 1400 × 900 window."""
    with browser.page(1400, 900) as opened:
        opened.send("Network.enable")
        opened.goto(demo.resolve().as_uri())
        opened.wait_for(DRAWN, timeout=60, what="every chart to draw")
        yield opened


def test_every_chart_drew(page: Page) -> None:
    counts = page.evaluate(
        "[document.querySelectorAll('.ppscope-chart').length,"
        " document.querySelectorAll('.ppscope-chart svg, .ppscope-chart canvas').length]"
    )
    assert counts[0] >= 5 and counts[1] >= counts[0]


def test_no_console_output(page: Page) -> None:
    assert page.console() == []


def test_nothing_loads_from_the_network(browser: Browser, page: Page, demo: Path) -> None:
    assert external_refs(demo.read_text()) == []
    assert external_refs(page.evaluate("document.documentElement.outerHTML")) == []
    requested = [
        e["request"]["url"] for e in browser.events(page.session, "Network.requestWillBeSent")
    ]
    assert requested and all(u.startswith(("file:", "data:")) for u in requested), requested


def test_first_screen_shows_the_verdict_and_the_gap(page: Page, shots: Path) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    shot = page.screenshot(shots / "postmortem-first-screen.png")
    print(f"first screen: {shot}")
    box = page.evaluate(
        "(() => { const r = e => e.getBoundingClientRect();"
        " const s = document.querySelector('.ppscope-summary');"
        " const v = s.querySelector('.ppscope-verdict'), g = s.querySelector('table');"
        " const runs = [...document.querySelectorAll('th')].find(t => t.textContent === 'run');"
        " return {verdict: r(v).bottom, gap: r(g).bottom, text: v.textContent,"
        " before: !!(s.compareDocumentPosition(runs) & Node.DOCUMENT_POSITION_FOLLOWING)}; })()"
    )
    assert box["verdict"] < 900 and box["gap"] < 900, box
    assert box["before"], "the summary comes before the run table"
    assert "delivers" in box["text"]


def test_charts_fit_the_page(page: Page, shots: Path) -> None:
    widths = page.evaluate(
        "[...document.querySelectorAll('.ppscope-chart svg')]"
        ".map(s => s.getBoundingClientRect().width)"
    )
    page_width = page.evaluate("document.documentElement.clientWidth")
    assert max(widths) <= page_width, "no chart scrolls sideways"
    assert sorted(widths)[len(widths) // 2] >= page_width / 2, "charts use the page"
    full = page.screenshot(shots / "postmortem-full.png", full_page=True)
    print(f"whole page: {full}")
