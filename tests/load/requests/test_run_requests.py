"""A run directory's server request records: files of their own and the log's lines."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
from helpers import TEST_DATA
from helpers.restart_log import write_restart_log

from toolkit.analyze.requests import request_breakdown, request_timeline, requests_of_phases
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

DATA = TEST_DATA / "requests"


def test_run_joins_request_files_and_log_lines(tmp_path: Path) -> None:
    shutil.copy(DATA / "server-request-lines.log", tmp_path / "server.log")
    (tmp_path / "metrics").mkdir()
    shutil.copy(DATA / "sglang-request-metrics-20251120_14.log", tmp_path / "metrics")
    run = load_run(tmp_path, cache=False)
    table = run.server_requests
    assert table is not None
    assert table.height == 8 + 5
    assert set(table["form"]) == {"time-stats", "finish", "log-json", "export"}


def test_run_without_request_records_has_none(tmp_path: Path) -> None:
    shutil.copy(TEST_DATA / "requests" / "gpu-node-3_0.log", tmp_path / "events.log")
    assert load_run(tmp_path, cache=False).server_requests is not None
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing here\n")
    assert load_run(empty, cache=False).server_requests is None


def test_requests_of_a_restart_are_kept_apart(tmp_path: Path) -> None:
    """Two starts in one log: each request line keeps its launch, and the breakdown of the
    analysed start (the last that decoded) counts only its own requests."""
    write_restart_log(tmp_path / "server.log")
    run = load_run(tmp_path, cache=False)
    table = run.server_requests
    assert table is not None and table.height == 10  # every line kept, each with its launch
    per_launch = dict(table.group_by("launch").agg(pl.col("rid").unique().sort()).iter_rows())
    assert per_launch == {0: ["a1", "a2", "a3"], 1: ["b1", "b2"]}
    ctx = RunAnalysis(run)
    assert ctx.server_args["max_running_requests"] == 64
    phases = ctx.phases
    assert phases.height and phases["start"].min() >= datetime(2025, 11, 20, 15)
    kept = requests_of_phases(table, phases, run.launch_spans)
    assert sorted(set(kept["rid"])) == ["b1", "b2"]
    split = request_breakdown(table, phases, launches=run.launch_spans)
    assert split["requests"].sum() == 2
    mixed = request_breakdown(table, phases)  # without the spans both starts count
    assert mixed["requests"].sum() == 5
    assert request_timeline(table, phases, launches=run.launch_spans)["rid"].sort().to_list() == [
        "b1",
        "b2",
    ]
