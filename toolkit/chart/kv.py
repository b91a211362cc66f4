"""KV pool usage over time per run, against the pressure threshold."""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import data_of, elapsed_x, labels_of
from toolkit.chart.theme import MUTED, WIDTH, color_scale

__all__ = ["kv_pressure_chart"]


def kv_pressure_chart(frame: pl.DataFrame, threshold: float = 0.9) -> alt.LayerChart:
    """KV pool usage (0–1) over time per run, with the pressure threshold dashed.

    ``frame`` has ``t`` (ms since the run's first line), ``label`` and ``token_usage``; legend
    entries highlight runs.
    """
    labels = labels_of(frame)
    pick = alt.selection_point(fields=["label"], bind="legend", name="runs")
    lines = (
        alt.Chart()
        .transform_calculate(minutes="datum.t / 60000")
        .mark_line(interpolate="step-after")
        .encode(
            x=elapsed_x(),
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
    return alt.layer(rule, lines, data=data_of(frame)).properties(
        width=WIDTH, title=_kv_title(frame, threshold)
    )


def _kv_title(frame: pl.DataFrame, threshold: float) -> alt.TitleParams:
    sub = f"dashed: {threshold:.0%}, where SGLang starts retracting requests"
    # a run is named only where it is drawn: a line needs two samples
    peaks = (
        frame.filter(pl.col("token_usage").is_not_null())
        .group_by("label", maintain_order=True)
        .agg(pl.col("token_usage").max(), pl.len().alias("n"))
        .filter(pl.col("n") >= 2)
    )
    if not peaks.height:
        return alt.TitleParams(text="No KV usage in these logs", subtitle=sub)
    parts = [f"{r['label']} peaks at {r['token_usage']:.0%}" for r in peaks.iter_rows(named=True)]
    return alt.TitleParams(text="KV pool: " + ", ".join(parts), subtitle=sub)
