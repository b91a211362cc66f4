"""The demo postmortem opened in headless Chromium with the network disabled.

Every chart container must hold a drawn ``svg`` or ``canvas``, the page must log nothing to
the console (errors included) and load nothing from the network. Skipped without Chromium
(``.ci/run`` installs it from the distribution's packages).
"""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import ClassVar

import pytest
from helpers.report_runs import INCIDENT, make_runs

from toolkit.report.offline import external_refs
from toolkit.report.render import render

BROWSER = next(
    (shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
    None,
)
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium on this machine")

# Without these, Chromium on a closed network waits for its update, sync and field-trial
# services; the resolver rule and the dead proxy make any network load fail at once.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9",
    "--enable-logging=stderr",
    "--v=0",
    "--virtual-time-budget=20000",
]


class _Charts(HTMLParser):
    """Per chart container (``class="ppscope-chart"``): did an svg or canvas appear in it?"""

    VOID: ClassVar[set[str]] = {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
    }

    def __init__(self) -> None:
        super().__init__()
        self.drawn: dict[str, bool] = {}
        self._stack: list[str | None] = []  # chart id for each open element inside a chart

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        current = next((c for c in reversed(self._stack) if c), None)
        if tag in ("svg", "canvas") and current is not None:
            self.drawn[current] = True
        mine = None
        if tag == "div" and "ppscope-chart" in (a.get("class") or "").split():
            mine = a.get("id") or f"chart-{len(self.drawn)}"
            self.drawn[mine] = False
        if tag not in self.VOID:
            self._stack.append(mine)

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self._stack:
            self._stack.pop()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo postmortem: data/incident/ when present, else the small two-run incident."""
    out = tmp_path_factory.mktemp("demo") / "incident-postmortem.html"
    if INCIDENT.is_dir():
        params = {}
    else:
        runs = make_runs(tmp_path_factory.mktemp("runs"))
        params = {"runs": ",".join(map(str, runs))}
    return render("postmortem", params, out).html


@pytest.fixture(scope="module")
def opened(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(DOM after scripts ran, browser log) of the demo opened offline."""
    profile = tmp_path_factory.mktemp("profile")
    assert BROWSER is not None
    done = subprocess.run(
        [BROWSER, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", demo.resolve().as_uri()],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return done.stdout, done.stderr


def test_every_chart_drew(opened: tuple[str, str]) -> None:
    parser = _Charts()
    parser.feed(opened[0])
    assert len(parser.drawn) >= 5
    blank = [chart for chart, drawn in parser.drawn.items() if not drawn]
    assert blank == [], f"charts without svg/canvas: {blank}"


def test_no_console_output(opened: tuple[str, str]) -> None:
    console = [line for line in opened[1].splitlines() if ":CONSOLE" in line]
    assert console == []


def test_nothing_loads_from_the_network(demo: Path, opened: tuple[str, str]) -> None:
    assert external_refs(demo.read_text()) == []
    assert external_refs(opened[0]) == []
