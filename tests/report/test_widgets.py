"""Explorers driven from code: set a control, the view is recomputed and changes."""

from __future__ import annotations

import json

import altair as alt
import pytest
from helpers.report_runs import make_runs

from toolkit.report import sections as views
from toolkit.report.widgets import (
    ConfigDiffExplorer,
    GpuExplorer,
    ScalingExplorer,
    TimelineExplorer,
    WhatIfExplorer,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> views.RunSet:
    return views.load_runs(make_runs(tmp_path_factory.mktemp("runs")), progress=False)


def _spec(view: views.View) -> str:
    assert view.chart is not None
    with alt.data_transformers.disable_max_rows():
        return json.dumps(view.chart.to_dict(), sort_keys=True)


def test_timeline_explorer(runs: views.RunSet) -> None:
    ex = TimelineExplorer(runs)
    assert ex.controls["run"].value == "PP8" and len(ex.controls["stages"].options) == 8
    before = _spec(ex.view)
    ex.controls["stages"].value = ("PP0", "PP7")
    assert _spec(ex.view) != before
    assert ex.view.record["stage_timeline"]["stages"]["stage"].to_list() == ["PP0", "PP7"]
    ex.controls["window"].value = (0.0, 1.0)
    assert ex.view.record["stage_timeline"]["stages"].height <= 2
    ex.controls["run"].value = "TP8"
    assert ex.controls["stages"].options == ("all GPUs",)
    assert ex.view.record["stage_timeline"]["run"] == "TP8"


def test_gpu_explorer(runs: views.RunSet) -> None:
    ex = GpuExplorer(runs)
    assert "power_w" in ex.controls["metric"].options
    before = _spec(ex.view)
    ex.controls["metric"].value = "power_w"
    assert _spec(ex.view) != before and "power_w" in _spec(ex.view)
    ex.controls["gpus"].value = ("PP7 (GPU 7)",)
    assert ex.view.record["gpu"]["gpus"]["gpu"].to_list() == ["PP7 (GPU 7)"]
    ex.controls["run"].value = "TP8"
    assert "No GPU trace" in ex.view.notes[0]


def test_scaling_explorer(runs: views.RunSet) -> None:
    ex = ScalingExplorer(runs)
    assert ex.view.key == "gap"
    ex.controls["metric"].value = "scaling efficiency"
    assert ex.view.key == "efficiency"
    ex.controls["metric"].value = "throughput and gap"
    ex.controls["a"].value, ex.controls["b"].value = "PP8", "TP8"
    assert ex.view.record["gap"][0]["a"] == "PP8"


def test_what_if_explorer(runs: views.RunSet) -> None:
    ex = WhatIfExplorer(runs)
    assert ex.view.notes, "no change chosen yet"
    ex.controls["pp_max_micro_batch_size"].value = 4
    first = ex.view.record["what_if"]["points"]
    ex.controls["concurrency"].value = 64
    second = ex.view.record["what_if"]["points"]
    assert ex.changes == {"pp_max_micro_batch_size": 4, "concurrency": 64}
    assert first["what_if_tok_s"].to_list() != second["what_if_tok_s"].to_list()


def test_config_diff_explorer(runs: views.RunSet) -> None:
    ex = ConfigDiffExplorer(runs)
    rows = ex.view.record["config_diff"].height
    ex.controls["contains"].value = "pp_"
    assert 0 < ex.view.record["config_diff"].height < rows
    ex.controls["only_different"].value = False
    ex.controls["runs"].value = ("PP8",)
    assert ex.view.record["config_diff"]["run"].unique().to_list() == ["PP8"]


def test_widget_layout(runs: views.RunSet) -> None:
    ex = ConfigDiffExplorer(runs)
    box = ex.widget
    assert len(box.children) == 2 and len(box.children[0].children) == 3


def test_explorers_take_run_directories(runs: views.RunSet) -> None:
    paths = [str(p) for p in runs.paths]
    from_strings = ScalingExplorer(paths)
    assert from_strings.runs.labels == runs.labels
    assert from_strings.view.key == "gap"
    from_paths = ConfigDiffExplorer([run.path for run in runs])
    assert from_paths.runs.labels == runs.labels
    from_runs = TimelineExplorer(list(runs))  # loaded Run objects
    assert from_runs.controls["run"].value == "PP8"
    assert GpuExplorer(",".join(paths)).runs.labels == runs.labels
    assert WhatIfExplorer(paths).runs.labels == runs.labels
