"""Report views over time and over runs: stage timeline, GPU metrics, KV pressure, expected
vs observed, what-if.

Each function takes one tidy frame and returns an altair chart whose title states what the data
shows. Time columns are epoch milliseconds (``t``). One run's views (stage timeline, GPU
metrics) sit on a UTC scale, so the axis shows the log's own wall clock whatever the reader's
time zone; views that compare runs recorded on different days (KV pressure) use minutes since
each run's first line. Related views are concatenated over one top-level dataset (stored once
in the HTML), and the interaction lives in the spec (an interval brush on an overview, a
clickable legend), so it works in a report without a kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import altair as alt
import polars as pl

from toolkit.chart.theme import MUTED, WIDTH, color_scale, log2_scale

__all__ = [
    "data_of",
    "gpu_metric_chart",
    "kv_pressure_chart",
    "model_chart",
    "stage_strips_chart",
    "what_if_chart",
]


def data_of(frame: pl.DataFrame, digits: int = 3) -> alt.Data:
    """Inline row data for a chart: floats rounded, non-finite numbers as null.

    Rows go in as plain values (not a DataFrame), so altair's 5000-row guard does not apply:
    the library downsamples before it charts.
    """
    exprs = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype.is_float():
            col = pl.when(col.is_finite()).then(col.round(digits))
        elif isinstance(dtype, pl.Datetime):
            col = col.dt.epoch("ms")
        exprs.append(col.alias(name))
    return alt.Data(values=frame.select(exprs).to_dicts())


def _t(title: str = "time (log clock)") -> alt.X:
    return alt.X("t:T", scale=alt.Scale(type="utc"), axis=alt.Axis(format="%H:%M", title=title))


def _t_tooltip() -> alt.Tooltip:
    return alt.Tooltip("t:T", timeUnit="utcyearmonthdatehoursminutesseconds", title="time")


def _elapsed_x() -> alt.X:
    """Time since each run's start (``t`` in ms from its first line), in minutes."""
    return alt.X("minutes:Q", title="minutes since the run's first decode line")


def _labels(frame: pl.DataFrame, column: str = "label") -> list[str]:
    return [x for x in frame[column].unique(maintain_order=True).to_list() if x is not None]


_BUSY_NAMES = {"sm_active": "GPU SM active, %", "util_pct": "GPU utilization, %"}
"""The GPU busy series ``stage_frame`` may carry (whichever metric the trace had) and their
legend titles."""
_BUSY_MEASURE = {"sm_active": "SM active", "util_pct": "utilization"}


def stage_strips_chart(
    long: pl.DataFrame, bucket_ms: int, *, run: str, stages: Sequence[str] | None = None
) -> alt.VConcatChart:
    """Per-stage activity over time: throughput overview with a brush, then one heat strip per
    series (requests per micro-batch on each stage, GPU busy of each stage: SM active when the
    trace has it, else utilization).

    Parameters
    ----------
    long
        Columns ``t`` (epoch ms, bucket start), ``stage``, ``series`` and ``value``
        (``analyze.timeline.stage_frame``). Series ``gen_tok_s`` feeds the overview;
        ``running_req`` and the GPU busy metric (``sm_active`` or ``util_pct``) the strips.
    bucket_ms
        Bucket width, so each cell spans its bucket.
    run
        The run's label, for the title.
    stages
        Stage order on the y axis (default: as they appear).
    """
    order = list(stages) if stages is not None else _labels(long, "stage")
    brush = alt.selection_interval(encodings=["x"], name="window")
    overview = (
        alt.Chart()
        .transform_filter(alt.datum.series == "gen_tok_s")
        .mark_line(interpolate="step-after", color=MUTED, strokeWidth=1.5)
        .encode(
            x=_t(),
            y=alt.Y("mean(value):Q", title="gen tok/s"),
            tooltip=[_t_tooltip(), alt.Tooltip("mean(value):Q", format=".0f", title="tok/s")],
        )
        .add_params(brush)
        .properties(height=90, width=WIDTH, title="Drag on this strip to zoom the stages below")
    )
    strips = []
    names = {"running_req": "requests in the micro-batch", **_BUSY_NAMES}
    present = set(long["series"].unique().to_list())
    strip_series = [("running_req", "blues"), *((m, "oranges") for m in _BUSY_NAMES)]
    for series, scheme in strip_series:
        if series not in present:
            continue
        strips.append(
            alt.Chart()
            .transform_filter(alt.datum.series == series)
            .transform_calculate(t2=f"datum.t + {int(bucket_ms)}")
            .mark_rect()
            .encode(
                x=alt.X(
                    "t:T",
                    scale=alt.Scale(type="utc", domain=brush),
                    axis=alt.Axis(format="%H:%M:%S", title=None, labelOverlap=True),
                ),
                x2="t2:T",
                y=alt.Y("stage:N", sort=order, title=None),
                color=alt.Color("value:Q", scale=alt.Scale(scheme=scheme), title=names[series]),
                tooltip=[
                    _t_tooltip(),
                    alt.Tooltip("stage:N"),
                    alt.Tooltip("value:Q", format=".1f", title=names[series]),
                ],
            )
            .properties(width=WIDTH, height=max(60, 18 * len(order)), title=names[series])
        )
    return (
        alt.vconcat(overview, *strips, data=data_of(long))
        .resolve_scale(color="independent")
        .properties(title=_timeline_title(long, run))
    )


