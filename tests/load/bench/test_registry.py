"""The benchmark format registry: complete entries, every fixture recognized, a new format
picked up by every reader of the registry."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.load.bench import FORMATS, sniff_bench_format
from toolkit.load.bench.collect import result_format
from toolkit.load.bench.common import Parsed
from toolkit.load.bench.format import EMBEDDED, FILE, Options, Peek
from toolkit.load.bench.results import load_bench, summarize_bench_file
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff

DATA = TEST_DATA / "bench"
GENAI = "genai-perf/Llama-3.1-8B-openai-chat-concurrency8"

# Every file under tests/data/bench → the format the loader tests expect (None: no result).
EXPECTED: dict[str, str | None] = {
    "README.md": None,
    "aiperf/flat/profile_export.jsonl": "aiperf-json",
    "aiperf/flat/profile_export_aiperf.csv": "genai-perf-csv",
    "aiperf/flat/profile_export_aiperf.json": "aiperf-json",
    "aiperf/records/profile_export_aiperf.json": "aiperf-json",
    "aiperf/display/profile_export_aiperf.json": "aiperf-json",
    "aiperf/v0.8/profile_export_aiperf.csv": "genai-perf-csv",
    "csv/custom-names.csv": None,
    "csv/not-bench.csv": None,
    "csv/seed.csv": "bench-csv",
    "csv/sweep-semicolon.csv": "bench-csv",
    "csv/sweep-tp-pp-repeats.csv": "bench-csv",
    f"{GENAI}/profile_export_genai_perf.csv": "genai-perf-csv",
    f"{GENAI}/profile_export_genai_perf.json": "genai-perf-json",
    "runs/pp8/bench.jsonl": "sglang-bench-jsonl",
    "runs/pp8/run.toml": None,
    "runs/tp8/results/bench.jsonl": "sglang-bench-jsonl",
    "runs/tp8/server.log": None,
    "sglang/v0.2.7.jsonl": "sglang-bench-jsonl",
    "sglang/v0.3.6.jsonl": "sglang-bench-jsonl",
    "sglang/v0.4.6.jsonl": "sglang-bench-jsonl",
    "sglang/v0.5.10.jsonl": "sglang-bench-jsonl",
    "sglang/v0.5.23.jsonl": "sglang-bench-jsonl",
    "sglang/v0.5.5.jsonl": "sglang-bench-jsonl",
    "text/bench-0.2.7-and-0.4.0.log": "sglang-bench-text",
    "text/bench-0.4.6-docker.log": "sglang-bench-text",
    "text/server-and-bench-0.5.10-0.5.23.log": "sglang-bench-text",
    "text/vllm-benchmark-serving.log": "sglang-bench-text",
    "vllm/bench_serve_append.json": "vllm-bench-json",
    "vllm/benchmark_serving.json": "vllm-bench-json",
}
RESULTS = sorted(name for name, fmt in EXPECTED.items() if fmt is not None)


def test_the_format_vocabulary_is_kept() -> None:
    assert set(FORMATS) == {
        "sglang-bench-jsonl",
        "sglang-bench-text",
        "vllm-bench-json",
        "genai-perf-csv",
        "genai-perf-json",
        "aiperf-json",
        "bench-csv",
    }
    embedded = {name for name, f in FORMATS.items() if f.kind == EMBEDDED}
    assert embedded == {"sglang-bench-text"}


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_entry_is_complete(name: str) -> None:
    fmt = FORMATS[name]
    assert fmt.name == name
    assert fmt.description
    assert callable(fmt.detect) and callable(fmt.load) and callable(fmt.summarize)
    assert fmt.kind in (FILE, EMBEDDED)


def test_every_fixture_is_listed_and_every_format_has_one() -> None:
    on_disk = {str(p.relative_to(DATA)) for p in DATA.rglob("*") if p.is_file()}
    assert on_disk == set(EXPECTED)
    assert {f for f in EXPECTED.values() if f} == set(FORMATS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_fixture_is_exactly_its_expected_format(name: str) -> None:
    peek = Peek(DATA / name)
    claimed = [f.name for f in FORMATS.values() if f.detect(peek)]
    want = EXPECTED[name]
    assert claimed == ([want] if want else [])
    assert sniff_bench_format(DATA / name) == want


@pytest.mark.parametrize("name", RESULTS)
def test_each_fixture_loads_and_summarizes_through_its_entry(name: str) -> None:
    path = DATA / name
    fmt = FORMATS[str(EXPECTED[name])]
    parsed = fmt.load(path, Options())
    assert parsed and all(isinstance(p, Parsed) for p in parsed)
    summary = fmt.summarize(path, Options(cache=False))
    assert summary["format"] == fmt.name
    assert summary == summarize_bench_file(path, cache=False)
    assert [summary] == load_bench(path, cache=False).summary()


# ---------------------------------------------------------------------- a new format
def _detect_fake(peek: Peek) -> bool:
    return peek.first.startswith("FAKEBENCH")


def _load_fake(path: Path, options: Options) -> list[Parsed]:
    rows = [ln.split() for ln in path.read_text().splitlines()[1:] if ln.strip()]
    return [
        Parsed(values={"max_concurrency": int(c), "output_tok_s": float(t)}, lineno=n)
        for n, (c, t) in enumerate(rows, start=2)
    ]


FAKE = result_format("fakebench", "a made-up client", _detect_fake, _load_fake, FILE)


def test_a_registered_format_is_picked_up(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    run = tmp_path / "pp8"
    run.mkdir()
    shutil.copy(DATA / "runs" / "pp8" / "run.toml", run / "run.toml")
    path = run / "sweep.out"
    path.write_text("FAKEBENCH v1\n1 30.5\n8 180.0\n")
    assert sniff_bench_format(path) is None
    monkeypatch.setitem(FORMATS, FAKE.name, FAKE)

    assert sniff_bench_format(path) == "fakebench"
    assert sniff(path) == "fakebench"
    results = load_bench(run, cache=False)
    assert results.runs.get_column("format").to_list() == ["fakebench", "fakebench"]
    assert results.runs.get_column("concurrency").to_list() == [1, 8]
    assert summarize_bench_file(path, cache=False)["runs"] == 2
    loaded = load_run(run, cache=False)
    assert loaded.files["fakebench"] == [path]
    assert loaded.bench is not None and loaded.bench.runs.height == 2
