"""``/server_info`` answers: capture's JSONL and a saved answer, recognized by content."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from toolkit.errors import ParseError
from toolkit.load.server_info import SERVER_INFO_FORMAT, load_server_info
from toolkit.load.sniff import sniff

# The shape of /get_server_info (0.4 - 0.5.22): arguments flat, the scheduler's state per DP
# rank in internal_states, plus the version.
ANSWER = {
    "model_path": "/models/Qwen3-32B",
    "tp_size": 1,
    "pp_size": 4,
    "max_running_requests": 128,
    "pp_max_micro_batch_size": None,
    "chunked_prefill_size": 8192,
    "api_key": "[redacted]",
    "internal_states": [
        {"pp_max_micro_batch_size": 8, "last_gen_throughput": 412.5, "memory_usage": {"kv": 3}}
    ],
    "version": "0.5.6",
}


ARGS = {k: v for k, v in ANSWER.items() if k not in ("internal_states", "version")}


def _calls(tmp_path: Path) -> Path:
    path = tmp_path / "server_info.jsonl"
    calls = [
        {"ts": "2026-05-25T21:40:00.120", "phase": None, "when": "start", "info": ANSWER},
        {"ts": "2026-05-25T21:41:00.500", "phase": 0, "when": "after",
         "info": {"server_args": ARGS, "version": "0.5.23", "internal_states": []}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps({**c, "endpoint": "/server_info"}) + "\n" for c in calls))
    return path


def test_capture_calls_are_read_with_runtime_values(tmp_path: Path) -> None:
    path = _calls(tmp_path)
    assert sniff(path) == SERVER_INFO_FORMAT
    table = load_server_info([path], clock_offset_s=2.0)
    first = table.filter(pl.col("lineno") == 1)
    values = dict(zip(first["key"], first["value"], strict=True))
    assert json.loads(values["pp_max_micro_batch_size"]) == 8  # the scheduler's, not the dump's
    assert "internal_states" not in values and "last_gen_throughput" not in values
    assert str(first["ts"][0]) == "2026-05-25 21:40:02.120000"
    second = table.filter(pl.col("lineno") == 2)
    assert second["phase"][0] == 0 and second["when"][0] == "after"
    assert set(second["key"]) == set(ARGS)


def test_a_saved_answer_printed_over_lines_is_one_untimed_answer(tmp_path: Path) -> None:
    path = tmp_path / "info.json"
    path.write_text(json.dumps(ANSWER, indent=2))
    assert sniff(path) == SERVER_INFO_FORMAT
    table = load_server_info([path])
    assert table["ts"].null_count() == table.height and set(table["lineno"]) == {1}


def test_a_config_json_or_results_are_not_server_info(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "qwen3", "num_hidden_layers": 64}))
    results = tmp_path / "bench.jsonl"
    results.write_text(json.dumps({"backend": "sglang", "max_concurrency": 8}) + "\n")
    assert sniff(config) != SERVER_INFO_FORMAT and sniff(results) != SERVER_INFO_FORMAT


def test_a_bad_line_names_file_and_line(tmp_path: Path) -> None:
    path = _calls(tmp_path)
    with path.open("a") as f:
        f.write('{"ts": "2026-05-25T21:42:00", "endpoint": "/server_info", "info": [1]}\n')
    with pytest.raises(ParseError, match=r"server_info\.jsonl.*3"):
        load_server_info([path])


def test_a_compressed_answer_file_reads_the_same(tmp_path: Path) -> None:
    import zstandard

    path = _calls(tmp_path)
    packed = tmp_path / "server_info.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
    assert sniff(packed) == SERVER_INFO_FORMAT
    assert load_server_info([packed]).drop("source").equals(load_server_info([path]).drop("source"))
