"""One GPU metric of one run over time, a line per GPU labelled by its stage."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from toolkit.analyze.series import downsample_means, epoch_ms
from toolkit.analyze.timeline import (
    in_window,
    span_minutes,
    time_span,
)
from toolkit.chart.gpu import gpu_metric_chart
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import MAX_POINTS, gpu_labels, pick_run, run_frames
from toolkit.report.view import (
    View,
    note,
)

__all__ = ["gpu_extent", "gpu_metrics"]


def gpu_extent(runs: RunSet, run: str | None = None) -> tuple[float, list[str], list[str]]:
    """Minutes the run spans (log and trace), its GPU labels and the trace's metrics."""
    chosen = pick_run(runs, run)
    trace = runs.gpu(chosen)
    span = time_span(*run_frames(runs, chosen))
    if trace is None or span is None:
        return 0.0, [], []
    names = gpu_labels(runs, chosen)
    return span_minutes(span), list(names.values()), trace.metrics


def gpu_metrics(
    runs: RunSet,
    run: str | None = None,
    *,
    metric: str = "util_pct",
    gpus: Sequence[str] | None = None,
    window: tuple[float, float] | None = None,
    max_points: int = MAX_POINTS,
) -> View:
    """One GPU metric of one run over time, a line per GPU labelled by its pipeline stage.

    ``window`` is (start, end) in minutes from the run's first line or sample.
    """
    chosen = pick_run(runs, run)
    label = runs.label_of(chosen)
    trace = runs.gpu(chosen)
    batches, samples = run_frames(runs, chosen)
    span = time_span(batches, samples)
    if trace is None or samples is None or span is None:
        return View("gpu", [note(f"No GPU trace in {label}.")], {"gpu": None})
    if metric not in trace.metrics:
        have = ", ".join(trace.metrics)
        return View("gpu", [note(f"{label}: the trace has no {metric} (it has {have}).")])
    names = gpu_labels(runs, chosen)
    labels = pl.DataFrame(
        [(n, g, name) for (n, g), name in names.items()],
        schema={"node": pl.Int32, "gpu": pl.Int32, "label": pl.String},
        orient="row",
    )
    frame = samples.select(
        epoch_ms(), "node", "gpu", pl.col(metric).cast(pl.Float64).alias("value")
    ).join(labels, on=["node", "gpu"], how="left", nulls_equal=True)
    keep = pl.col("t").is_not_null() & pl.col("value").is_not_null() & in_window(span, window)
    if gpus:
        keep &= pl.col("label").is_in(list(gpus))
    frame = frame.filter(keep)
    if not frame.height:
        return View("gpu", [note(f"{label}: no samples in the chosen window or GPUs.")])
    frame, _ = downsample_means(frame, ["node", "gpu", "label"], ["value"], max_points)
    frame = frame.sort("node", "gpu", "t", nulls_last=True).with_columns(gpu=pl.col("label"))
    summary = frame.group_by("gpu", maintain_order=True).agg(
        pl.col("value").mean().alias("mean"), pl.col("value").max().alias("max")
    )
    chart = gpu_metric_chart(frame.select("t", "gpu", "value"), metric, run=label)
    return View("gpu", [chart], {"gpu": {"run": label, "metric": metric, "gpus": summary}})
