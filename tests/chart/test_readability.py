"""Charts people can read, checked on the specs and on the labels vl-convert draws.

Time axes: a 24-hour clock, the date on a midnight tick, no label repeated or drawn over its
neighbour, at any span. Stacked views share one time range. Counts get whole ticks; titles name
only what is drawn; charts span most of the page.
"""

from __future__ import annotations

import itertools
import re
from datetime import UTC, datetime

import altair as alt
import polars as pl
import pytest
import vl_convert

from toolkit.chart.cudagraph import graph_coverage_chart
from toolkit.chart.encode import TIME_FORMAT
from toolkit.chart.gpu import gpu_metric_chart
from toolkit.chart.kv import kv_pressure_chart
from toolkit.chart.model import what_if_chart
from toolkit.chart.theme import WIDTH, applied
from toolkit.chart.timeline import stage_strips_chart

START = datetime(2026, 5, 25, 21, 46, 5, tzinfo=UTC)
SPANS_S = [20, 190, 3 * 3600, 30 * 3600]  # seconds: a burst, a sweep, an afternoon, two days


def _spec(chart: alt.TopLevelMixin) -> dict:
    with applied(), alt.data_transformers.disable_max_rows():
        return chart.to_dict()


def _axis_labels(chart: alt.TopLevelMixin) -> list[list[tuple[float, str]]]:
    """Per axis, the (x or y position, text) of every label vl-convert draws visibly."""
    svg = vl_convert.vegalite_to_svg(_spec(chart))
    groups = re.findall(r'<g class="mark-text role-axis-label"[^>]*>(.*?)</g>', svg)
    out = []
    for group in groups:
        labels = []
        for attrs, text in re.findall(r"<text([^>]*)>([^<]*)</text>", group):
            if 'opacity="0"' in attrs:
                continue  # dropped by label-overlap removal
            x, y = map(float, re.search(r"translate\(([-\d.e]+),([-\d.e]+)\)", attrs).groups())
            labels.append((x, y, text))
        horizontal = len({round(y) for _, y, _ in labels}) == 1
        out.append([(x if horizontal else y, t) for x, y, t in labels] if labels else [])
    return out


