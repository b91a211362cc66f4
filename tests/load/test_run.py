"""Run directories: files grouped by recognized format, label and layout from the launch."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLE, TEST_DATA

from toolkit import ToolkitError, load_run
from toolkit.cli.main import main

RUNS = TEST_DATA / "bench" / "runs"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """A copy: reading a server log writes its cache beside it."""
    shutil.copytree(RUNS, tmp_path / "runs")
    return tmp_path / "runs"


def test_tp8_run_is_labelled_from_its_launch(runs: Path) -> None:
    run = load_run(runs / "tp8")
    assert "sglang-log" in run.files
    assert run.label == "TP8"
    assert (run.layout.tp, run.layout.pp) == (8, 1)
    assert run.layout.layout_from == "ServerArgs"
    assert run.bench is not None and run.bench.runs.height > 0
    assert set(run.bench.runs.get_column("label")) == {"TP8"}


def test_a_missing_path_and_a_file_get_different_messages(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="missing: no such file or directory"):
        load_run(tmp_path / "missing")
    (tmp_path / "server.log").write_text("x\n")
    with pytest.raises(ToolkitError, match=r"server\.log: not a run directory"):
        load_run(tmp_path / "server.log")


def test_model_command_on_run_directories(runs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "--json", str(runs / "pp8"), str(runs / "tp8")]) == 0
    out = json.loads(capsys.readouterr().out)
    labels = {p["label"] for p in out["points"]}
    assert labels == {"PP8", "TP8"}
    for point in out["points"]:
        assert set(point) >= {"concurrency", "observed_tok_s", "expected_tok_s", "residual_pct"}


def test_model_command_needs_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["model", str(tmp_path / "empty")]) == 2
    assert "no benchmark results" in capsys.readouterr().err


def test_incident_run_has_log_trace_and_results(tmp_path: Path) -> None:
    source = SAMPLE / "pp8"
    shutil.copytree(source, tmp_path / "pp8")
    run = load_run(tmp_path / "pp8")
    assert run.label == "PP8" and run.config.synthetic
    assert run.interconnect == "pcie"
    assert run.gpu is not None
    assert run.gpu.samples.get_column("gpu").n_unique() == 8
    assert run.bench is not None
    assert sorted(run.bench.runs.get_column("max_concurrency").to_list()) == [
        1,
        2,
        4,
        8,
        16,
        32,
        64,
    ]
    assert (run.layout.pp, run.layout.pp_async_batch_depth) == (8, 8)
    assert run.layout.max_running_requests is not None  # resolved from the startup summary


def test_parse_json_reports_gpu_traces(capsys: pytest.CaptureFixture[str]) -> None:
    path = SAMPLE / "tp8" / "gpu.csv"
    assert main(["parse", "--json", str(path)]) == 0
    (f,) = json.loads(capsys.readouterr().out)["files"]
    assert (f["format"], f["gpus"]) == ("nvidia-smi-csv", 8)
    assert f["samples"] > 0 and "util_pct" in f["metrics"]