def _timeline_title(long: pl.DataFrame, run: str) -> alt.TitleParams:
    busy = long.filter(pl.col("series").is_in(list(_BUSY_NAMES)))
    if busy.height:
        measure = _BUSY_MEASURE[busy["series"][0]]
        per = busy.group_by("stage").agg(pl.col("value").mean()).sort("value")
        lo, hi = per.row(0, named=True), per.row(-1, named=True)
        text = (
            f"{run}: {hi['stage']} is the busiest GPU ({hi['value']:.0f} % mean {measure}), "
            f"{lo['stage']} the idlest ({lo['value']:.0f} %)"
        )
    else:
        stages = long.filter(pl.col("series") == "running_req")["stage"].n_unique()
        text = f"{run}: decode activity on {stages} stage(s); no GPU trace to compare"
    return alt.TitleParams(text=text, subtitle="cells: mean over each time bucket")


def gpu_metric_chart(samples: pl.DataFrame, metric: str, *, run: str) -> alt.VConcatChart:
    """One GPU metric over time, a line per GPU: an overview with a brush, a zoomed detail, and
    a legend that highlights the GPUs clicked (shift-click for several).

    ``samples`` has ``t`` (epoch ms), ``gpu`` (label, e.g. ``PP3 (GPU 3)``) and ``value``.
    """
    brush = alt.selection_interval(encodings=["x"], name="window")
    pick = alt.selection_point(fields=["gpu"], bind="legend", name="gpus")
    gpus = _labels(samples, "gpu")
    color = alt.Color("gpu:N", scale=color_scale(gpus), title="GPU", sort=gpus)
    overview = (
        alt.Chart()
        .mark_line(strokeWidth=1)
        .encode(x=_t(), y=alt.Y("mean(value):Q", title=None), color=alt.value(MUTED))
        .add_params(brush)
        .properties(height=70, width=WIDTH, title="mean of all GPUs: drag to zoom below")
    )
    detail = (
        alt.Chart()
        .mark_line(strokeWidth=1.2)
        .encode(
            x=alt.X(
                "t:T",
                scale=alt.Scale(type="utc", domain=brush),
                axis=alt.Axis(format="%H:%M:%S", title=None),
            ),
            y=alt.Y("value:Q", title=metric),
            color=color,
            opacity=alt.condition(pick, alt.value(0.95), alt.value(0.12)),
            tooltip=[_t_tooltip(), alt.Tooltip("gpu:N"), alt.Tooltip("value:Q", format=".1f")],
        )
        .add_params(pick)
        .properties(width=WIDTH, height=260)
    )
    return alt.vconcat(overview, detail, data=data_of(samples)).properties(
        title=_gpu_title(samples, metric, run)
    )


def _gpu_title(samples: pl.DataFrame, metric: str, run: str) -> alt.TitleParams:
    sub = "click a legend entry to pick GPUs (shift for several)"
    if not samples.height:
        return alt.TitleParams(text=f"{run}: no {metric} samples", subtitle=sub)
    per = samples.group_by("gpu").agg(pl.col("value").mean()).sort("value")
    lo, hi = per.row(0, named=True), per.row(-1, named=True)
    return alt.TitleParams(
        text=f"{run}: mean {metric} from {lo['value']:.0f} ({lo['gpu']}) "
        f"to {hi['value']:.0f} ({hi['gpu']})",
        subtitle=sub,
    )


def kv_pressure_chart(frame: pl.DataFrame, threshold: float = 0.9) -> alt.LayerChart:
    """KV pool usage (0–1) over time per run, with the pressure threshold dashed.

    ``frame`` has ``t`` (ms since the run's first line), ``label`` and ``token_usage``; legend
    entries highlight runs.
    """
    labels = _labels(frame)
    pick = alt.selection_point(fields=["label"], bind="legend", name="runs")
    lines = (
        alt.Chart()
        .transform_calculate(minutes="datum.t / 60000")
        .mark_line(interpolate="step-after")
        .encode(
            x=_elapsed_x(),
            y=alt.Y(
                "token_usage:Q",
                title="KV pool in use",
                axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1]),
            ),
            color=alt.Color("label:N", scale=color_scale(labels), title="run"),
            opacity=alt.condition(pick, alt.value(1), alt.value(0.15)),
            tooltip=[
                alt.Tooltip("minutes:Q", format=".1f"),
                alt.Tooltip("label:N", title="run"),
                alt.Tooltip("token_usage:Q", format=".0%"),
            ],
        )
        .add_params(pick)
    )
    rule = (
        alt.Chart(alt.Data(values=[{"y": threshold}]))
        .mark_rule(strokeDash=[4, 4], color=MUTED)
        .encode(y="y:Q")
    )
    return alt.layer(rule, lines, data=data_of(frame)).properties(title=_kv_title(frame, threshold))


