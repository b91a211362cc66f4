"""The stage timeline: a throughput overview with a brush, then one heat strip per series.

Related views are concatenated over one top-level dataset (stored once in the HTML) and the
interaction lives in the spec, so zooming works in a report without a kernel. Every strip
shares the overview's time range, so a column of cells is one moment on every strip.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from toolkit.chart.encode import (
    data_of,
    labels_of,
    phase_marks,
    time_domain,
    time_tooltip,
    time_x,
)
from toolkit.chart.theme import MUTED, WIDTH

__all__ = ["stage_strips_chart"]


_BUSY_NAMES = {"sm_active": "GPU SM active, %", "util_pct": "GPU utilization, %"}
"""The GPU busy series ``stage_frame`` may carry (whichever metric the trace had) and their
legend titles."""
_BUSY_MEASURE = {"sm_active": "SM active", "util_pct": "utilization"}


def stage_strips_chart(
    long: pl.DataFrame,
    bucket_ms: int,
    *,
    run: str,
    stages: Sequence[str] | None = None,
    phases: pl.DataFrame | None = None,
    width: int = WIDTH,
) -> alt.VConcatChart:
    """Per-stage activity over time: throughput overview with a brush, then one heat strip per
    series (requests per micro-batch on each stage, GPU busy of each stage: SM active when the
    trace has it, else utilization).

    Parameters
    ----------
    long
        Columns ``t`` (epoch ms, bucket start), ``stage``, ``series`` and ``value``
        (``analyze.timeline.stage_frame``), and optionally ``w``: each cell's width in ms.
        Series ``gen_tok_s`` feeds the overview; ``running_req`` and the GPU busy metric
        (``sm_active`` or ``util_pct``) the strips.
    bucket_ms
        Cell width where ``w`` is not given.
    run
        The run's label, for the title.
    stages
        Stage order on the y axis (default: as they appear).
    phases
        Optional ``t`` and ``label`` per benchmark phase, marked on the overview.
    width
        Plot width in pixels, shared by every strip.
    """
    order = list(stages) if stages is not None else labels_of(long, "stage")
    cell = "datum.w" if "w" in long.columns else str(int(bucket_ms))
    pad = int(long["w"].max() or 0) if "w" in long.columns and long.height else bucket_ms
    domain = time_domain(long, pad_ms=pad)
    brush = alt.selection_interval(encodings=["x"], name="window")
    x_all = time_x(width, domain=domain)
    line = (
        alt.Chart()
        .transform_filter(alt.datum.series == "gen_tok_s")
        .mark_line(interpolate="step-after", color=MUTED, strokeWidth=1.5)
        .encode(
            x=x_all,
            y=alt.Y("mean(value):Q", title="gen tok/s"),
            tooltip=[time_tooltip(), alt.Tooltip("mean(value):Q", format=".0f", title="tok/s")],
        )
        .add_params(brush)
    )
    overview = alt.layer(line, *phase_marks(phases, x_all)).properties(
        height=90,
        width=width,
        title=alt.TitleParams(
            "Drag on this strip to zoom the stages below",
            subtitle="dotted: a benchmark phase starts, at the concurrency it offered"
            if phases is not None and phases.height
            else "",
        ),
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
            .transform_calculate(t2=f"datum.t + {cell}")
            .mark_rect()
            .encode(
                x=time_x(width, None, domain=domain, zoom=brush),
                x2="t2:T",
                y=alt.Y("stage:N", sort=order, title=None),
                color=alt.Color(
                    "value:Q",
                    scale=alt.Scale(scheme=scheme),
                    title=names[series],
                    legend=alt.Legend(format="d" if series == "running_req" else ".0f"),
                ),
                tooltip=[
                    time_tooltip(),
                    alt.Tooltip("stage:N"),
                    alt.Tooltip("value:Q", format=".1f", title=names[series]),
                ],
            )
            .properties(width=width, height=max(60, 18 * len(order)), title=names[series])
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
        if lo["stage"] == hi["stage"]:
            text = f"{run}: {hi['stage']} {hi['value']:.0f} % mean {measure}"
        else:
            text = (
                f"{run}: {hi['stage']} is the busiest GPU ({hi['value']:.0f} % mean {measure}), "
                f"{lo['stage']} the idlest ({lo['value']:.0f} %)"
            )
    else:
        stages = long.filter(pl.col("series") == "running_req")["stage"].n_unique()
        text = f"{run}: decode activity on {stages} stage(s); no GPU trace to compare"
    return alt.TitleParams(text=text, subtitle="cells: mean over each time bucket")
