"""One report rendered on a run with a secret planted in every input: the HTML, the JSON
sidecar and the kept notebook hold none of them."""

from __future__ import annotations

import pytest
from helpers.planted import leaks, plant_run

from toolkit.report.render import render


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("planted")
    run = plant_run(root / "planted")
    out = render("postmortem", {"runs": str(run)}, root / "report.html")
    return {
        "html": out.html.read_text(),
        "sidecar": out.sidecar.read_text(),
        "notebook": out.html.with_suffix(".ipynb").read_text(),
    }


@pytest.mark.parametrize("output", ["html", "sidecar", "notebook"])
def test_no_planted_secret_in_the_report(report: dict[str, str], output: str) -> None:
    assert leaks(report[output]) == {}