def _kv_title(frame: pl.DataFrame, threshold: float) -> alt.TitleParams:
    sub = f"dashed: {threshold:.0%}, where SGLang starts retracting requests"
    peaks = frame.group_by("label", maintain_order=True).agg(pl.col("token_usage").max())
    if not peaks.height:
        return alt.TitleParams(text="No KV usage in these logs", subtitle=sub)
    parts = [
        f"{r['label']} peaks at {r['token_usage']:.0%}"
        for r in peaks.iter_rows(named=True)
        if r["token_usage"] is not None
    ]
    return alt.TitleParams(text="KV pool: " + ", ".join(parts), subtitle=sub)


def model_chart(points: pl.DataFrame) -> alt.LayerChart:
    """Observed (filled) and expected (hollow, dashed) tok/s against concurrency, per layout.

    ``points`` is ``expected_vs_observed``'s frame.
    """
    labels = _labels(points)
    data = points.select("label", "concurrency", "observed_tok_s", "expected_tok_s", "residual_pct")
    ticks = sorted({int(c) for c in data["concurrency"].drop_nulls().to_list()})
    x = alt.X("concurrency:Q", scale=log2_scale(), axis=alt.Axis(values=ticks, format="d"))
    color = alt.Color("label:N", scale=color_scale(labels), title="layout")
    tips = [
        alt.Tooltip("label:N", title="layout"),
        alt.Tooltip("concurrency:Q"),
        alt.Tooltip("observed_tok_s:Q", format=".1f", title="observed"),
        alt.Tooltip("expected_tok_s:Q", format=".1f", title="expected"),
        alt.Tooltip("residual_pct:Q", format="+.1f", title="residual %"),
    ]
    expected = (
        alt.Chart()
        .mark_line(strokeDash=[5, 4], point=alt.OverlayMarkDef(filled=False, size=80))
        .encode(x=x, y=alt.Y("expected_tok_s:Q", title="output tokens/s"), color=color)
    )
    observed = (
        alt.Chart()
        .mark_point(filled=True, size=90)
        .encode(x=x, y="observed_tok_s:Q", color=color, tooltip=tips)
    )
    return alt.layer(expected, observed, data=data_of(data)).properties(title=_model_title(points))


def _model_title(points: pl.DataFrame) -> alt.TitleParams:
    sub = "filled: measured; hollow, dashed: the serving model fitted to the runs"
    off = points.filter(~pl.col("calibration") & pl.col("residual_pct").is_finite())
    if not off.height:
        return alt.TitleParams(text="The model reproduces every measured point", subtitle=sub)
    worst = off.sort(pl.col("residual_pct").abs(), descending=True).row(0, named=True)
    return alt.TitleParams(
        text=f"{worst['label']} at {worst['concurrency']}: observed "
        f"{worst['observed_tok_s']:.0f} tok/s, the model expects {worst['expected_tok_s']:.0f} "
        f"({worst['residual_pct']:+.0f} %)",
        subtitle=sub,
    )


def what_if_chart(table: pl.DataFrame, change: str) -> alt.Chart:
    """Predicted tok/s as measured and under a change, per observed point (``what_if_table``)."""
    data = table.select(
        pl.format("{} c={}", "label", "base_concurrency").alias("point"),
        "expected_tok_s",
        "what_if_tok_s",
        "change_pct",
        "occupancy",
    )
    long = data.unpivot(
        index=["point", "change_pct", "occupancy"],
        on=["expected_tok_s", "what_if_tok_s"],
        variable_name="case",
        value_name="tok_s",
    ).with_columns(
        pl.col("case").replace({"expected_tok_s": "as measured", "what_if_tok_s": change})
    )
    best = data.sort("change_pct", descending=True, nulls_last=True)
    if best.height and best["change_pct"][0] is not None and math.isfinite(best["change_pct"][0]):
        top = best.row(0, named=True)
        text = f"{change}: {top['point']} {top['change_pct']:+.0f} % ({top['occupancy']})"
    else:
        text = f"{change}: no prediction"
    return (
        alt.Chart(data_of(long))
        .mark_bar()
        .encode(
            y=alt.Y("point:N", title=None),
            yOffset=alt.YOffset("case:N"),
            x=alt.X("tok_s:Q", title="predicted output tokens/s"),
            color=alt.Color("case:N", scale=alt.Scale(range=[MUTED, "#0072B2"]), title=None),
            tooltip=[
                alt.Tooltip("point:N"),
                alt.Tooltip("case:N"),
                alt.Tooltip("tok_s:Q", format=".1f"),
                alt.Tooltip("change_pct:Q", format="+.1f", title="change %"),
                alt.Tooltip("occupancy:N", title="slots × requests"),
            ],
        )
        .properties(
            width=WIDTH, title=alt.TitleParams(text=text, subtitle="the model's prediction")
        )
    )
