"""Scaling charts, tested as data through to_dict()."""

from __future__ import annotations

import altair as alt
import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.headline import gap_verdict
from toolkit.analyze.scaling import frontier, scaling_gap, scaling_table
from toolkit.chart import theme
from toolkit.chart.scaling import efficiency_chart, frontier_chart, latency_chart, throughput_chart
from toolkit.load.bench.results import load_bench

DATA = TEST_DATA / "bench"


@pytest.fixture(scope="module")
def seed() -> pl.DataFrame:
    return load_bench(DATA / "csv" / "seed.csv").runs


@pytest.fixture(scope="module")
def sweep() -> pl.DataFrame:
    return load_bench(DATA / "csv" / "sweep-semicolon.csv").runs


def _datasets(spec: dict) -> list[set[str]]:
    return [set(rows[0]) for rows in spec.get("datasets", {}).values() if rows]


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def test_throughput_chart(seed: pl.DataFrame) -> None:
    gap = scaling_gap(seed, "PP8", "TP8")
    chart = throughput_chart(scaling_table(seed), gap, gap_verdict(gap))
    assert isinstance(chart, alt.LayerChart)
    spec = chart.to_dict()
    # the title is the verdict it is given: the report's summary and `ppscope scaling` say it
    assert spec["title"]["text"] == gap_verdict(gap)
    assert spec["title"]["text"].startswith("TP8 delivers 2.33× the output tok/s of PP8 at 32")
    assert "PP8 leads only at 1 (1.30×)" in spec["title"]["text"]
    layers = _layers(spec)
    marks = [layer["mark"]["type"] for layer in layers]
    assert marks == ["line", "line", "point", "rule", "text"]
    ideal, line = layers[0], layers[1]
    assert ideal["mark"]["strokeDash"] == [5, 4]
    assert ideal["encoding"]["y"]["field"] == "ideal_tok_s"
    assert ideal["mark"]["clip"] is True  # the references stop at the axis top
    assert line["encoding"]["y"]["scale"]["domain"] == pytest.approx([0, 1.5 * 577.8])
    x = line["encoding"]["x"]
    assert (x["field"], x["type"], x["scale"]) == (
        "concurrency",
        "quantitative",
        {"type": "log", "base": 2},
    )
    assert x["axis"]["values"] == [1, 32]
    color = line["encoding"]["color"]
    assert color["field"] == "label"
    assert color["scale"] == {"domain": ["PP8", "TP8"], "range": list(theme.PALETTE[:2])}
    datasets = _datasets(spec)
    assert {"label", "concurrency", "ideal_tok_s"} in datasets
    assert {"label", "concurrency", "output_tok_s", "n_runs", "interpolated"} in datasets
    assert {"concurrency", "low_tok_s", "high_tok_s", "note"} in datasets
    notes = next(v for v in spec["datasets"].values() if v and "note" in v[0])
    assert [n["note"] for n in notes] == ["1.30× PP8", "2.33× TP8"]
    # Only the columns a chart encodes are sent: no efficiency, no latencies.
    assert all("efficiency" not in d and "ttft_median_ms" not in d for d in datasets)


def test_throughput_chart_without_gap(seed: pl.DataFrame) -> None:
    spec = throughput_chart(scaling_table(seed)).to_dict()
    assert [layer["mark"]["type"] for layer in _layers(spec)] == ["line", "line", "point"]
    assert spec["title"]["text"] == "TP8 peaks at 578 tok/s at 32 concurrent requests"


def test_efficiency_chart(seed: pl.DataFrame) -> None:
    spec = efficiency_chart(scaling_table(seed), threshold=0.5).to_dict()
    assert spec["title"]["text"] == "Share of linear scaling kept: PP8 23% at 32, TP8 69% at 32"
    rule, lines = _layers(spec)
    assert rule["mark"]["type"] == "rule" and lines["mark"]["type"] == "line"
    assert lines["encoding"]["y"]["field"] == "efficiency"
    assert lines["encoding"]["x"]["scale"]["type"] == "log"
    assert _datasets(spec) == [{"threshold"}, {"label", "concurrency", "efficiency"}]


def test_latency_chart(sweep: pl.DataFrame) -> None:
    table = scaling_table(sweep)
    chart = latency_chart(table, "tpot_median_ms")
    assert isinstance(chart, alt.Chart)
    spec = chart.to_dict()
    assert spec["encoding"]["y"]["field"] == "tpot_median_ms"
    assert spec["encoding"]["x"]["scale"] == {"type": "log", "base": 2}
    assert _datasets(spec) == [{"label", "concurrency", "tpot_median_ms"}]
    assert spec["title"]["text"] == "Median TPOT: PP4xTP2 50 ms at 16, TP8 46 ms at 16"
    ttft = latency_chart(table, "ttft_median_ms").to_dict()
    assert ttft["encoding"]["y"]["field"] == "ttft_median_ms"
    with pytest.raises(ValueError, match="metric must be one of"):
        latency_chart(table, "output_tok_s")


def test_latency_chart_without_data(seed: pl.DataFrame) -> None:
    spec = latency_chart(scaling_table(seed)).to_dict()
    assert spec["title"]["text"] == "No median TPOT in these results"


def test_frontier_chart(sweep: pl.DataFrame) -> None:
    spec = frontier_chart(frontier(sweep)).to_dict()
    path, dots, text = _layers(spec)
    assert path["encoding"]["order"]["field"] == "concurrency"
    assert dots["encoding"]["x"]["field"] == "latency_ms"
    assert dots["encoding"]["y"]["field"] == "output_tok_s"
    assert text["encoding"]["text"]["field"] == "concurrency"
    assert _datasets(spec) == [{"label", "concurrency", "output_tok_s", "latency_ms", "pareto"}]
    assert spec["title"]["text"].endswith("best latency-throughput trade-offs")


def test_interpolated_points_are_hollow(sweep: pl.DataFrame) -> None:
    table = scaling_table(sweep, at=[1, 2, 4, 8, 16], interpolate=True)
    spec = throughput_chart(table).to_dict()
    points = _layers(spec)[2]
    assert points["encoding"]["fillOpacity"]["condition"]["test"] == "datum.interpolated"


def test_theme_is_scoped_and_color_blind_safe() -> None:
    before = alt.theme.active
    with theme.applied():
        assert alt.theme.active == theme.NAME
        assert alt.Chart().mark_point().to_dict()["config"]["font"] == theme.FONT
    assert alt.theme.active == before
    config = theme.config()["config"]
    assert config["range"]["category"][:3] == ["#0072B2", "#E69F00", "#009E73"]
    scale = theme.color_scale(["a", "b", "a", "c"]).to_dict()
    assert scale["domain"] == ["a", "b", "c"]
