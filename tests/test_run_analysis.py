"""``toolkit.run_analysis``: one builder of a run's observed points, used by CLI and report."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLE

from toolkit.cli.main import main
from toolkit.report.runs import load_runs
from toolkit.run_analysis import RunAnalysis, observed_points

INCIDENT = SAMPLE


@pytest.fixture
def labelled_run(tmp_path: Path) -> Path:
    """The sample's PP8 log with results whose concurrency is only in their labels (c1, c32)."""
    run = tmp_path / "pp8"
    run.mkdir()
    shutil.copy(INCIDENT / "pp8" / "server.log", run / "server.log")
    (run / "sweep.csv").write_text("config,output_tok_s\npp8-c1,34.3\npp8-c32,248.1\n")
    return run


def test_concurrency_from_labels_is_used(labelled_run: Path) -> None:
    ctx = RunAnalysis(labelled_run)
    points = ctx.observed
    assert sorted(points["concurrency"].to_list()) == [1, 32]
    assert set(points["pp"]) == {8} and set(points["pp_async_batch_depth"]) == {8}
    assert points.equals(observed_points(ctx.run, ctx.label))


def test_model_command_and_report_accept_the_same_runs(
    labelled_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["model", "--json", str(labelled_run)]) == 0
    cli = json.loads(capsys.readouterr().out)["points"]
    report = load_runs([str(labelled_run)], progress=False).observed()
    assert report is not None
    assert sorted(p["concurrency"] for p in cli) == sorted(report["concurrency"].to_list())
    assert sorted(p["observed_tok_s"] for p in cli) == sorted(report["output_tok_s"].to_list())


def test_a_run_without_results_has_no_points(tmp_path: Path) -> None:
    shutil.copy(INCIDENT / "pp8" / "server.log", tmp_path / "server.log")
    assert RunAnalysis(tmp_path).observed.height == 0
