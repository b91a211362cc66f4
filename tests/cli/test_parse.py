"""The ``ppscope`` command line, run in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main

FIXTURES = TEST_DATA / "sglang"


def test_parse_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "--json", "--no-cache", str(FIXTURES / "v0.5.23-pp8.log")]) == 0
    out = json.loads(capsys.readouterr().out)
    (f,) = out["files"]
    assert f["format"] == "sglang-log"
    assert f["lines"] == 64
    assert f["tables"]["batches"] == 32
    assert f["counts"]["decode"] == 16 and f["counts"]["prefill"] == 16
    assert f["incomplete_batches"] == 0
    (launch,) = f["launches"]
    assert launch["server_args"]["pp_size"] == 8
    assert launch["server_args"]["pp_async_batch_depth"] == 8
    assert launch["startup"]["max_total_num_tokens"] == 327680
    assert launch["batch_lines"] == 32 and launch["start"] <= launch["end"]
    assert out["runs"] == []  # a file, not a run directory


def test_parse_json_is_strict_json_with_non_finite_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["parse", "--json", "--no-cache", str(FIXTURES / "bad-input.log")]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    out = json.loads(text)
    assert out["files"][0]["incomplete_batches"] == 2


def test_parse_directory_and_text_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "server.log").write_bytes((FIXTURES / "journald-short.log").read_bytes())
    (tmp_path / "notes.txt").write_text("nothing to see\n")
    assert main(["parse", "--no-cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "[sglang-log]" in out and "wrapper journald-short" in out
    assert "notes.txt  [unknown]" in out
    assert "pp_size=8" in out


def test_strict_parse_fails_with_location(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "bad-input.log"
    assert main(["parse", "--strict", "--no-cache", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err


def test_missing_path_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "no/such/file.log"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_parse_places_each_benchmark_run_on_the_log_clock(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The sample PP8 run: seven benchmark runs (c = 1 … 64), each on its own phase, with the
    requests the log shows in flight next to what the run offered."""
    sample = Path(__file__).resolve().parents[2] / "data" / "incident" / "pp8"
    assert main(["parse", "--json", "--no-cache", "-q", str(sample)]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    phases = run["phases"]
    assert [p["offered"] for p in phases] == [1, 2, 4, 8, 16, 32, 64]
    assert [p["bench_run"] for p in phases] == list(range(7))
    for p in phases:
        assert p["start"] < p["end"]
        assert p["peak_running"] == pytest.approx(p["offered"], rel=0.05)
    assert main(["parse", "--no-cache", "-q", str(sample)]) == 0
    text = capsys.readouterr().out
    assert "[run: benchmark phases on the log's clock]" in text
    assert "placement" in text


def test_parse_lists_runtime_changes_and_server_info(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[2026-05-25 21:40:01 PP0] server_args=ServerArgs(pp_size=2, "
        "pp_max_micro_batch_size=None)\n"
        "[2026-05-25 21:40:05 PP0] Config updated via context override: "
        "{'pp_max_micro_batch_size': 4}\n"
        "[2026-05-25 21:40:05 PP1] Config updated via context override: "
        "{'pp_max_micro_batch_size': 4}\n"
        "[2026-05-25 21:40:09 PP0] Updating tp_size is not supported.\n"
    )
    info = tmp_path / "server_info.jsonl"
    calls = [
        {"ts": f"2026-05-25T21:40:0{s}", "phase": None, "when": "start", "endpoint": "/x",
         "info": {"model_path": "m", "pp_size": 2, "pp_max_micro_batch_size": v}}
        for s, v in ((2, None), (6, 4))
    ]  # fmt: skip
    info.write_text("".join(json.dumps(c) + "\n" for c in calls))
    assert main(["parse", "--json", "--no-cache", str(log), str(info)]) == 0
    out = json.loads(capsys.readouterr().out)
    changes = out["files"][0]["launches"][0]["runtime_changes"]
    assert [(c["lineno"], c["key"], c["value"], c["status"]) for c in changes] == [
        (2, "pp_max_micro_batch_size", 4, "set"),
        (4, "tp_size", None, "refused"),
    ]
    assert out["files"][1] | {"path": None} == {
        "path": None,
        "format": "server-info",
        "answers": 2,
        "start": "2026-05-25T21:40:02",
        "end": "2026-05-25T21:40:06",
        "changed": ["pp_max_micro_batch_size"],
    }
    assert main(["parse", "--no-cache", str(log), str(info)]) == 0
    text = capsys.readouterr().out
    assert "runtime change, line 2: pp_max_micro_batch_size=4 set" in text
    assert "runtime change, line 4: tp_size=null refused (not supported)" in text
    assert "2 answers; changed: pp_max_micro_batch_size" in text


def test_parse_lists_metrics_files(capsys: pytest.CaptureFixture[str]) -> None:
    data = TEST_DATA / "prometheus"
    assert main(["parse", "--json", "--no-cache", str(data)]) == 0
    files = {Path(f["path"]).name: f for f in json.loads(capsys.readouterr().out)["files"]}
    snap, query = files["metrics.jsonl"], files["query_range.json"]
    assert snap["format"] == "sglang-metrics-jsonl" and query["format"] == "prometheus-query-range"
    assert snap["scrapes"] == len((data / "metrics.jsonl").read_text().splitlines())
    assert snap["pp_ranks"] == [0, 1, 2, 3] and snap["series"] > 4 * 4
    assert snap["start"] < snap["end"]
    assert main(["parse", "--no-cache", str(data / "metrics.jsonl")]) == 0
    text = capsys.readouterr().out
    assert "series over" in text and "PP3" in text and "went down" in text
