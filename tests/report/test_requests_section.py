"""The report's request section: server-side TTFT split per phase, and its degradation."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.restart_log import write_restart_log

from toolkit.report import sections as views
from toolkit.report.display import chart_spec

DATA = TEST_DATA / "requests"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> views.RunSet:
    root = tmp_path_factory.mktemp("req-runs")
    with_records = root / "pp2"
    with_records.mkdir()
    shutil.copy(DATA / "server-request-lines.log", with_records / "server.log")
    shutil.copy(DATA / "sglang-request-metrics-20251120_14.log", with_records)
    (with_records / "run.toml").write_text('label = "PP2"\n')
    return views.load_runs([with_records], progress=False)


def test_section_shows_the_split_a_table_and_the_timeline(runs: views.RunSet) -> None:
    view = views.request_split(runs)
    (record,) = view.record["requests"]
    split = record["phases"]
    assert record["run"] == "PP2"
    assert split["requests"].sum() == 5 + 6  # export rows + the log's distinct requests
    assert len(view.charts) == 2
    bars = chart_spec(view.charts[0])
    assert bars["title"]["text"].startswith("PP2: Where the time to first token goes")
    rows = bars["data"]["values"]
    assert {r["part"] for r in rows} == {"queue", "prefill"}
    queue = next(r["ms"] for r in rows if r["part"] == "queue")
    assert queue == pytest.approx(split["queue_median_ms"][0], abs=1e-3)
    parts = chart_spec(view.charts[1])["data"]["values"]
    # the export states first tokens; the log's time-stats lines only queue and forward
    assert {r["part"] for r in parts} == {"queue", "prefill", "decode", "forward"}
    assert all(r["t0"] <= r["t1"] for r in parts)
    assert "ttft_median_ms" in view.html()


def test_section_without_records_says_how_to_get_them(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(TEST_DATA / "sglang" / "v0.5.23-pp8.log", bare / "server.log")
    view = views.request_split(views.load_runs([bare], progress=False))
    assert view.record == {"requests": []}
    assert "--export-metrics-to-file" in view.html()


def test_time_stats_only_run_is_not_drawn_as_a_ttft(tmp_path: Path) -> None:
    run = tmp_path / "stats"
    run.mkdir()
    lines = (DATA / "server-request-lines.log").read_text().splitlines()
    keep = [ln for ln in lines if "Time Stats(" in ln or "TimeStats(" in ln or "server_args" in ln]
    (run / "server.log").write_text("\n".join(keep) + "\n")
    view = views.request_split(views.load_runs([run], progress=False))
    (timeline,) = view.charts  # queue and forward only: no TTFT bars
    assert {r["part"] for r in chart_spec(timeline)["data"]["values"]} == {"queue", "forward"}
    assert "cannot be split" in view.html()
    (record,) = view.record["requests"]
    assert record["phases"]["queue_median_ms"][0] is not None


def test_requests_of_another_start_are_left_out_and_counted(tmp_path: Path) -> None:
    run = tmp_path / "restart"
    run.mkdir()
    write_restart_log(run / "server.log")
    view = views.request_split(views.load_runs([run], progress=False))
    (record,) = view.record["requests"]
    assert record["phases"]["requests"].sum() == 2  # b1, b2 of the analysed start
    assert "3 request(s) (6 record(s)) of another server start" in view.html()
