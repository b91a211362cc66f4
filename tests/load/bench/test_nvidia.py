"""GenAI-Perf and AIPerf summary exports (CSV and JSON)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError
from toolkit.load.bench.nvidia import read_json
from toolkit.load.bench.results import load_bench, sniff_bench_format

DATA = TEST_DATA / "bench"
GENAI = DATA / "genai-perf" / "Llama-3.1-8B-openai-chat-concurrency8"
AIPERF = DATA / "aiperf"


def test_sniffing() -> None:
    assert sniff_bench_format(GENAI / "profile_export_genai_perf.csv") == "genai-perf-csv"
    assert sniff_bench_format(GENAI / "profile_export_genai_perf.json") == "genai-perf-json"
    assert sniff_bench_format(AIPERF / "flat" / "profile_export_aiperf.json") == "aiperf-json"
    assert sniff_bench_format(AIPERF / "records" / "profile_export_aiperf.json") == "aiperf-json"
    assert sniff_bench_format(AIPERF / "flat" / "profile_export_aiperf.csv") == "genai-perf-csv"


def test_genai_perf_csv() -> None:
    (run,) = load_bench(GENAI / "profile_export_genai_perf.csv").runs.to_dicts()
    assert run["output_tok_s"] == pytest.approx(908.43)
    assert run["request_per_s"] == pytest.approx(3.55)
    assert run["completed"] == 142
    assert run["e2e_mean_ms"] == pytest.approx(2251.08)  # quoted "2,251.08"
    assert run["e2e_p99_ms"] == pytest.approx(2655.12)
    assert run["ttft_median_ms"] == pytest.approx(37.96)
    # GenAI-Perf's "Inter Token Latency" is per-request TPOT.
    assert run["tpot_mean_ms"] == pytest.approx(8.65)
    assert run["itl_mean_ms"] is None
    assert (run["input_len"], run["output_len"]) == (550.0, 256.0)
    assert (run["concurrency"], run["concurrency_from"]) == (8, "path")
    extra = json.loads(run["extra"])
    assert extra["output_token_throughput_per_user"] == pytest.approx(115.71)


def test_genai_perf_json() -> None:
    (run,) = load_bench(GENAI / "profile_export_genai_perf.json").runs.to_dicts()
    assert (run["max_concurrency"], run["concurrency_from"]) == (8, "max_concurrency")
    assert run["output_tok_s"] == pytest.approx(908.43)
    assert run["tpot_p90_ms"] == pytest.approx(9.22)
    assert run["ttft_std_ms"] == pytest.approx(17.7)
    assert run["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert run["backend"] == "chat"


def test_aiperf_flat_json() -> None:
    (run,) = load_bench(AIPERF / "flat" / "profile_export_aiperf.json").runs.to_dicts()
    assert run["concurrency"] == 100
    assert run["output_tok_s"] == pytest.approx(1274.63)
    assert run["duration_s"] == pytest.approx(15.1966)
    assert run["completed"] == 200
    assert (run["total_input_tokens"], run["total_output_tokens"]) == (110000, 19370)
    assert run["tpot_p95_ms"] == pytest.approx(54.32)
    assert run["e2e_median_ms"] == pytest.approx(5799.9)
    assert run["ts"] == datetime(2025, 10, 17, 20, 22, 8, 939000)
    assert run["model"] == "openai/gpt-oss-20b"
    extra = json.loads(run["extra"])
    assert extra["inter_chunk_latency"] == pytest.approx(51.7)
    assert extra["schema_version"] == "1.3"


def test_aiperf_records_json() -> None:
    (run,) = load_bench(AIPERF / "records" / "profile_export_aiperf.json").runs.to_dicts()
    assert run["concurrency"] == 1
    assert run["output_tok_s"] == pytest.approx(52.69)
    assert run["ttft_p90_ms"] == pytest.approx(251.45)


def test_aiperf_csv_skips_telemetry() -> None:
    (run,) = load_bench(AIPERF / "flat" / "profile_export_aiperf.csv").runs.to_dicts()
    assert run["total_tok_s"] == pytest.approx(8512.36)
    assert run["duration_s"] == pytest.approx(15.2)
    assert run["completed"] == 200
    assert run["ttft_p99_ms"] == pytest.approx(4119.33)
    assert "gpu_power_usage" not in (run["extra"] or "")


def test_seconds_are_converted(tmp_path: Path) -> None:
    obj = json.loads((GENAI / "profile_export_genai_perf.json").read_text())
    obj["time_to_first_token"] = {"unit": "ns", "avg": 41_820_000, "p50": 37_960_000}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(obj))
    (run,) = load_bench(path).runs.to_dicts()
    assert run["ttft_mean_ms"] == pytest.approx(41.82)


def test_csv_without_metric_rows(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("Metric,avg,min,max\n")
    with pytest.raises(ParseError, match="no metric rows"):
        load_bench(path)


def test_aiperf_records_give_absolute_start_times() -> None:
    path = AIPERF / "flat" / "profile_export.jsonl"
    assert sniff_bench_format(path) == "aiperf-json"
    results = load_bench(path)
    (run,) = results.runs.to_dicts()
    assert (run["completed"], run["failed"]) == (5, 1)  # the warm-up record is left out
    assert run["duration_s"] == pytest.approx(3.0)  # first start to last end
    assert run["output_tok_s"] == pytest.approx(5 * 97 / 3.0)
    assert run["ttft_mean_ms"] == pytest.approx(sum([255.9, 301.2, 287.4, 402.8, 350.0]) / 5)
    assert run["ttft_median_ms"] == pytest.approx(301.2)
    assert run["itl_mean_ms"] == pytest.approx(17.5)  # the chunk gaps, pooled
    assert json.loads(run["extra"]) == {"computed_from": "per-request records"}
    requests = results.requests
    assert requests.height == 6
    start = 1760732528939332000
    assert requests["ts"][0] == datetime.fromtimestamp(start / 1e9)
    assert requests["start_s"].to_list() == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0, 1.25])
    assert requests["ok"].to_list() == [True] * 5 + [False]
    assert requests["error"][5] == "Server encountered an internal error"


def test_one_run_exported_three_ways_counts_once() -> None:
    results = load_bench(AIPERF / "flat")
    (run,) = results.runs.to_dicts()
    assert (run["format"], run["concurrency"], run["run"]) == ("aiperf-json", 100, 0)
    assert results.requests.height == 6
    assert set(results.requests["run"]) == {0}
    assert set(results.requests["concurrency"]) == {100}
    runs = {Path(f["path"]).name: f["runs"] for f in results.summary()}
    assert runs == {
        "profile_export.jsonl": 0,
        "profile_export_aiperf.csv": 0,
        "profile_export_aiperf.json": 1,
    }
    genai = load_bench(GENAI)
    assert genai.runs["format"].to_list() == ["genai-perf-json"]


def test_a_line_that_is_no_record_is_named_and_the_others_used(tmp_path: Path) -> None:
    lines = (AIPERF / "flat" / "profile_export.jsonl").read_text().splitlines()
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join([*lines[:3], '{"metadata": {}}', *lines[3:]]) + "\n")
    whole = load_bench(AIPERF / "flat" / "profile_export.jsonl")
    results = load_bench(path)
    assert len(results.requests) == len(whole.requests)
    [bad] = results.damaged
    assert (bad.lineno, bad.reason) == (4, "not an AIPerf request record")
    assert results.summary()[0]["damaged"] == ["line 4: not an AIPerf request record"]


def test_aiperf_0_8_csv_maps_every_printed_quantity() -> None:
    path = AIPERF / "v0.8" / "profile_export_aiperf.csv"
    assert b"\r\n" in path.read_bytes()
    assert sniff_bench_format(path) == "genai-perf-csv"
    (run,) = load_bench(path).runs.to_dicts()
    assert (run["total_input_tokens"], run["total_output_tokens"]) == (327680, 80448)
    assert (run["completed"], run["failed"]) == (320, 2)
    assert run["output_tok_s"] == pytest.approx(1608.96)
    assert run["duration_s"] == pytest.approx(50.0)
    assert run["ttft_p99_ms"] == pytest.approx(1180.66)
    assert run["tpot_median_ms"] == pytest.approx(18.5)
    extra = json.loads(run["extra"])
    # quantities with no column are kept by name, statistics the columns do not hold too
    assert extra["time_to_second_token"] == pytest.approx(38.2)
    assert extra["time_to_second_token_p99"] == pytest.approx(66.1)
    assert extra["output_token_throughput_per_user_p50"] == pytest.approx(54.05)
    assert extra["time_to_first_token_max"] == pytest.approx(1210.04)
    assert extra["output_sequence_length_p99"] == pytest.approx(256.0)
    assert not any(k.startswith("gpu_") for k in extra)  # the telemetry section is the GPU's


def test_early_aiperf_json_keyed_by_display_name() -> None:
    path = AIPERF / "display" / "profile_export_aiperf.json"
    assert sniff_bench_format(path) == "aiperf-json"
    (run,) = load_bench(path).runs.to_dicts()
    assert run["concurrency"] == 32
    assert run["request_per_s"] == pytest.approx(6.4)
    assert run["ttft_p90_ms"] == pytest.approx(790.3)
    assert run["tpot_mean_ms"] == pytest.approx(18.77)
    assert (run["input_len"], run["output_len"]) == (1024.0, 251.4)
    assert run["model"] == "Qwen/Qwen3-8B"
    assert json.loads(run["extra"])["output_token_throughput_per_user"] == pytest.approx(53.27)


def test_display_and_snake_case_names_read_alike() -> None:
    display = json.loads((AIPERF / "display" / "profile_export_aiperf.json").read_text())
    snake = {
        "records": {k.lower().replace(" ", "_"): v for k, v in display["records"].items()},
        "input_config": display["input_config"],
    }
    (a,) = read_json(Path("display.json"), display)
    (b,) = read_json(Path("snake.json"), snake)
    assert a.values == b.values and a.extra == b.extra
