"""Benchmark results from hostile bytes: a result table or a declared ``ToolkitError``, nothing
else (no RecursionError, OverflowError, AttributeError, csv.Error...)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget, hostile_json, mutated, seeds
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load.bench.results import load_bench, summarize_bench_file

pytestmark = pytest.mark.fuzz

BENCH = TEST_DATA / "bench"
CORPUS = seeds(BENCH)


def _documents(path: Path) -> list[object]:
    text = path.read_text()
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


DOCUMENTS = [doc for path in sorted(BENCH.rglob("*.json*")) for doc in _documents(path)]
NAMES = ("r.jsonl", "profile_export_aiperf.json", "profile_export_genai_perf.csv", "r.log", "r.csv")


def _load(path: Path) -> None:
    """Everything a user can ask of a result file: it must answer or raise a ToolkitError."""
    for read in (lambda: load_bench(path, cache=False), lambda: summarize_bench_file(path)):
        try:
            read()
        except ToolkitError as e:
            assert str(e)


@budget(40)
@given(data=mutated(CORPUS), name=st.sampled_from(NAMES))
def test_mutated_results(tmp_path: Path, data: bytes, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    _load(path)


@budget(40)
@given(doc=hostile_json(DOCUMENTS), lines=st.integers(1, 3))
def test_results_with_fields_of_any_type(tmp_path: Path, doc: object, lines: int) -> None:
    path = tmp_path / "result.json"
    path.write_text("\n".join([json.dumps(doc)] * lines) + "\n")
    _load(path)


@budget(20)
@given(data=st.binary(max_size=2000))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "r.json"
    path.write_bytes(data)
    _load(path)
