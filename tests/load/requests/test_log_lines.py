"""Request lines inside a server log: ReqTimeStats, Finish (text and JSON), Receive."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit import load_sglang_log
from toolkit.errors import ParseError
from toolkit.schema.requests import SERVER_REQUESTS

LOG = TEST_DATA / "requests" / "server-request-lines.log"


@pytest.fixture(scope="module")
def requests() -> pl.DataFrame:
    return load_sglang_log(LOG, cache=False).requests


def test_every_request_line_is_counted() -> None:
    counts = load_sglang_log(LOG, cache=False).request_counts()
    assert counts == {"finish": 3, "log-json": 1, "received": 2, "time-stats": 4}


def test_rows_follow_the_schema_and_keep_each_finished_line(requests: pl.DataFrame) -> None:
    assert requests.schema == SERVER_REQUESTS
    assert requests["lineno"].to_list() == [6, 7, 8, 9, 10, 12, 13, 14]


def test_old_time_stats_line_per_pp_stage(requests: pl.DataFrame) -> None:
    rows = requests.filter(pl.col("form") == "time-stats").head(2)
    assert rows["pp"].to_list() == [0, 1]
    r = rows.row(0, named=True)
    assert (r["queue_ms"], r["forward_ms"]) == (1.52, 1712.4)
    assert (r["input_len"], r["output_len"], r["cached_len"]) == (6, 128, None)
    assert r["end_ts"] == datetime(2025, 11, 20, 14, 1, 2)  # the line's time
    assert r["ts"] == datetime(2025, 11, 20, 14, 1, 0, 286080)  # end - queue - forward


def test_new_time_stats_line_has_wall_clock_entry(requests: pl.DataFrame) -> None:
    r = requests.filter(pl.col("lineno") == 9).row(0, named=True)
    assert r["ts"] == datetime(2025, 11, 20, 14, 1, 3, 350000)  # the log is on UTC
    assert r["cached_len"] == 1024 and r["queue_ms"] == 250.0


def test_finish_text_reads_meta_after_the_output_text(requests: pl.DataFrame) -> None:
    r = requests.filter(pl.col("lineno") == 10).row(0, named=True)
    assert r["rid"] == "e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0"
    assert r["e2e_ms"] == pytest.approx(12.3)  # not the 42 or 99 inside the texts
    assert r["ok"] is False and r["error"].startswith("The input (40000 tokens)")
    assert "ignore this" not in " ".join(str(v) for v in r.values())


def test_cut_finish_line_is_a_row_with_only_its_id(requests: pl.DataFrame) -> None:
    r = requests.filter(pl.col("lineno") == 13).row(0, named=True)
    assert r["rid"] == "deadbeefdeadbeefdeadbeefdeadbeef" and r["e2e_ms"] is None


def test_json_event_on_stderr(requests: pl.DataFrame) -> None:
    r = requests.filter(pl.col("form") == "log-json").row(0, named=True)
    assert r["ttft_ms"] == pytest.approx(875.0)
    assert r["queue_ms"] == pytest.approx(750.0)
    assert r["prefill_ms"] == pytest.approx(125.0)


def test_prefill_disaggregation_line_reads_its_queue(requests: pl.DataFrame) -> None:
    r = requests.filter(pl.col("lineno") == 14).row(0, named=True)
    assert (r["queue_ms"], r["forward_ms"], r["input_len"]) == (5.0, 40.0, 99)


def test_strict_names_a_cut_finish_line() -> None:
    with pytest.raises(ParseError) as e:
        load_sglang_log(LOG, cache=False, strict=True)
    assert e.value.lineno == 13 and "Finish line cut" in e.value.reason
