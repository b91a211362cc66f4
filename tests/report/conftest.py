"""What the report tests share, made once per session: every notebook rendered, one browser.

Rendering a notebook costs a kernel and papermill (seconds to a minute each on a busy 2-core
machine), and a browser start costs seconds: the notebook, HTML and browser tests reuse these.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from helpers.cdp import Browser, find_chromium
from helpers.report_runs import INCIDENT, NAMES, make_runs

from toolkit.report.render import Report, render


class Rendered(Mapping[str, Report]):
    """Notebook name → its report, rendered on first use (a test of one notebook renders one)."""

    def __init__(self, out: Path, params: dict[str, Any]) -> None:
        self.out, self.params = out, params
        self._done: dict[str, Report] = {}

    def __getitem__(self, name: str) -> Report:
        if name not in NAMES:
            raise KeyError(name)
        if name not in self._done:
            self._done[name] = render(name, self.params, self.out / f"{name}.html")
        return self._done[name]

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)


@pytest.fixture(scope="session")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """Each notebook of ``notebooks/`` rendered with its defaults on data/incident/ (else on
    the small two-run incident), once per session, when a test first asks for it."""
    params = {}
    if not INCIDENT.is_dir():
        runs = make_runs(tmp_path_factory.mktemp("runs"))
        params = {"runs": ",".join(str(r) for r in runs)}
    return Rendered(tmp_path_factory.mktemp("reports"), params)


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """One headless Chromium for the session (skips where there is none)."""
    if find_chromium() is None:
        pytest.skip("no chromium on this machine (.ci/run installs it)")
    with Browser.launch(tmp_path_factory.mktemp("chromium-profile")) as chromium:
        yield chromium


@pytest.fixture(scope="session")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where browser tests save their screenshots (a temp dir, printed for a reader to open)."""
    return tmp_path_factory.mktemp("screenshots")