def _timeline(span_s: int, stages: int = 4) -> pl.DataFrame:
    t0 = int(START.timestamp() * 1000)
    step = max(1, span_s * 1000 // 300)
    rows = []
    for i in range(301):
        t = t0 + i * step
        rows.append({"t": t, "stage": "PP0", "series": "gen_tok_s", "value": float(i)})
        for s in range(stages):
            rows.append({"t": t, "stage": f"PP{s}", "series": "running_req", "value": 4.0})
            # the GPU trace starts later than the log: the strips must still line up
            if i > 30:
                rows.append({"t": t, "stage": f"PP{s}", "series": "util_pct", "value": 50.0})
    return pl.DataFrame(rows)


def _time_axes(spec: dict) -> list[dict]:
    found = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            x = (
                node.get("encoding", {}).get("x")
                if isinstance(node.get("encoding"), dict)
                else None
            )
            if isinstance(x, dict) and x.get("type") == "temporal":
                found.append(x)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


@pytest.mark.parametrize("span_s", SPANS_S)
def test_time_labels_are_24_hour_unique_and_apart(span_s: int) -> None:
    chart = stage_strips_chart(_timeline(span_s), 1000, run="PP8")
    axes = [a for a in _axis_labels(chart) if a and re.fullmatch(r"[\d:. A-Za-z]+", a[0][1])]
    time_axes = [a for a in axes if any(":" in t for _, t in a)]
    assert time_axes, "the chart has time axes"
    for labels in time_axes:
        texts = [t for _, t in labels]
        assert len(texts) == len(set(texts)), f"repeated labels: {texts}"
        assert not any(m in t for t in texts for m in ("AM", "PM")), texts
        ordered = sorted(labels)
        for (x1, a), (x2, b) in itertools.pairwise(ordered):
            assert x2 - x1 >= 3.5 * (len(a) + len(b)) + 4, f"{a!r} and {b!r} collide"
        hours = [int(t[:2]) for t in texts if re.fullmatch(r"\d\d:\d\d(:\d\d)?", t)]
        assert all(0 <= h <= 23 for h in hours)
    if span_s > 24 * 3600:
        assert any(re.fullmatch(r"[A-Z][a-z]{2} \d\d", t) for a in time_axes for _, t in a), (
            "a span across days names the day"
        )


def test_time_axes_use_the_24_hour_multi_format() -> None:
    spec = _spec(stage_strips_chart(_timeline(190), 1000, run="PP8"))
    axes = _time_axes(spec)
    assert axes and all(a["axis"]["format"] == TIME_FORMAT for a in axes)
    assert all(a["scale"]["type"] == "utc" for a in axes)


def test_stacked_timelines_share_one_time_range() -> None:
    long = _timeline(190)
    spec = _spec(stage_strips_chart(long, 1000, run="PP8"))
    domains = {tuple(a["scale"]["domain"]) for a in _time_axes(spec) if "domain" in a["scale"]}
    assert len(domains) == 1, "overview and strips: one explicit domain"
    lo, hi = domains.pop()
    assert lo == long["t"].min() and hi >= long["t"].max()
    strips = spec["vconcat"][1:]
    assert all("domainRaw" in s["encoding"]["x"]["scale"] for s in strips), "the brush zooms"


def test_gpu_views_share_one_time_range() -> None:
    t0 = int(START.timestamp() * 1000)
    samples = pl.DataFrame(
        {
            "t": [t0 + 1000 * i for i in range(100) for _ in range(2)],
            "gpu": ["PP0 (GPU 0)", "PP1 (GPU 1)"] * 100,
            "value": [50.0] * 200,
        }
    )
    spec = _spec(gpu_metric_chart(samples, "util_pct", run="PP8"))
    domains = {tuple(a["scale"]["domain"]) for a in _time_axes(spec)}
    assert len(domains) == 1


def test_counts_have_whole_ticks() -> None:
    coverage = pl.DataFrame(
        {
            "running_req": [1, 2],
            "captured": [True, True],
            "graph_lines": [1, 2],
            "eager_lines": [0, 1],
            "unflagged_lines": [0, 0],
        }
    )
    chart = graph_coverage_chart(coverage, 256)
    y = _spec(chart)["encoding"]["y"]["axis"]
    assert y["format"] == "d" and y["tickMinStep"] == 1
    labels = [t for axis in _axis_labels(chart) for _, t in axis]
    assert "0.5" not in labels and "1.5" not in labels


def test_kv_title_names_only_the_runs_it_draws() -> None:
    frame = pl.DataFrame(
        {
            "t": [0, 1000, 2000, 0],
            "label": ["TP8", "TP8", "TP8", "PP8"],
            "token_usage": [0.1, 0.2, 0.3, 0.5],
        }
    )
    title = _spec(kv_pressure_chart(frame))["title"]["text"]
    assert "TP8 peaks at 30%" in title and "PP8" not in title


def test_main_views_span_the_page() -> None:
    spec = _spec(stage_strips_chart(_timeline(190), 1000, run="PP8"))
    assert all(view.get("width", 0) >= WIDTH for view in spec["vconcat"])
    assert WIDTH >= 700


def test_what_if_points_keep_the_table_order() -> None:
    table = pl.DataFrame(
        {
            "label": ["PP8"] * 3,
            "base_concurrency": [1, 2, 16],
            "expected_tok_s": [30.0, 45.0, 130.0],
            "what_if_tok_s": [30.0, 45.0, 200.0],
            "change_pct": [0.0, 0.0, 54.0],
            "occupancy": ["1×1", "1×2", "4×4"],
        }
    )
    y = _spec(what_if_chart(table, "pp_max_micro_batch_size=4"))["encoding"]["y"]
    assert y["sort"] == ["PP8 c=1", "PP8 c=2", "PP8 c=16"], "c=16 after c=2, not before"
