"""vLLM benchmark_serving.py / vllm bench serve result JSON."""

from __future__ import annotations

import json
import math
from datetime import datetime

import pytest
from helpers import TEST_DATA

from toolkit.load.bench.results import load_bench, sniff_bench_format

VLLM = TEST_DATA / "bench" / "vllm"


@pytest.mark.parametrize("name", ["benchmark_serving.json", "bench_serve_append.json"])
def test_sniffed(name: str) -> None:
    assert sniff_bench_format(VLLM / name) == "vllm-bench-json"


def test_old_script_with_typo_key_and_metadata_layout() -> None:
    results = load_bench(VLLM / "benchmark_serving.json")
    (run,) = results.runs.to_dicts()
    assert run["lineno"] is None
    assert (run["tp"], run["pp"], run["label"]) == (4, 2, "PP2xTP4")
    assert math.isinf(run["request_rate"])
    assert run["concurrency"] == 8
    assert run["output_tok_s"] == pytest.approx(8 * 512 / 38.5)
    assert run["total_tok_s"] == pytest.approx(8 * 2560 / 38.5)
    assert run["input_tok_s"] == pytest.approx(8 * 2048 / 38.5)  # from totals: vLLM has none
    assert run["e2e_mean_ms"] == pytest.approx(36860.0)  # e2el
    assert run["tpot_p99_ms"] == pytest.approx(70.6 * 1.3)
    assert run["goodput_per_s"] is None  # "request_goodput:" is null without --goodput
    assert run["ts"] == datetime(2025, 5, 12, 9, 17, 2)
    assert run["model"] == "meta-llama/Llama-3.1-70B-Instruct"
    assert results.requests.height == 8
    assert results.requests["e2e_ms"].null_count() == 8  # the old script keeps no latencies


def test_append_result_lines_and_detailed_requests() -> None:
    results = load_bench(VLLM / "bench_serve_append.json")
    c1, c16 = results.runs.to_dicts()
    assert (c1["lineno"], c16["lineno"]) == (1, 2)
    assert (c1["concurrency"], c16["concurrency"]) == (1, 16)
    assert c1["label"] == "TP8" and c1["layout_from"] == "label"  # from --label tp8-c1
    assert c16["peak_output_tok_s"] == pytest.approx(1830.5 * 1.2)
    assert c16["failed"] == 0
    assert json.loads(c1["extra"])["endpoint_type"] == "openai"
    requests = results.requests
    assert requests.height == 4
    assert requests["start_s"].to_list() == pytest.approx([0.0, 0.002, 1.676, 1.715])
    assert requests["e2e_ms"].to_list() == pytest.approx([1620.0, 1660.0, 1710.0, 1690.0])
    assert requests["ok"].to_list() == [True, True, True, False]
    assert requests["ts"].null_count() == 4  # perf_counter: not an absolute time
