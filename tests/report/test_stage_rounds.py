"""The report's per-stage waterfall of one loop iteration at each profiled load, and its note
when a run has no profiler traces."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
from helpers import TEST_DATA

from toolkit.analyze.stage_account import round_waterfall
from toolkit.chart.stage_round import PART_COLORS, stage_round_chart
from toolkit.report import sections as views
from toolkit.report.display import chart_spec
from toolkit.synth.torch_trace import PipelineProfile, write_pp_profile

SPEC = PipelineProfile(compute_ms=(3.0, 3.0, 5.0), steps=6, jitter=0.05)


def _run(tmp_path: Path, profile: bool) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TEST_DATA / "sglang" / "v0.5.23-pp8.log", run / "server.log")
    if profile:
        write_pp_profile(run / "profile" / "phase-0-c8", SPEC)
    return run


def test_one_iteration_per_stage_at_each_load(tmp_path: Path) -> None:
    view = views.stage_rounds(views.load_runs([_run(tmp_path, True)], progress=False))
    assert view.chart is not None and not view.notes
    rows = chart_spec(view.chart)["data"]["values"]
    assert {r["pp"] for r in rows} == {0, 1, 2}
    assert {r["part"] for r in rows} <= set(PART_COLORS)
    table = next(i for i in view.items if isinstance(i, pl.DataFrame))
    assert table["pp"].to_list() == [0, 1, 2] and table["steps"].to_list() == [6] * 3
    record = view.record["stage_rounds"][0]["phases"][0]
    assert record["slowest_pp"] == 2 and record["stages"] == 3


def test_without_traces_the_section_says_how_to_record_them(tmp_path: Path) -> None:
    view = views.stage_rounds(views.load_runs([_run(tmp_path, False)], progress=False))
    assert view.chart is None and "--profile" in view.notes[0]


def test_the_waterfall_lays_each_stages_parts_end_to_end(tmp_path: Path) -> None:
    from toolkit.analyze.stage_account import stage_account
    from toolkit.load.profile import load_profile

    truth = write_pp_profile(tmp_path / "p", SPEC)
    account = stage_account(load_profile(sorted((tmp_path / "p").glob("*.gz")), tmp_path))
    frame = round_waterfall(account)
    for pp, rows in frame.group_by("pp"):
        rows = rows.sort("start_ms")
        assert rows["start_ms"][0] == 0.0
        assert rows["start_ms"][1:].to_list() == rows["end_ms"][:-1].to_list()
        span = truth.filter(pl.col("pp") == pp[0])["span_ms"].mean()
        assert abs(rows["end_ms"][-1] - span) <= 0.01 * span
    chart = stage_round_chart(frame.with_columns(load=pl.lit("at 8 concurrent requests")))
    assert chart_spec(chart)["encoding"]["x2"]["field"] == "end_ms"
