"""Malformed result files end in a ``ParseError`` naming the file and line, or load: never a
RecursionError, ValueError, OverflowError, AttributeError or csv.Error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError
from toolkit.load.bench.common import parse_json, whole
from toolkit.load.bench.results import load_bench

BENCH = TEST_DATA / "bench"
RECORD = json.loads(
    (BENCH / "aiperf" / "flat" / "profile_export.jsonl").read_text().splitlines()[1]
)
SGLANG = (BENCH / "sglang" / "v0.5.23.jsonl").read_text().splitlines()[0]


def _write(tmp_path: Path, name: str, data: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested deeper than 64"),
        ('{"a": ' + "[" * 70 + "]" * 70 + "}", "nested deeper than 64"),
        ('{"a":\n ' + "7" * 4400 + "}", "integer out of range"),
        ('{"a": 1,\n "b": 18446744073709551616}', "integer out of range"),
        ('{"a": -9223372036854775809}', "integer out of range"),
        ('{"a": 1,\n "b": }', "not valid JSON"),
    ],
)
def test_parse_json_refuses_what_breaks_readers(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason) as e:
        parse_json(text, Path("r.json"))
    if "\n" in text and "nested" not in reason:
        assert e.value.lineno == 2


def test_parse_json_keeps_64_bit_integers() -> None:
    assert parse_json('{"a": 9223372036854775807, "b": [1.5e300]}', Path("r.json")) == {
        "a": 2**63 - 1,
        "b": [1.5e300],
    }


def test_whole_stays_within_64_bits() -> None:
    assert whole(2**63 - 1) == 2**63 - 1
    assert whole(2**63) is None and whole(1e300) is None and whole("1e30") is None


@pytest.mark.parametrize(
    "line",
    [
        SGLANG.replace('"max_concurrency": null', '"max_concurrency": ' + "9" * 5000),
        SGLANG.replace('"max_concurrency": null', '"max_concurrency": 36893488147419103232'),
        SGLANG.replace('{"backend"', '{"x": ' + "[" * 3000 + "]" * 3000 + ', "backend"'),
    ],
)
def test_sglang_jsonl_out_of_range(tmp_path: Path, line: str) -> None:
    # The line no reader can hold is named with its line; the valid run before it is used.
    assert line != SGLANG
    path = _write(tmp_path, "r.jsonl", SGLANG + "\n" + line + "\n")
    results = load_bench(path)
    assert results.runs["lineno"].to_list() == [1]
    [bad] = results.damaged
    assert isinstance(bad, ParseError) and (Path(bad.path).name, bad.lineno) == ("r.jsonl", 2)
    assert "out of range" in bad.reason or "nested deeper" in bad.reason
    with pytest.raises(ParseError, match=r"only\.jsonl:1"):  # no readable run: the answer
        load_bench(_write(tmp_path, "only.jsonl", line + "\n"))


def test_sglang_jsonl_large_floats_load(tmp_path: Path) -> None:
    line = SGLANG.replace('"max_concurrency": null', '"max_concurrency": 1e300')
    runs = load_bench(_write(tmp_path, "r.jsonl", line + "\n")).runs
    assert runs["max_concurrency"].to_list() == [None]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda r: r["metrics"]["time_to_first_token"].update(unit=True), "unit of metric"),
        (lambda r: r.update(metrics=["a"]), "'metrics' must be an object"),
        (lambda r: r["metrics"].update(inter_chunk_latency=[1, 2]), "must be an object"),
    ],
)
def test_aiperf_records_of_the_wrong_type(tmp_path: Path, change, reason: str) -> None:
    record = json.loads(json.dumps(RECORD))
    change(record)
    path = _write(tmp_path, "profile_export.jsonl", json.dumps(RECORD) + "\n" + json.dumps(record))
    # The record of the wrong type is named with its line; the valid one makes the run.
    results = load_bench(path)
    assert results.runs["completed"].to_list() == [1]
    [bad] = results.damaged
    assert isinstance(bad, ParseError) and bad.lineno == 2 and reason in bad.reason
    path.write_text(json.dumps(record) + "\n")  # no record of the file is readable
    with pytest.raises(ParseError, match=reason) as e:
        load_bench(path)
    assert e.value.lineno == 1


@pytest.mark.parametrize(
    "change",
    [
        lambda r: r.update(error="connection reset"),
        lambda r: r["metadata"].update(request_start_ns=-(2**62)),
        lambda r: r["metrics"]["request_latency"].update(value=1e308),
    ],
)
def test_aiperf_records_of_odd_values_load(tmp_path: Path, change) -> None:
    record = json.loads(json.dumps(RECORD))
    change(record)
    path = _write(tmp_path, "profile_export.jsonl", json.dumps(record) + "\n")
    assert load_bench(path).runs.height == 1


def test_genai_perf_csv_with_a_lone_carriage_return(tmp_path: Path) -> None:
    source = BENCH / "genai-perf" / "Llama-3.1-8B-openai-chat-concurrency8"
    text = (source / "profile_export_genai_perf.csv").read_text()
    path = _write(
        tmp_path, "profile_export_genai_perf.csv", "\r" + text.replace("(ms),", "(ms)\r,", 1)
    )
    assert load_bench(path).runs.height == 1


def test_sweep_csv_line_numbers_are_physical(tmp_path: Path) -> None:
    text = "config,concurrency,tok/s\nPP8,\x0b1,100\nTP8,\u20282,x\n"
    with pytest.raises(ParseError, match="not a number") as e:
        load_bench(_write(tmp_path, "sweep.csv", text))
    assert e.value.lineno == 3


def test_sweep_csv_field_beyond_the_csv_limit(tmp_path: Path) -> None:
    text = 'config,concurrency,tok/s\nPP8,1,"' + "x" * 200_000 + '"\n'
    with pytest.raises(ParseError, match="not a csv row") as e:
        load_bench(_write(tmp_path, "sweep.csv", text))
    assert e.value.lineno == 2
