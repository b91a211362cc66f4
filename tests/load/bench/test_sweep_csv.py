"""A user's own sweep CSV: columns by common names or by an explicit mapping."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.bench.results import load_bench, sniff_bench_format
from toolkit.load.bench.sweep_csv import match_columns, normalize

CSV = TEST_DATA / "bench" / "csv"


def test_seed_csv() -> None:
    assert sniff_bench_format(CSV / "seed.csv") == "bench-csv"
    runs = load_bench(CSV / "seed.csv").runs.to_dicts()
    assert [(r["label"], r["concurrency"], r["output_tok_s"]) for r in runs] == [
        ("PP8", 1, 34.3),
        ("PP8", 32, 248.1),
        ("TP8", 1, 26.3),
        ("TP8", 32, 577.8),
    ]
    assert runs[0]["label_from"] == "file" and runs[0]["concurrency_from"] == "file"
    assert (runs[0]["pp"], runs[0]["layout_from"]) == (8, "label")
    assert (runs[2]["tp"], runs[2]["pp"]) == (8, None)


def test_semicolons_units_and_seconds() -> None:
    runs = load_bench(CSV / "sweep-semicolon.csv").runs.to_dicts()
    assert len(runs) == 6
    first = runs[0]
    assert (first["label"], first["concurrency"]) == ("PP4xTP2", 1)
    assert (first["tp"], first["pp"]) == (2, 4)
    assert first["output_tok_s"] == pytest.approx(31.9)
    assert first["ttft_mean_ms"] == pytest.approx(412.0)  # "TTFT (s)"
    assert first["tpot_median_ms"] == pytest.approx(30.1)


def test_layout_columns_repeats_and_unknown_columns() -> None:
    runs = load_bench(CSV / "sweep-tp-pp-repeats.csv").runs.to_dicts()
    assert [r["label"] for r in runs] == ["TP8", "TP8", "TP8", "PP8"]
    assert all(r["layout_from"] == "file" for r in runs)
    assert [r["concurrency"] for r in runs] == [8, 8, 8, 8]
    assert [r["output_tok_s"] for r in runs] == [210.5, 214.9, 208.1, 160.2]
    assert json.loads(runs[2]["extra"]) == {"notes": "repeat after restart"}


def test_mapping_reads_unusual_headers() -> None:
    assert sniff_bench_format(CSV / "custom-names.csv") is None
    mapping = {"output_tok_s": "gen speed", "concurrency": "streams", "label": "setup name"}
    runs = load_bench(CSV / "custom-names.csv", mapping=mapping).runs.to_dicts()
    assert [(r["label"], r["concurrency"], r["output_tok_s"]) for r in runs] == [
        ("A", 1, 30.0),
        ("A", 8, 150.0),
    ]
    # The reverse orientation ({header: column}) is accepted too.
    reverse = {v: k for k, v in mapping.items()}
    again = load_bench(CSV / "custom-names.csv", mapping=reverse).runs
    assert again["output_tok_s"].to_list() == [30.0, 150.0]


@pytest.mark.parametrize("name", ["custom-names.csv", "not-bench.csv"])
def test_error_lists_the_columns(name: str) -> None:
    with pytest.raises(ParseError) as info:
        load_bench(CSV / name)
    text = str(info.value)
    assert info.value.lineno == 1
    assert "no throughput column" in text
    header = (CSV / name).read_text().splitlines()[0]
    for column in header.split(","):
        assert repr(column.strip()) in text


def test_mapping_with_unknown_names() -> None:
    with pytest.raises(ToolkitError, match="unknown column 'speed'"):
        load_bench(CSV / "custom-names.csv", mapping={"speed": "nope"})
    with pytest.raises(ToolkitError, match="not in the file"):
        load_bench(CSV / "custom-names.csv", mapping={"output_tok_s": "nope"})


def test_a_cell_that_is_not_a_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("config,concurrency,tok/s\nPP8,1,fast\n")
    with pytest.raises(ParseError, match="not a number") as info:
        load_bench(path)
    assert info.value.lineno == 2


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("tok/s", "output_tok_s"),
        ("Throughput (tok/s)", "output_tok_s"),
        ("Output Token Throughput", "output_tok_s"),
        ("total tok/s", "total_tok_s"),
        ("Total Throughput (tok/s)", "total_tok_s"),
        ("req/s", "request_per_s"),
        ("Concurrency", "concurrency"),
        ("max_concurrency", "max_concurrency"),
        ("Config", "label"),
        ("TTFT (ms)", "ttft_mean_ms"),
        ("p99 TPOT (ms)", "tpot_p99_ms"),
        ("median_itl_ms", "itl_median_ms"),
        ("E2E Latency", "e2e_mean_ms"),
        ("tp_size", "tp"),
        ("output_tok_s", "output_tok_s"),
    ],
)
def test_header_names(header: str, expected: str) -> None:
    assert match_columns([header]) == {expected: header}


def test_normalize() -> None:
    assert normalize("TTFT (s)") == ("ttft", "s")
    assert normalize(" Tok/s ") == ("tok_s", None)
    assert normalize("utilization.gpu [%]") == ("utilization_gpu", "%")
