"""Property tests of the scaling analysis on generated runs tables."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.analyze.scaling import crossover, scaling_gap, scaling_table
from toolkit.schema.bench import RUNS

SETTINGS = settings(max_examples=60, deadline=None)
LABELS = ("PP8", "TP8", "PP4xTP2")
CONCURRENCIES = (1, 2, 4, 8, 16, 32, 64, 128)
tok_s = st.floats(0.5, 5e4, allow_nan=False, allow_infinity=False)


@st.composite
def runs(draw) -> pl.DataFrame:
    """Runs of 1-3 layouts; every layout has c = 1, some points are repeated."""
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=1, max_size=3, unique=True))
    rows = []
    for label in labels:
        points = draw(st.sets(st.sampled_from(CONCURRENCIES[1:]), max_size=6)) | {1}
        for c in sorted(points):
            for _ in range(draw(st.integers(1, 3))):
                rows.append({"label": label, "concurrency": c, "output_tok_s": draw(tok_s)})
    full = [{name: row.get(name) for name in RUNS.names()} for row in rows]
    return pl.DataFrame(full, schema=RUNS, orient="row")


@SETTINGS
@given(runs())
def test_a_layout_against_itself_is_even_everywhere(frame: pl.DataFrame) -> None:
    label = frame["label"][0]
    gap = scaling_gap(frame, label, label)
    assert gap.height == frame.filter(pl.col("label") == label)["concurrency"].n_unique()
    assert gap["ratio"].to_list() == pytest.approx([1.0] * gap.height)
    assert gap["advantage"].to_list() == pytest.approx([1.0] * gap.height)
    assert gap["leader"].null_count() == gap.height
    assert crossover(gap) is None


@SETTINGS
@given(runs())
def test_efficiency_is_one_at_c1_and_per_stream_adds_up(frame: pl.DataFrame) -> None:
    table = scaling_table(frame)
    ones = table.filter(pl.col("concurrency") == 1)
    assert ones["efficiency"].to_list() == pytest.approx([1.0] * ones.height)
    assert (table["per_stream_tok_s"] * table["concurrency"]).to_list() == pytest.approx(
        table["output_tok_s"].to_list()
    )
    assert table["n_runs"].sum() == frame.height


@SETTINGS
@given(runs(), st.floats(0.01, 100.0))
def test_efficiency_ignores_the_unit_of_throughput(frame: pl.DataFrame, k: float) -> None:
    a = scaling_table(frame)["efficiency"].to_list()
    b = scaling_table(frame.with_columns(pl.col("output_tok_s") * k))["efficiency"].to_list()
    assert b == pytest.approx(a, rel=1e-9)


@SETTINGS
@given(runs())
def test_gap_is_antisymmetric(frame: pl.DataFrame) -> None:
    labels = frame["label"].unique(maintain_order=True).to_list()
    a, b = labels[0], labels[-1]
    ab, ba = scaling_gap(frame, a, b), scaling_gap(frame, b, a)
    assert ab["concurrency"].to_list() == ba["concurrency"].to_list()
    for x, y in zip(ab["ratio"].to_list(), ba["ratio"].to_list(), strict=True):
        assert x == pytest.approx(1 / y)
    assert ab["leader"].to_list() == ba["leader"].to_list()
    assert ab["advantage"].to_list() == pytest.approx(ba["advantage"].to_list())
    assert ab["difference_tok_s"].to_list() == pytest.approx((-ba["difference_tok_s"]).to_list())
    x, y = crossover(ab), crossover(ba)
    assert (x is None and y is None) or x == pytest.approx(y)


@SETTINGS
@given(runs())
def test_crossover_lies_between_opposite_leaders(frame: pl.DataFrame) -> None:
    labels = frame["label"].unique(maintain_order=True).to_list()
    gap = scaling_gap(frame, labels[0], labels[-1])
    cross = crossover(gap)
    leaders = [x for x in gap["leader"].to_list() if x is not None]
    if cross is None:
        assert len(set(leaders)) <= 1 or not leaders
        return
    assert len(set(leaders)) == 2
    cs = gap["concurrency"].to_list()
    assert min(cs) <= cross <= max(cs)
    assert math.isfinite(cross)
