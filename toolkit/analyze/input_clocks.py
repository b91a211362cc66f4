"""The clock of each timed input of a run against its log's: every GPU trace file, every
``/metrics`` file and the phase file, each fitted on its own (``clocks.fit_clock``), and the
inputs with the fitted shifts applied.

A trace of each node of a multi-node launch, or metrics scraped from another host than the
GPUs were sampled on, may each keep its own clock: one file is one clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze.activity import metrics_activity, phase_activity, trace_activity
from toolkit.analyze.clocks import ClockFit, fit_clock
from toolkit.analyze.series import cadence_windows
from toolkit.errors import ToolkitError
from toolkit.load.assembly import overlap_s
from toolkit.load.phase_marks import PHASE_FORMAT
from toolkit.load.prometheus import Metrics
from toolkit.load.run import Run

__all__ = ["metrics_fits", "phase_fit", "shifted", "shifted_metrics", "trace_fits"]


def _span(ts: pl.Series) -> tuple[datetime, datetime] | None:
    ts = ts.drop_nulls()
    return (ts.min(), ts.max()) if ts.len() else None  # type: ignore[return-value]


def _meets(
    span: tuple[datetime, datetime] | None, launch: tuple[datetime, datetime] | None
) -> bool:
    return span is not None and launch is not None and overlap_s(span, launch) > 0


def trace_fits(run: Run, batches: pl.DataFrame) -> dict[str, ClockFit]:
    """Trace file → its clock fit, for every file of the run's GPU trace with times."""
    trace = run.gpu
    if trace is None or not trace.samples.height:
        return {}
    timed = trace.samples.filter(pl.col("ts").is_not_null())
    return _per_file(run, timed, trace_activity, "GPU trace", cadence_windows(batches))


def metrics_fits(run: Run, batches: pl.DataFrame) -> dict[str, ClockFit]:
    """Metrics file → its clock fit, for every metrics file with timed scrapes; empty without
    metrics, or when they cannot be read (``ppscope parse`` names the error)."""
    try:
        metrics = run.metrics
    except ToolkitError:
        return {}
    if metrics is None or not metrics.samples.height:
        return {}
    return _per_file(run, metrics.samples, metrics_activity, "metrics", cadence_windows(batches))


def _per_file(
    run: Run,
    frame: pl.DataFrame,
    activity: Callable[[pl.DataFrame], pl.DataFrame],
    kind: str,
    windows: Any,
) -> dict[str, ClockFit]:
    """Source file → the clock fit of its rows' ``activity`` against the log's ``windows``."""
    return {
        str(source): fit_clock(
            activity(rows),
            windows,
            input=kind,
            files=Path(str(source)).name,
            recorded_s=run.config.clock_offset_s,
            overlaps=_meets(_span(rows["ts"]), run.launch_span),
        )
        for (source,), rows in frame.group_by("source", maintain_order=True)
    }


def phase_fit(run: Run, batches: pl.DataFrame) -> ClockFit | None:
    """The phase file's clock fit (all phase files as one); None without one."""
    marks = run.phase_marks
    if marks is None or not marks.height:
        return None
    span = _span(pl.concat([marks["start"], marks["end"]]))
    return fit_clock(
        phase_activity(marks),
        cadence_windows(batches),
        input="phases",
        files=", ".join(p.name for p in run.files.get(PHASE_FORMAT, [])),
        recorded_s=run.config.clock_offset_s,
        overlaps=_meets(span, run.launch_span),
    )


def shifted(
    frame: pl.DataFrame, fits: Mapping[str, ClockFit], columns: tuple[str, ...] = ("ts",)
) -> pl.DataFrame:
    """``frame`` (with ``source``) without the rows of files whose clock fit is not used, and
    the ``columns`` of shifted files moved by their shift."""
    unused = [s for s, f in fits.items() if not f.used]
    if unused:
        frame = frame.filter(~pl.col("source").is_in(unused))
    moved = {s: f.applied_s for s, f in fits.items() if f.used and f.applied_s}
    if not moved:
        return frame
    millis = pl.col("source").replace_strict(
        {s: round(v * 1000) for s, v in moved.items()}, default=0, return_dtype=pl.Int64
    )
    return frame.with_columns(pl.col(c) + pl.duration(milliseconds=millis) for c in columns)


def shifted_metrics(metrics: Metrics | None, fits: Mapping[str, ClockFit]) -> Metrics | None:
    """``metrics`` on the log's clock (``shifted``); None when no file of them is used."""
    if metrics is None:
        return None
    if fits and not any(f.used for f in fits.values()):
        return None
    return replace(metrics, samples=shifted(metrics.samples, fits))
