"""Charts of the diagnosis analyses, tested as data through to_dict()."""

from __future__ import annotations

from datetime import timedelta
from functools import cache
from pathlib import Path

import altair as alt
import polars as pl

from toolkit.analyze.config import config_diff
from toolkit.analyze.timeline import stage_gpu_series
from toolkit.chart.config import config_diff_chart
from toolkit.chart.cudagraph import graph_coverage_chart
from toolkit.chart.occupancy import occupancy_chart
from toolkit.chart.stages import stage_timeline_chart
from toolkit.diagnose import RunAnalysis
from toolkit.load.run import load_run

DIAG = Path(__file__).parent / "data" / "diagnose"


@cache
def ctx(name: str) -> RunAnalysis:
    return RunAnalysis(load_run(DIAG / name, cache=False))


def _datasets(spec: dict) -> list[list[dict]]:
    return [rows for rows in spec.get("datasets", {}).values() if rows]


def _columns(spec: dict) -> list[set[str]]:
    return [set(rows[0]) for rows in _datasets(spec)]


def test_stage_timeline_chart_with_gpu_strip() -> None:
    run = ctx("pp8-underfilled")
    t0 = run.timeline["ts"].min()
    samples = pl.DataFrame(
        {
            "ts": [t0 + timedelta(seconds=s) for s in range(20) for _ in range(8)],
            "gpu": [g for _ in range(20) for g in range(8)],
            "util_pct": [50.0] * 160,
        },
        schema_overrides={"gpu": pl.Int32},
    )
    roles = pl.DataFrame({"gpu": list(range(8)), "pp": list(range(8))})
    roles = roles.cast({"gpu": pl.Int32})
    chart = stage_timeline_chart(run.timeline, stage_gpu_series(samples, roles))
    assert isinstance(chart, alt.VConcatChart)
    spec = chart.to_dict()
    lanes, strip = spec["vconcat"]
    assert lanes["mark"]["type"] == "tick" and strip["mark"]["type"] == "rect"
    assert lanes["encoding"]["x"]["field"] == "t_ms"
    assert lanes["encoding"]["x"]["type"] == "temporal"
    assert lanes["encoding"]["y"]["sort"] == [f"PP{k}" for k in range(8)]
    cols = _columns(spec)
    assert {"t_ms", "stage", "kind", "running_req", "token", "gen_tok_s"} in cols
    assert {"stage", "t_ms", "busy_pct", "t_end_ms"} in cols
    first = next(rows for rows in _datasets(spec) if "kind" in rows[0])[0]
    assert isinstance(first["t_ms"], int) and first["t_ms"] > 1_700_000_000_000  # epoch ms
    assert lanes["title"]["text"] == "8 stage(s) on one clock: each tick is a batch line"


def test_stage_timeline_chart_without_trace() -> None:
    chart = stage_timeline_chart(ctx("tp8").timeline)
    assert isinstance(chart, alt.Chart)
    assert chart.to_dict()["encoding"]["y"]["sort"] == ["PP0"]


def test_occupancy_chart() -> None:
    spec = occupancy_chart(ctx("pp8-underfilled").occupancy).to_dict()
    upper, lower = spec["vconcat"]
    assert upper["title"]["text"].startswith("At peak ~32 requests run in ~4 of 16 slots")
    assert upper["title"]["text"].endswith("#running-req shows one slot: 8")
    series = {r["series"] for rows in _datasets(spec) if "series" in rows[0] for r in rows}
    assert series == {"offered (benchmark)", "running (from #token)", "#running-req (one slot)"}
    refs = next(rows for rows in _datasets(spec) if "name" in rows[0])
    assert {r["name"]: r["value"] for r in refs} == {"stages": 8, "slots": 16}
    assert [layer["mark"]["type"] for layer in lower["layer"]] == ["line", "rule", "text"]


def test_config_diff_chart() -> None:
    a, b = ctx("tp8"), ctx("pp8-underfilled")
    diff = config_diff(a.launch, b.launch, labels=["TP8", "PP8"], only_changed=False)
    spec = config_diff_chart(diff).to_dict()
    assert spec["title"]["text"].endswith("differ between TP8 and PP8")
    shade, text = spec["layer"]
    assert shade["mark"]["type"] == "rect" and text["mark"]["type"] == "text"
    assert text["encoding"]["x"]["sort"] == ["TP8", "PP8", "meaning"]
    keys = text["encoding"]["y"]["sort"]
    assert keys[:2] == ["tp_size", "pp_size"] and keys[-1] == "overlap_schedule"
    assert {"key", "column"} in _columns(spec) and {"key", "column", "text"} in _columns(spec)


def test_graph_coverage_chart() -> None:
    run = ctx("tp8-eager")
    spec = graph_coverage_chart(run.coverage, run.graphs["max_captured"]).to_dict()
    assert spec["title"]["text"] == "100% of decode lines ran eagerly"
    assert "up to batch size 32" in spec["title"]["subtitle"]
    assert spec["encoding"]["x"]["field"] == "running_req"
    (rows,) = _datasets(spec)
    assert rows == [{"running_req": 64, "captured": False, "flag": "eager", "lines": 14}]
