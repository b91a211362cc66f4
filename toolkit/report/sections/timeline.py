"""Stage timelines: decode activity and GPU busy per stage over time, one chart per run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from toolkit.analyze.series import downsample_means
from toolkit.analyze.timeline import (
    span_minutes,
    stage_frame,
    stage_names,
    time_span,
)
from toolkit.chart.timeline import stage_strips_chart
from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import gpu_roles
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import (
    MAX_POINTS,
    gpu_labels,
    phase_labels,
    pick_run,
    pp_size_of,
    run_frames,
)
from toolkit.report.view import (
    View,
    note,
)

__all__ = ["stage_timeline", "stage_timelines", "timeline_extent"]


def timeline_extent(runs: RunSet, run: str | None = None) -> tuple[float, list[str]]:
    """Minutes the run's stage timeline spans, and its stages in order (for widget ranges)."""
    chosen = pick_run(runs, run)
    batches, samples = run_frames(runs, chosen)
    span = time_span(batches, samples)
    if span is None:
        return 0.0, []
    gpus = sorted({g for _, g in gpu_labels(runs, chosen)}) if samples is not None else None
    return span_minutes(span), stage_names(batches, gpus, pp_size_of(chosen))


def stage_timeline(
    runs: RunSet,
    run: str | None = None,
    *,
    window: tuple[float, float] | None = None,
    stages: Sequence[str] | None = None,
    max_points: int = MAX_POINTS,
) -> View:
    """Per-stage decode activity and GPU busy (SM active, else utilization) of one run over time.

    Parameters
    ----------
    run
        Run label; default the first PP run.
    window
        (start, end) in minutes from the run's first line or sample; default everything.
    stages
        Stages to show (``PP0``...); default all.
    max_points
        Most cells the chart carries; time buckets widen to fit.
    """
    chosen = pick_run(runs, run)
    label = runs.label_of(chosen)
    pp_size = pp_size_of(chosen)
    try:
        roles = (
            gpu_roles(chosen.layout, inventory=chosen.gpu_inventory) if (pp_size or 1) > 1 else None
        )
    except ToolkitError:  # a layout the GPUs cannot hold: the stages go unmapped
        roles = None
    batches, samples = run_frames(runs, chosen)
    long, order = stage_frame(
        batches, samples, roles, pp_size, window=window, max_points=max_points
    )
    if stages:
        wanted = set(stages)
        if not wanted & set(order):
            have = ", ".join(order) or "none"
            text = f"{label}: no stage named {', '.join(stages)} (it has: {have})."
            return View("stage_timeline", [note(text)])
        long = long.filter(pl.col("stage").is_in(wanted) | (pl.col("series") == "gen_tok_s"))
        order = [s for s in order if s in wanted]
    if not long.height:
        text = "nothing in the chosen window" if window else "no Decode batch lines, no GPU trace"
        return View("stage_timeline", [note(f"{label}: {text}: no stage timeline.")])
    long, width = downsample_means(long, ["stage", "series"], ["value"], max_points)
    items: list[Any] = []
    if runs.gpu(chosen) is None:
        items.append(note(f"No GPU trace in {label}: the stage view shows the log only."))
    phases = phase_labels(runs, chosen, long["t"])
    cells = _cells(long, width)
    items.append(stage_strips_chart(cells, width, run=label, stages=order, phases=phases))
    summary = (
        long.filter(pl.col("series") != "gen_tok_s")
        .group_by("stage", "series")
        .agg(pl.col("value").mean().alias("mean"))
        .pivot(on="series", index="stage", values="mean")
    )
    summary = summary.sort(pl.col("stage").replace_strict(_ranks(order), return_dtype=pl.Int64))
    return View("stage_timeline", items, {"stage_timeline": {"run": label, "stages": summary}})


def stage_timelines(runs: RunSet, run: str | None = None, *, max_points: int = MAX_POINTS) -> View:
    """Every run's stage timeline, one chart each (``run`` names one to show alone).

    Each chart has its own time range (runs are recorded at different times) and carries at
    most ``max_points`` cells.
    """
    if run:
        return stage_timeline(runs, run, max_points=max_points)
    items: list[Any] = []
    records = []
    for label in runs.labels:
        view = stage_timeline(runs, label, max_points=max_points)
        items += view.items
        if view.record:
            records.append(view.record["stage_timeline"])
    return View("stage_timeline", items, {"stage_timelines": records})


CELLS_ACROSS = 1500
"""Rows closer in time than 1/1500 of the span are one cell (a TP stage's GPUs sampled a few
ms apart); finer cells than that cannot be told apart on a page."""


def _cells(long: pl.DataFrame, bucket_ms: int) -> pl.DataFrame:
    """One heat-strip cell per stage, series and moment, with its width ``w`` in ms.

    Series are sampled at their own pace (a decode line every few seconds, a GPU sample per
    second), so each cell reaches to the next one of its series, capped at three typical gaps
    so that pauses between benchmark phases stay blank.
    """
    if not long.height:
        return long.with_columns(w=pl.lit(None, pl.Int64))
    span = int(long["t"].max() - long["t"].min())
    merge = max(int(bucket_ms), span // CELLS_ACROSS, 1)
    keys = ["stage", "series"]
    cells = (
        long.with_columns(pl.col("t") // merge * merge)
        .group_by(*keys, "t")
        .agg(pl.col("value").mean())
        .sort(*keys, "t")
    )
    gap = pl.col("t").diff().over(keys)
    typical = gap.median().over(keys).fill_null(merge)
    to_next = pl.col("t").shift(-1).over(keys) - pl.col("t")
    width = pl.min_horizontal(to_next.fill_null(typical), 3 * typical)
    return cells.with_columns(w=pl.max_horizontal(width, pl.lit(merge)).cast(pl.Int64)).select(
        "t", "stage", "series", "value", "w"
    )


def _ranks(order: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(order)}
