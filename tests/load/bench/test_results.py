"""load_bench as a whole: run directories, labels, summaries, schemas and errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ToolkitError, UnknownFormat
from toolkit.load.bench import FORMATS
from toolkit.load.bench.results import load_bench, sniff_bench_format
from toolkit.schema.bench import REQUESTS, RUNS

DATA = TEST_DATA / "bench"
RESULT_FILES = sorted(
    p
    for p in DATA.rglob("*")
    if p.is_file()
    and p.suffix in (".jsonl", ".json", ".csv", ".log")
    and not any(part.startswith(".") or part == "runs" for part in p.relative_to(DATA).parts)
)


@pytest.fixture
def run_dirs(tmp_path: Path) -> Path:
    """A copy of the run directories: reading a server log writes its cache next to it."""
    shutil.copytree(DATA / "runs", tmp_path / "runs")
    return tmp_path / "runs"


@pytest.mark.parametrize("path", RESULT_FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_fixture_conforms_to_the_schema(path: Path) -> None:
    fmt = sniff_bench_format(path)
    if fmt is None:
        pytest.skip("not a result without a mapping")
    assert fmt in FORMATS
    results = load_bench(path)
    assert results.runs.schema == RUNS
    assert results.requests.schema == REQUESTS
    assert results.runs.height >= 1
    assert results.runs["output_tok_s"].null_count() == 0
    assert results.summary() == [
        {
            "path": str(path),
            "format": fmt,
            "runs": results.runs.height,
            "layouts": results.runs["label"].unique(maintain_order=True).to_list(),
        }
    ]


def test_format_comes_from_content_not_name(tmp_path: Path) -> None:
    misleading = tmp_path / "results.csv"
    shutil.copy(DATA / "vllm" / "benchmark_serving.json", misleading)
    assert sniff_bench_format(misleading) == "vllm-bench-json"
    other = tmp_path / "profile_export_genai_perf.json"
    shutil.copy(DATA / "sglang" / "v0.5.5.jsonl", other)
    assert sniff_bench_format(other) == "sglang-bench-jsonl"


def test_run_directories(run_dirs: Path) -> None:
    results = load_bench([run_dirs / "pp8", run_dirs / "tp8"])
    runs = results.runs.to_dicts()
    assert [(r["label"], r["label_from"], r["layout_from"]) for r in runs] == [
        ("PP8", "run.toml", "run.toml"),
        ("PP8", "run.toml", "run.toml"),
        ("TP8", "layout", "server-log"),
        ("TP8", "layout", "server-log"),
    ]
    assert [(r["tp"], r["pp"]) for r in runs] == [(1, 8), (1, 8), (8, 1), (8, 1)]
    assert [r["concurrency"] for r in runs] == [1, 32, 1, 32]
    assert results.layouts == ["PP8", "TP8"]
    assert [s["path"] for s in results.skipped] == [str(run_dirs / "tp8" / "server.log")]
    assert [f["runs"] for f in results.summary()] == [2, 2]


def test_label_argument_overrides(run_dirs: Path) -> None:
    results = load_bench(run_dirs / "pp8", label="PP8 depth 8")
    assert set(results.runs["label"]) == {"PP8 depth 8"}
    assert set(results.runs["label_from"]) == {"argument"}


def test_a_directory_without_layout_is_named_after_itself(tmp_path: Path) -> None:
    run = tmp_path / "my-run"
    run.mkdir()
    shutil.copy(DATA / "sglang" / "v0.4.6.jsonl", run / "bench.jsonl")
    (run / "notes.txt").write_text("nothing to see\n")
    results = load_bench(run)
    assert set(results.runs["label"]) == {"my-run"}
    assert set(results.runs["label_from"]) == {"dir"}
    assert results.skipped == [{"path": str(run / "notes.txt"), "reason": "no benchmark result"}]


def test_run_toml_applies_to_a_named_file(tmp_path: Path) -> None:
    shutil.copy(DATA / "sglang" / "v0.4.6.jsonl", tmp_path / "bench.jsonl")
    (tmp_path / "run.toml").write_text('label = "PP4xTP2"\n')
    runs = load_bench(tmp_path / "bench.jsonl").runs
    assert set(runs["label"]) == {"PP4xTP2"}
    assert (runs["tp"].to_list(), runs["pp"].to_list()) == ([2, 2], [4, 4])


def test_files_from_several_tools_share_one_table() -> None:
    results = load_bench(
        [
            DATA / "sglang" / "v0.5.5.jsonl",
            DATA / "text" / "vllm-benchmark-serving.log",
            DATA / "aiperf" / "flat" / "profile_export_aiperf.json",
        ]
    )
    assert results.runs["run"].to_list() == [0, 1, 2, 3]
    assert results.runs["format"].to_list() == [
        "sglang-bench-jsonl",
        "sglang-bench-jsonl",
        "sglang-bench-text",
        "aiperf-json",
    ]
    assert results.runs.filter(pl.col("output_tok_s") > 1000).height == 1


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="no benchmark files"):
        load_bench([])
    with pytest.raises(ToolkitError, match="no such file"):
        load_bench(tmp_path / "missing.jsonl")
    log = tmp_path / "server.log"
    log.write_text("[2025-12-18 10:02:11] The server is fired up and ready to roll!\n")
    with pytest.raises(UnknownFormat):
        load_bench(log)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ToolkitError, match="no benchmark results found"):
        load_bench(empty)


def test_empty_and_binary_files_are_not_results(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 4)
    assert sniff_bench_format(empty) is None
    assert sniff_bench_format(binary) is None
    assert sniff_bench_format(tmp_path) is None


def test_named_non_results_are_skipped_among_results(run_dirs: Path) -> None:
    paths = [*sorted((run_dirs / "pp8").iterdir()), DATA / "csv" / "not-bench.csv"]
    results = load_bench(paths)
    assert results.runs.height == 2
    reasons = {Path(s["path"]).name: s["reason"] for s in results.skipped}
    assert set(reasons) == {"run.toml", "not-bench.csv"}
    assert "no throughput column" in reasons["not-bench.csv"]
