"""The scaling analysis on the seed's four numbers and on real-shaped result files."""

from __future__ import annotations

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.scaling import crossover, frontier, knee, scaling_gap, scaling_table
from toolkit.errors import ToolkitError
from toolkit.load.bench.results import load_bench
from toolkit.schema.bench import FRONTIER, GAP, SCALING

DATA = TEST_DATA / "bench"


@pytest.fixture(scope="module")
def seed() -> pl.DataFrame:
    return load_bench(DATA / "csv" / "seed.csv").runs


def _at(frame: pl.DataFrame, **where: object) -> dict:
    rows = frame.filter(*(pl.col(k) == v for k, v in where.items())).to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_seed_efficiency(seed: pl.DataFrame) -> None:
    table = scaling_table(seed)
    assert table.schema == SCALING
    assert _at(table, label="PP8", concurrency=32)["efficiency"] == pytest.approx(0.23, abs=0.005)
    assert _at(table, label="TP8", concurrency=32)["efficiency"] == pytest.approx(0.69, abs=0.005)
    assert _at(table, label="PP8", concurrency=1)["efficiency"] == 1.0
    assert _at(table, label="PP8", concurrency=32)["per_stream_tok_s"] == pytest.approx(248.1 / 32)
    assert _at(table, label="TP8", concurrency=32)["ideal_tok_s"] == pytest.approx(32 * 26.3)
    assert table["label"].to_list() == ["PP8", "PP8", "TP8", "TP8"]


def test_seed_gap_and_crossover(seed: pl.DataFrame) -> None:
    gap = scaling_gap(seed, "PP8", "TP8")
    assert gap.schema == GAP
    c32 = _at(gap, concurrency=32)
    assert (c32["leader"], round(c32["advantage"], 2)) == ("TP8", 2.33)
    assert c32["ratio"] == pytest.approx(248.1 / 577.8)
    assert c32["difference_tok_s"] == pytest.approx(248.1 - 577.8)
    c1 = _at(gap, concurrency=1)
    assert (c1["leader"], round(c1["advantage"], 2)) == ("PP8", 1.30)
    cross = crossover(gap)
    assert cross is not None and 1 < cross < 32
    assert cross == pytest.approx(2.29, abs=0.01)


def test_seed_knee(seed: pl.DataFrame) -> None:
    assert knee(scaling_table(seed)) == {"PP8": 32, "TP8": None}
    assert knee(scaling_table(seed), threshold=0.7) == {"PP8": 32, "TP8": 32}


def test_repeats_are_aggregated_by_median() -> None:
    runs = load_bench(DATA / "sglang" / "v0.5.10.jsonl").runs
    row = _at(scaling_table(runs), concurrency=32)
    assert row["n_runs"] == 2
    assert row["output_tok_s"] == pytest.approx((577.8 + 569.2) / 2)
    three = load_bench(DATA / "csv" / "sweep-tp-pp-repeats.csv").runs
    assert _at(scaling_table(three), label="TP8")["output_tok_s"] == 210.5
    assert _at(scaling_table(three), label="TP8")["n_runs"] == 3


def test_the_incident_from_two_jsonl_versions() -> None:
    runs = load_bench([DATA / "sglang" / "v0.5.5.jsonl", DATA / "sglang" / "v0.5.10.jsonl"]).runs
    gap = scaling_gap(runs, "TP8", "PP8")
    assert gap["leader"].to_list() == ["PP8", "TP8"]
    assert crossover(gap) == pytest.approx(2.30, abs=0.01)  # TP8 at 32 is the median of 2


def test_missing_points_are_not_invented() -> None:
    runs = load_bench(DATA / "csv" / "sweep-semicolon.csv").runs
    sparse = runs.filter(~((pl.col("label") == "TP8") & (pl.col("concurrency") == 4)))
    gap = scaling_gap(sparse, "PP4xTP2", "TP8")
    assert gap["concurrency"].to_list() == [1, 16]
    filled = scaling_gap(sparse, "PP4xTP2", "TP8", interpolate=True)
    assert filled["concurrency"].to_list() == [1, 4, 16]
    assert filled["interpolated"].to_list() == [False, True, False]
    row = _at(filled, concurrency=4)
    assert row["b_tok_s"] == pytest.approx(26.3 * (330.4 / 26.3) ** 0.5)  # log-log midpoint
    table = scaling_table(sparse, at=[1, 2, 4, 16, 64], interpolate=True)
    tp8 = table.filter(pl.col("label") == "TP8")
    assert tp8["concurrency"].to_list() == [1, 2, 4, 16]  # never beyond the measured range
    assert tp8["n_runs"].to_list() == [1, 0, 0, 1]


def test_baseline_when_c1_is_missing() -> None:
    runs = load_bench(DATA / "csv" / "sweep-semicolon.csv").runs
    table = scaling_table(runs.filter(pl.col("concurrency") > 1))
    row = _at(table, label="TP8", concurrency=16)
    assert row["baseline_concurrency"] == 4
    assert row["efficiency"] == pytest.approx(330.4 / (4 * 96.0))


def test_unknown_layout(seed: pl.DataFrame) -> None:
    with pytest.raises(ToolkitError, match="no layout 'PP4'"):
        scaling_gap(seed, "PP8", "PP4")


def test_crossover_cases() -> None:
    def gap(pairs: list[tuple[int, float]]) -> pl.DataFrame:
        return pl.DataFrame(
            {"concurrency": [c for c, _ in pairs], "ratio": [r for _, r in pairs]},
            schema={"concurrency": pl.Int64, "ratio": pl.Float64},
        )

    assert crossover(gap([(1, 2.0), (2, 1.5), (4, 1.1)])) is None
    assert crossover(gap([(1, 2.0), (4, 0.5)])) == pytest.approx(2.0)
    assert crossover(gap([(1, 2.0), (2, 1.0), (4, 0.5)])) == 2.0  # a measured tie
    assert crossover(gap([(1, 1.0), (2, 1.0)])) is None
    assert crossover(gap([])) is None


def test_frontier() -> None:
    runs = load_bench(DATA / "csv" / "sweep-semicolon.csv").runs
    points = frontier(runs)
    assert points.schema == FRONTIER
    assert set(points["latency_metric"]) == {"tpot_median_ms"}
    best = points.filter(pl.col("pareto"))
    # TP8 at 16 is fastest; PP4xTP2 at 1 has the lowest TPOT.
    assert {(r["label"], r["concurrency"]) for r in best.to_dicts()} >= {
        ("TP8", 16),
        ("PP4xTP2", 1),
    }
    assert not _at(points, label="TP8", concurrency=1)["pareto"]  # PP4xTP2 c=1 beats it


def test_frontier_without_latency(seed: pl.DataFrame) -> None:
    assert frontier(seed).height == 0
    assert frontier(seed).schema == FRONTIER
