"""sglang.bench_serving results: the JSONL of every key-set version and the printed blocks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError
from toolkit.load.bench.results import load_bench, sniff_bench_format, summarize_bench_file

DATA = TEST_DATA / "bench"
JSONL = DATA / "sglang"
TEXT = DATA / "text"


def _runs(path: Path) -> list[dict]:
    return load_bench(path).runs.to_dicts()


@pytest.mark.parametrize("name", sorted(p.name for p in JSONL.glob("*.jsonl")))
def test_every_jsonl_version_is_sniffed(name: str) -> None:
    assert sniff_bench_format(JSONL / name) == "sglang-bench-jsonl"


def test_v027_old_key_names() -> None:
    first, second = _runs(JSONL / "v0.2.7.jsonl")
    assert first["output_tok_s"] == pytest.approx(1234.65)
    assert first["duration_s"] == pytest.approx(41.47)
    assert first["total_input_tokens"] == 102400
    assert first["total_output_tokens"] == 51200
    assert first["ttft_median_ms"] == pytest.approx(2345.67)
    assert first["itl_median_ms"] == pytest.approx(76.54)
    assert first["e2e_mean_ms"] == pytest.approx(41234.56)
    assert math.isinf(first["request_rate"])
    assert first["completed"] is None and first["concurrency"] is None
    assert second["request_rate"] == 4.0
    extra = json.loads(first["extra"])
    assert extra["total_output_retokenized"] == 51187
    assert extra["random_input_len"] == 1024


def test_v036_ms_keys_and_completed() -> None:
    (run,) = _runs(JSONL / "v0.3.6.jsonl")
    assert run["completed"] == 1000
    assert run["output_tok_s"] == pytest.approx(1559.36)
    assert run["ttft_median_ms"] == pytest.approx(88.42)
    assert run["e2e_median_ms"] == pytest.approx(28003.11)
    assert run["input_len"] == pytest.approx(229.718)  # total / completed: exact, not guessed


def test_v046_full_keys_and_details() -> None:
    results = load_bench(JSONL / "v0.4.6.jsonl")
    c1, c8 = results.runs.to_dicts()
    assert (c1["max_concurrency"], c1["concurrency"], c1["concurrency_from"]) == (
        1,
        1,
        "max_concurrency",
    )
    assert c8["concurrency"] == 8
    assert c8["concurrency_observed"] == pytest.approx(7.76)  # the mean in flight, not the cap
    assert c8["tpot_p99_ms"] == pytest.approx(33.9 * 1.08)
    assert c8["itl_p95_ms"] == pytest.approx(33.5 * 1.2)
    assert c8["e2e_std_ms"] == pytest.approx(17740.0 * 0.05)
    assert "input_lens" not in (c8["extra"] or "")  # arrays go to the requests table
    assert "generated_texts" not in (c8["extra"] or "")
    requests = results.requests
    assert requests.height == 16
    assert set(requests["run"]) == {c8["run"]}
    first = requests.row(0, named=True)
    assert first["ttft_ms"] == pytest.approx(410.0)  # seconds in the file
    assert first["itl_mean_ms"] == pytest.approx(1e3 * (0.0318 * 6 + 0.0007 * 10) / 6)
    assert first["concurrency"] == 8 and first["ok"] is True
    last = requests.row(-1, named=True)
    assert last["ok"] is False and "ClientPayloadError" in last["error"]
    assert requests["ts"].null_count() == requests.height  # SGLang keeps no start times


def test_v055_server_info_gives_the_layout() -> None:
    c1, c32 = _runs(JSONL / "v0.5.5.jsonl")
    assert (c1["tp"], c1["pp"], c1["dp"], c1["ep"]) == (1, 8, 1, 1)
    assert c1["label"] == "PP8" and c1["label_from"] == "layout"
    assert c1["layout_from"] == "file"
    assert c1["model"] == "/models/Kimi-K2.6"
    assert (c1["output_tok_s"], c32["output_tok_s"]) == (34.3, 248.1)
    extra = json.loads(c32["extra"])
    assert extra["tag"] == "pp8-c32" and extra["server_version"] == "0.5.5"
    assert "server_info" not in extra


def test_v0510_new_keys_and_repeats_stay_separate() -> None:
    runs = _runs(JSONL / "v0.5.10.jsonl")
    assert [r["concurrency"] for r in runs] == [1, 32, 32]
    assert [r["label"] for r in runs] == ["TP8"] * 3
    c32 = runs[1]
    assert c32["total_tok_s"] == pytest.approx(577.8 * 3)
    assert c32["peak_output_tok_s"] == pytest.approx(577.8 * 1.18)
    assert c32["peak_concurrency"] == 32
    assert c32["e2e_p90_ms"] == pytest.approx(c32["e2e_mean_ms"] * 1.05)


def test_v0523_trace_rate_and_concurrency_from_tag() -> None:
    (run,) = _runs(JSONL / "v0.5.23.jsonl")
    assert run["request_rate"] is None and run["request_rate_text"] == "trace"
    assert run["max_concurrency"] is None
    assert (run["concurrency"], run["concurrency_from"]) == (16, "label")
    assert run["label"] == "PP4xTP2"
    assert run["ttft_p95_ms"] == pytest.approx(655.9)
    assert run["tpot_p90_ms"] == pytest.approx(41.0)
    assert run["goodput_per_s"] == pytest.approx(1.92)
    assert json.loads(run["extra"])["cache_report"]["cached_tokens"] == 26992


def test_jsonl_line_that_is_not_json(tmp_path: Path) -> None:
    # A whole line that is no JSON is named with its reason (not as a cut line: it ends in a
    # newline); the run before it is used. With ``strict`` it is the error.
    good = (JSONL / "v0.3.6.jsonl").read_text()
    path = tmp_path / "out.jsonl"
    path.write_text(good + '{"backend": "sglang", "output_throughput": 1\n')
    results = load_bench(path)
    assert results.runs.height == 1
    [bad] = results.damaged
    assert bad.lineno == 2 and bad.reason.startswith("not valid JSON")
    with pytest.raises(ParseError) as info:
        summarize_bench_file(path, strict=True)
    assert info.value.lineno == 2


# ----------------------------------------------------------------------------- printed blocks
@pytest.mark.parametrize("name", sorted(p.name for p in TEXT.glob("*.log")))
def test_every_text_log_is_sniffed(name: str) -> None:
    assert sniff_bench_format(TEXT / name) == "sglang-bench-text"


def test_blocks_of_027_and_040_with_namespace_args() -> None:
    b027, b040 = _runs(TEXT / "bench-0.2.7-and-0.4.0.log")
    assert b027["lineno"] == 9
    assert b027["backend"] == "sglang"
    assert b027["num_prompts"] == 200  # from the Namespace line before the block
    # no cap and no ``Concurrency:`` row: completed × mean latency / duration is in flight
    assert b027["concurrency_observed"] == pytest.approx(200 * 45.0127 / 58.31)
    assert (b027["concurrency"], b027["concurrency_from"]) == (
        round(200 * 45.0127 / 58.31),
        "observed",
    )
    assert b027["output_tok_s"] == pytest.approx(1756.13)
    assert b027["total_tok_s"] is None  # 0.2.7 prints no total throughput
    assert b027["e2e_median_ms"] == pytest.approx(44876.1)
    assert b027["tpot_p99_ms"] == pytest.approx(71.3)
    assert b040["max_concurrency"] == 16  # the "reqeuest" typo
    assert b040["num_prompts"] == 64
    assert b040["total_tok_s"] == pytest.approx(2400.0)
    assert b040["itl_p99_ms"] == pytest.approx(40.2)


def test_block_046_under_docker_prefix() -> None:
    (run,) = _runs(TEXT / "bench-0.4.6-docker.log")
    assert run["concurrency"] == 8
    assert run["concurrency_observed"] == pytest.approx(7.93)
    assert run["tpot_mean_ms"] is None  # 0.4.6 prints no TPOT rows
    assert run["itl_p95_ms"] == pytest.approx(41.6)
    assert run["itl_max_ms"] == pytest.approx(512.3)
    assert run["model"] == "/models/Qwen3-32B"
    assert run["e2e_mean_ms"] == pytest.approx(18034.9)


def test_server_and_bench_log() -> None:
    b0510, b0523 = _runs(TEXT / "server-and-bench-0.5.10-0.5.23.log")
    for run in (b0510, b0523):
        assert (run["tp"], run["pp"], run["layout_from"], run["label"]) == (1, 8, "file", "PP8")
    assert b0510["peak_output_tok_s"] == pytest.approx(132.0)
    assert b0510["peak_concurrency"] == 4
    assert b0510["e2e_p90_ms"] == pytest.approx(19650.0)
    assert json.loads(b0510["extra"])["Total input vision tokens"] == 0
    assert b0523["max_concurrency"] is None  # "not set"
    assert (b0523["concurrency"], b0523["concurrency_from"]) == (64, "label")
    assert b0523["ttft_p90_ms"] == pytest.approx(5020.0)
    assert b0523["e2e_p95_ms"] == pytest.approx(100230.9)
    assert json.loads(b0523["extra"])["Cache hit rate (%)"] == 12.5


def test_vllm_printed_block() -> None:
    (run,) = _runs(TEXT / "vllm-benchmark-serving.log")
    assert run["backend"] == "vllm"  # from the Namespace line
    assert run["concurrency"] == 32
    assert run["total_tok_s"] == pytest.approx(868.8)
    assert run["tpot_median_ms"] == pytest.approx(70.23)


def test_block_values_keep_trailing_spaces_in_the_file() -> None:
    text = (TEXT / "bench-0.2.7-and-0.4.0.log").read_text()
    assert "Successful requests:                     200       \n" in text


def test_block_inside_gzip(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "bench.log.gz"
    path.write_bytes(gzip.compress((TEXT / "bench-0.4.6-docker.log").read_bytes()))
    assert sniff_bench_format(path) == "sglang-bench-text"
    (run,) = load_bench(path).runs.to_dicts()
    assert run["output_tok_s"] == pytest.approx(225.15)


def test_block_without_footer_then_another(tmp_path: Path) -> None:
    text = (TEXT / "bench-0.2.7-and-0.4.0.log").read_text()
    cut = text.replace("=" * 50 + "\n\n/usr", "\n/usr", 1)  # the first block loses its footer
    assert cut != text
    path = tmp_path / "cut.log"
    path.write_text(cut)
    runs = _runs(path)
    assert len(runs) == 2
    assert runs[1]["max_concurrency"] == 16


def test_block_flattened_into_one_line(tmp_path: Path) -> None:
    path = tmp_path / "issue.md"
    path.write_text(
        "Results pasted into an issue: ``` ============ Serving Benchmark Result ============ "
        "Backend: sglang Traffic request rate: inf Max reqeuest concurrency: 64 "
        "Successful requests: 500 Benchmark duration (s): 100.00 "
        "Output token throughput (tok/s): 2560.00 Total token throughput (tok/s): 7680.00 "
        "Concurrency: 63.10 Median TTFT (ms): 812.50 ```\n"
    )
    (run,) = _runs(path)
    assert (run["backend"], run["concurrency"], run["completed"]) == ("sglang", 64, 500)
    assert run["output_tok_s"] == pytest.approx(2560.0)
    assert run["total_tok_s"] == pytest.approx(7680.0)
    assert run["concurrency_observed"] == pytest.approx(63.1)
    assert run["ttft_median_ms"] == pytest.approx(812.5)


def test_block_indented_in_markdown(tmp_path: Path) -> None:
    block = (TEXT / "bench-0.4.6-docker.log").read_text().splitlines()
    body = [line.split("Z ", 1)[1] for line in block]  # drop the docker prefix
    path = tmp_path / "README.md"
    path.write_text("Sample output:\n\n```\n" + "\n".join("    " + x for x in body) + "\n```\n")
    (run,) = _runs(path)
    assert run["output_tok_s"] == pytest.approx(225.15)
    assert run["itl_max_ms"] == pytest.approx(512.3)


def test_block_deep_inside_a_large_gzip(tmp_path: Path) -> None:
    import gzip
    import random

    noise = random.Random(3).randbytes(1_500_000).hex()  # compresses poorly: many chunks
    text = noise + "\n" + (TEXT / "bench-0.4.6-docker.log").read_text()
    path = tmp_path / "big.log.gz"
    path.write_bytes(gzip.compress(text.encode()))
    assert path.stat().st_size > 1 << 20
    assert sniff_bench_format(path) == "sglang-bench-text"
