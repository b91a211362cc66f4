"""The per-request JSON-lines files SGLang writes: metrics export and JSON request logs."""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit import load_sglang_log
from toolkit.errors import ParseError
from toolkit.load.requests import REQUESTS_FORMAT, load_server_requests
from toolkit.load.sniff import sniff
from toolkit.schema.requests import SERVER_REQUESTS

DATA = TEST_DATA / "requests"
METRICS_055 = DATA / "sglang-request-metrics-20251120_14.log"
PLAIN = DATA / "sglang-request-metrics-20260402_09.log"
NEWEST = DATA / "sglang-request-metrics-20260402_10.log"
JSON_LOG = DATA / "gpu-node-3_0.log"


@pytest.mark.parametrize("path", [METRICS_055, PLAIN, NEWEST, JSON_LOG])
def test_request_files_are_sniffed_by_content(path: Path) -> None:
    assert sniff(path) == REQUESTS_FORMAT


def test_server_log_and_other_jsonl_are_not_request_files() -> None:
    assert sniff(DATA / "server-request-lines.log") == "sglang-log"


def test_export_with_metrics_splits_ttft_into_queue_and_prefill() -> None:
    got = load_server_requests(METRICS_055)
    t = got.table
    assert t.schema == SERVER_REQUESTS
    assert t.height == 5  # 4 finished + 1 aborted; the cut last line is counted, not a row
    assert got.skipped == {"not a complete JSON object (a cut or edited line)": 1}
    assert got.lines == 6
    first = t.filter(pl.col("lineno") == 1).row(0, named=True)
    assert first["ts"] == datetime(2025, 11, 20, 14, 0, 0, 123000)  # named hour 14 = UTC
    assert first["queue_ms"] == pytest.approx(10.0)
    assert first["ttft_ms"] == pytest.approx(91.0, abs=1e-3)
    assert first["prefill_ms"] == pytest.approx(81.0, abs=1e-3)
    assert first["decode_ms"] == pytest.approx(12.0 * 255, abs=1e-2)
    assert first["e2e_ms"] == pytest.approx(91.0 + 12.0 * 255, abs=1e-2)
    assert (first["input_len"], first["output_len"], first["cached_len"]) == (1024, 256, 0)
    assert first["finish_reason"] == "length" and first["ok"]
    abort = t.filter(~pl.col("ok")).row(0, named=True)
    assert abort["error"] == "Abort in waiting queue"
    assert abort["ts"] is None and abort["e2e_ms"] == pytest.approx(2500.0)


def test_export_without_metrics_has_latency_but_no_times() -> None:
    t = load_server_requests(PLAIN).table
    assert t["e2e_ms"].to_list() == pytest.approx([900.0, 1000.0, 1100.0])
    assert t["ts"].null_count() == t.height  # no stamp written: none guessed
    assert t["input_len"].to_list() == [200, 201, 202]


def test_newest_export_names_its_stamps_differently() -> None:
    t = load_server_requests(NEWEST).table
    assert t["ttft_ms"].to_list() == pytest.approx([250.0] * 3, abs=1e-3)
    assert t["queue_ms"].to_list() == pytest.approx([48.0] * 3)
    assert t["forward_ms"].to_list() == pytest.approx([1200.0] * 3, abs=1e-3)
    # named hour 10, finished at 09 UTC: the server ran at UTC+1, its clock is used
    assert t["end_ts"][0] == datetime(2026, 4, 2, 10, 0, 1, 250000)


def test_json_request_log_keeps_finished_events_and_counts_arrivals() -> None:
    got = load_server_requests(JSON_LOG)
    assert got.table["form"].to_list() == ["log-json", "log-json"]
    assert got.skipped == {"request.received event (arrival only)": 2}
    row = got.table.filter(pl.col("lineno") == 3).row(0, named=True)
    assert row["end_ts"] == datetime(2025, 12, 1, 10, 0, 2, 500000)
    assert row["ts"] == datetime(2025, 12, 1, 10, 0, 0, 500000)  # end - e2e_latency


def test_no_request_text_is_kept() -> None:
    t = load_server_requests([METRICS_055, JSON_LOG]).table
    text = " ".join(str(v) for row in t.iter_rows() for v in row)
    assert "Summarize" not in text and "max_new_tokens" not in text


def test_strict_names_file_and_line_of_a_cut_record() -> None:
    with pytest.raises(ParseError) as e:
        load_server_requests(METRICS_055, strict=True)
    assert e.value.lineno == 6 and "not a complete JSON object" in e.value.reason
    load_server_requests(JSON_LOG, strict=True)  # arrivals are no error


def test_gzip_and_several_files(tmp_path: Path) -> None:
    gz = tmp_path / "m.log.gz"
    gz.write_bytes(gzip.compress(NEWEST.read_bytes()))
    got = load_server_requests([gz, PLAIN])
    assert got.table.height == 6 and got.lines == 6
    assert set(got.table["source"]) == {str(gz), str(PLAIN)}


def test_keys_inside_the_request_text_never_count(tmp_path: Path) -> None:
    decoy = 'say "e2e_latency": 99, "id": "fake", "finish_reason": {"type": "abort"}'
    record = {
        "request_parameters": json.dumps({"text": decoy, "rid": "r1"}),
        "id": "r1",
        "finish_reason": {"type": "stop", "matched": 2},
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "e2e_latency": 0.5,
    }
    event = {
        "timestamp": "2025-12-01T10:00:00.500000",
        "event": "request.finished",
        "rid": "r2",
        "obj": {"text": decoy, "rid": "r2", "custom_labels": {"e2e_latency": 7}},
        "out": {"text": decoy, "meta_info": {"id": "r2", "e2e_latency": 1.5}},
    }
    path = tmp_path / "m.log"
    path.write_text(json.dumps(record) + "\n" + json.dumps(event, ensure_ascii=False) + "\n")
    t = load_server_requests(path).table.sort("lineno")
    assert t["rid"].to_list() == ["r1", "r2"]
    assert t["e2e_ms"].to_list() == [500.0, 1500.0]
    assert t["finish_reason"].to_list() == ["stop", None]


def test_epochs_land_on_the_server_clock_whatever_this_machines_zone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from toolkit.load.requests import fields

    class Tokyo:
        tm_gmtoff = 9 * 3600

    monkeypatch.setattr(fields.time, "localtime", lambda: Tokyo)
    named = load_server_requests(METRICS_055).table  # the file name's hour: UTC
    assert named["ts"][0] == datetime(2025, 11, 20, 14, 0, 0, 123000)
    renamed = tmp_path / "requests.jsonl"
    shutil.copy(METRICS_055, renamed)  # no name, no line time: this machine's zone
    assert load_server_requests(renamed).table["ts"][0] == datetime(2025, 11, 20, 23, 0, 0, 123000)
    log = load_sglang_log(DATA / "server-request-lines.log", cache=False).requests
    entry = log.filter(pl.col("lineno") == 9)["ts"][0]  # ReqTimeStats entry_time, an epoch
    assert entry == datetime(2025, 11, 20, 14, 1, 3, 350000)  # the log's lines: UTC
