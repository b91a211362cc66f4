"""The serving model against the measurements: expected vs observed, and a what-if."""

from __future__ import annotations

import math

import altair as alt
import polars as pl

from toolkit.chart.encode import data_of, labels_of
from toolkit.chart.theme import MUTED, WIDTH, color_scale, log2_scale

__all__ = ["model_chart", "what_if_chart"]


def model_chart(points: pl.DataFrame) -> alt.LayerChart:
    """Observed (filled) and expected (hollow, dashed) tok/s against concurrency, per layout.

    ``points`` is ``expected_vs_observed``'s frame.
    """
    labels = labels_of(points)
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
    return alt.layer(expected, observed, data=data_of(data)).properties(
        width=WIDTH, title=_model_title(points)
    )


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
    # points in the table's order (layout, then concurrency), not alphabetically: c=16 < c=2
    order = data["point"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(data_of(long))
        .mark_bar()
        .encode(
            y=alt.Y("point:N", title=None, sort=order),
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
