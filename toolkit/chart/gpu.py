"""One GPU metric over time, a line per GPU, with an overview to zoom from."""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import data_of, labels_of, time_domain, time_tooltip, time_x
from toolkit.chart.theme import MUTED, WIDTH, color_scale

__all__ = ["gpu_metric_chart"]


def gpu_metric_chart(samples: pl.DataFrame, metric: str, *, run: str) -> alt.VConcatChart:
    """One GPU metric over time, a line per GPU: an overview with a brush, a zoomed detail, and
    a legend that highlights the GPUs clicked (shift-click for several).

    ``samples`` has ``t`` (epoch ms), ``gpu`` (label, e.g. ``PP3 (GPU 3)``) and ``value``.
    """
    brush = alt.selection_interval(encodings=["x"], name="window")
    domain = time_domain(samples)
    pick = alt.selection_point(fields=["gpu"], bind="legend", name="gpus")
    gpus = labels_of(samples, "gpu")
    color = alt.Color("gpu:N", scale=color_scale(gpus), title="GPU", sort=gpus)
    overview = (
        alt.Chart()
        .mark_line(strokeWidth=1)
        .encode(
            x=time_x(WIDTH, domain=domain),
            y=alt.Y("mean(value):Q", title=None),
            color=alt.value(MUTED),
        )
        .add_params(brush)
        .properties(height=70, width=WIDTH, title="mean of all GPUs: drag to zoom below")
    )
    detail = (
        alt.Chart()
        .mark_line(strokeWidth=1.2)
        .encode(
            x=time_x(WIDTH, None, domain=domain, zoom=brush),
            y=alt.Y("value:Q", title=metric),
            color=color,
            opacity=alt.condition(pick, alt.value(0.95), alt.value(0.12)),
            tooltip=[time_tooltip(), alt.Tooltip("gpu:N"), alt.Tooltip("value:Q", format=".1f")],
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
