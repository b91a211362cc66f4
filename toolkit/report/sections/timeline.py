"""One run's stage timeline: decode activity and GPU busy per stage over time."""

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
from toolkit.load.gpu.trace import gpu_roles
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import MAX_POINTS, gpu_labels, pick_run, pp_size_of, run_frames
from toolkit.report.view import (
    View,
    note,
)

__all__ = ["stage_timeline", "timeline_extent"]


def timeline_extent(runs: RunSet, run: str | None = None) -> tuple[float, list[str]]:
    """Minutes the run's stage timeline spans, and its stages in order (for widget ranges)."""
    chosen = pick_run(runs, run)
    batches, samples = run_frames(runs, chosen)
    span = time_span(batches, samples)
    if span is None:
        return 0.0, []
    gpus = sorted(gpu_labels(runs, chosen)) if samples is not None else None
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
    roles = gpu_roles(chosen.launch) if chosen.launch is not None and (pp_size or 1) > 1 else None
    batches, samples = run_frames(runs, chosen)
    long, order = stage_frame(
        batches, samples, roles, pp_size, window=window, max_points=max_points
    )
    if stages:
        wanted = set(stages)
        long = long.filter(pl.col("stage").is_in(wanted) | (pl.col("series") == "gen_tok_s"))
        order = [s for s in order if s in wanted]
    if not long.height:
        text = "nothing in the chosen window" if window else "no Decode batch lines, no GPU trace"
        return View("stage_timeline", [note(f"{label}: {text}: no stage timeline.")])
    long, width = downsample_means(long, ["stage", "series"], ["value"], max_points)
    if not width:  # not bucketed: cells as wide as the typical gap between lines
        times = long["t"].unique().sort()
        width = int(times.diff().median() or 1_000) if times.len() > 1 else 1_000
    items: list[Any] = []
    if runs.gpu(chosen) is None:
        items.append(note(f"No GPU trace in {label}: the stage view shows the log only."))
    items.append(stage_strips_chart(long, width, run=label, stages=order))
    summary = (
        long.filter(pl.col("series") != "gen_tok_s")
        .group_by("stage", "series")
        .agg(pl.col("value").mean().alias("mean"))
        .pivot(on="series", index="stage", values="mean")
    )
    summary = summary.sort(pl.col("stage").replace_strict(_ranks(order), return_dtype=pl.Int64))
    return View("stage_timeline", items, {"stage_timeline": {"run": label, "stages": summary}})


def _ranks(order: Sequence[str]) -> dict[str, int]:
    return {name: i for i, name in enumerate(order)}
