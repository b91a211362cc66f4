"""Prometheus metrics from hostile bytes: the metrics table or a declared ``ToolkitError``,
nothing else; differenced counters are never negative."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget, hostile_json, mutated, seeds
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load.prometheus import load_metrics, summarize_metrics
from toolkit.load.sniff import sniff

pytestmark = pytest.mark.fuzz

DATA = TEST_DATA / "prometheus"
CORPUS = seeds(DATA)
QUERY = json.loads((DATA / "query_range.json").read_text())
SCRAPES = [json.loads(line) for line in (DATA / "metrics.jsonl").read_text().splitlines()]


def _load(path: Path) -> None:
    """Everything a user can ask of a metrics file: it must answer or raise a ToolkitError."""
    try:
        if sniff(path) is None:
            return
        m = load_metrics([path])
        summarize_metrics(path)
    except ToolkitError as e:
        assert str(e)
        return
    assert (m.samples.filter(pl.col("kind") == "counter")["value"] >= 0).all()


@budget(40)
@given(data=mutated(CORPUS))
def test_mutated_metrics_files(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "m"
    path.write_bytes(data)
    _load(path)


@budget(40)
@given(doc=hostile_json([QUERY]))
def test_query_answers_with_fields_of_any_type(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc))
    _load(path)


@budget(40)
@given(doc=hostile_json(SCRAPES[:2]), n=st.integers(1, 3))
def test_snapshots_with_fields_of_any_type(tmp_path: Path, doc: object, n: int) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps(SCRAPES[0]) + "\n" + "\n".join([json.dumps(doc)] * n) + "\n")
    _load(path)
