"""Saved ``/metrics`` answers (``curl``): timed by a witness saved with them, else listed as
an untimed snapshot, never differenced; a run of metrics alone is a run with inputs."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.diagnose import RunAnalysis, diagnose
from toolkit.load.prometheus import TEXT, load_metrics
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff
from toolkit.schema.prometheus import METRICS, UNTIMED

DATA = TEST_DATA / "prometheus"
UNTIMED_TEXT = DATA / "metrics-untimed.txt"


def test_saved_answers_are_their_own_format_and_nothing_else_is() -> None:
    for name in ("metrics-untimed.txt", "metrics-curl-i.txt", "metrics-dated.txt"):
        assert sniff(DATA / name) == TEXT
    assert sniff(TEST_DATA / "gpu" / "exporter-2x-two-scrapes.prom") == "dcgm-exporter"
    assert sniff(TEST_DATA / "sglang" / "journald-short.log") == "sglang-log"
    assert sniff(DATA / "metrics.jsonl") == "sglang-metrics-jsonl"


def test_an_untimed_answer_is_listed_as_read() -> None:
    m = load_metrics([UNTIMED_TEXT])
    assert m.samples.height == 0 and m.samples.schema == METRICS
    assert m.scrapes == 1 and m.untimed.schema == UNTIMED
    assert m.untimed_sources == [str(UNTIMED_TEXT)]

    def value(metric: str, part: str = "value", **ranks: int) -> list[float]:
        rows = m.untimed.filter((pl.col("metric") == metric) & (pl.col("part") == part))
        for rank, n in ranks.items():
            rows = rows.filter(pl.col(rank) == n)
        return rows["value"].to_list()

    assert value("sglang:num_running_reqs", pp_rank=1) == [16.0]  # a gauge
    assert value("sglang:prompt_tokens_total") == [512000.0]  # lifetime, not differenced
    assert value("sglang:gpu_execution_seconds_total", pp_rank=0) == [610.25]
    assert value("sglang:time_to_first_token_seconds", "sum") == [120.5]
    assert value("sglang:time_to_first_token_seconds", "count") == [400.0]
    labels = json.loads(m.untimed.filter(pl.col("metric").str.contains("gpu_exec"))["labels"][0])
    assert labels["category"] == "forward_decode" and "pp_rank" not in labels
    assert m.untimed.height == 12  # 2 gc, 2 + 2 gauges, 2 busy, 2 token counters, sum + count
    notes = " | ".join(m.notes)
    assert "4 histogram bucket samples left out" in notes and "5 _created samples" in notes
    assert load_metrics([UNTIMED_TEXT]).summary()["untimed_scrapes"] == 1


def test_an_http_date_header_times_the_answer() -> None:
    m = load_metrics([DATA / "metrics-curl-i.txt"], clock_offset_s=3600.0)
    assert m.untimed.height == 0
    running = m.samples.filter(pl.col("metric") == "sglang:num_running_reqs")
    # uvicorn's Date is UTC; clock_offset_s moves it onto the log's clock as for any trace
    assert running["ts"].unique().to_list() == [datetime(2026, 5, 1, 11, 15, 40)]
    assert running["value"].to_list() == [16.0, 16.0]
    assert not m.samples.filter(pl.col("kind") == "counter").height  # one scrape: no interval
    assert any("5 HTTP status and header lines" in n for n in m.notes)


def test_date_lines_time_each_answer_and_counters_are_differenced() -> None:
    m = load_metrics([DATA / "metrics-dated.txt"])
    assert m.scrapes == 2 and m.untimed.height == 0
    prompt = m.samples.filter(pl.col("metric") == "sglang:prompt_tokens_total").row(0, named=True)
    assert prompt["ts"] == datetime(2026, 5, 1, 10, 15, 50)
    assert (prompt["value"], prompt["interval_s"]) == (16000.0, 10.0)
    busy = m.samples.filter(pl.col("metric") == "sglang:gpu_execution_seconds_total").sort(
        "pp_rank"
    )
    assert busy["value"].to_list() == pytest.approx([9.5, 9.0])
    ttft = m.samples.filter(pl.col("metric") == "sglang:time_to_first_token_seconds")
    assert ttft["value"].to_list() == pytest.approx([4.0 / 16]) and ttft["count"][0] == 16.0
    assert any("2 time lines" in n for n in m.notes)


def test_answers_appended_without_a_witness_are_two_untimed_snapshots() -> None:
    m = load_metrics([DATA / "metrics-two-untimed.txt"])
    assert m.scrapes == 2 and m.samples.height == 0
    prompt = m.untimed.filter(pl.col("metric") == "sglang:prompt_tokens_total")
    assert prompt["value"].to_list() == [512000.0, 528000.0]
    assert prompt["lineno"].n_unique() == 2


def test_a_metrics_only_run_has_inputs_and_says_it_gives_no_rates(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(UNTIMED_TEXT, run / "metrics.txt")
    loaded = load_run(run, cache=False)
    assert loaded.has_inputs
    (note,) = loaded.mismatches
    assert note["input"] == "metrics" and note["files"] == "metrics.txt"
    assert "a single untimed snapshot gives no rates" in note["detail"]
    found = {f.id: f for f in diagnose([RunAnalysis(loaded)])}
    assert "no rates" in found["input-mismatch"].summary
    timed = tmp_path / "timed"
    timed.mkdir()
    shutil.copy(DATA / "metrics-dated.txt", timed / "metrics.txt")
    assert load_run(timed, cache=False).has_inputs
    assert load_run(timed, cache=False).mismatches == []
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    shutil.copy(DATA / "metrics.jsonl", snapshots)
    assert load_run(snapshots, cache=False).has_inputs
