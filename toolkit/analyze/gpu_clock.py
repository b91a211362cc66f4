"""A GPU trace on the log's clock: a shifted clock found, a trace without time placed.

The trace's busy seconds are lined up with the log's decoding stretches
(``series.cadence_windows``: cut at pauses of the log's own cadence). A shift of the whole trace
that agrees clearly better than the recorded clock is named, and applied when its agreement is
high; a trace that prints no time (``dcgmi dmon`` without ``[gpu_trace] start``) is placed where
it agrees best, and used only when that place stands out.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from toolkit.analyze.series import busy_pct, cadence_windows
from toolkit.load.assembly import clock_offset, clock_placement
from toolkit.load.gpu import trace_formats
from toolkit.load.gpu.trace import GpuTrace
from toolkit.load.run import Run

__all__ = [
    "CLOCK_AGREEMENT",
    "CLOCK_GAIN",
    "MIN_CLOCK_SHIFT_S",
    "at_elapsed",
    "clock_candidate",
    "clock_notes",
    "is_clear",
    "placement",
]

MIN_CLOCK_SHIFT_S = 3.0
"""A GPU clock off the log's by less than this is within the sampling noise of both."""

CLOCK_GAIN = 0.15
"""Agreement a shifted GPU clock must gain over the recorded one to be named."""

CLOCK_AGREEMENT = 0.5
"""Agreement (shared active seconds over either's) at which a shift is applied."""


def clock_candidate(
    trace: GpuTrace | None, batches: pl.DataFrame
) -> tuple[float, float, float] | None:
    """(seconds the GPU clock looks off the log's, agreement at that shift, agreement as
    recorded) when a shift of at least ``MIN_CLOCK_SHIFT_S`` lines the trace's activity up
    with the log's decoding better by ``CLOCK_GAIN``; else None."""
    if trace is None or not trace.samples.height or not batches.height:
        return None
    value, _ = busy_pct(trace.samples)
    busy = (
        trace.samples.filter(pl.col("ts").is_not_null())
        .group_by(pl.col("ts").dt.truncate("1s"))
        .agg(busy_pct=value.mean())
        .drop_nulls()
    )
    windows = cadence_windows(batches)  # phases, not the whole sweep
    spans = list(zip(windows["start"].to_list(), windows["end"].to_list(), strict=True))
    best = clock_offset(busy, spans)
    recorded = clock_offset(busy, spans, max_shift_s=0)
    if best is None or recorded is None:
        return None
    shift, score = best
    if abs(shift) < MIN_CLOCK_SHIFT_S or score - recorded[1] < CLOCK_GAIN:
        return None
    return shift, score, recorded[1]


def placement(run: Run, batches: pl.DataFrame) -> tuple[datetime, float, float] | None:
    """(local time of the first sample, agreement, best agreement more than a typical decoding
    stretch away) of a run's GPU trace that prints no time (``dcgmi dmon`` with ``[gpu_trace]
    interval_s`` but no ``start``): where its busy stretches line up best with the log's
    decoding. None when the trace has its times, or several files without, or nothing to line
    up. ``is_clear`` says whether it is used."""
    trace = run.gpu
    if trace is None or run.gpu_span is not None or len(run.untimed_gpu_files) != 1:
        return None
    samples = trace.samples.filter(pl.col("elapsed_s").is_not_null())
    decode = batches.filter(pl.col("kind") == "decode")["ts"].drop_nulls()
    windows = cadence_windows(batches)
    if not samples.height or not decode.len() or not windows.height:
        return None
    anchor = decode.min()
    value, _ = busy_pct(samples)
    busy = (
        samples.select(ts=at_elapsed(anchor), v=value)
        .group_by(pl.col("ts").dt.truncate("1s"))
        .agg(busy_pct=pl.col("v").mean())
        .drop_nulls()
    )
    spans = list(zip(windows["start"].to_list(), windows["end"].to_list(), strict=True))
    lengths = (windows["end"] - windows["start"]).dt.total_seconds()
    reach = max(float(samples["elapsed_s"].max() or 0.0), (decode.max() - anchor).total_seconds())
    found = clock_placement(
        busy,
        spans,
        max_shift_s=math.ceil(reach) + 1,
        apart_s=max(float(lengths.median() or 0.0), MIN_CLOCK_SHIFT_S),
    )
    if found is None:
        return None
    shift, score, elsewhere = found
    return anchor + timedelta(seconds=shift), score, elsewhere


def is_clear(found: tuple[datetime, float, float] | None) -> bool:
    """Whether a placement is clear enough to read the trace there: agreement of at least
    ``CLOCK_AGREEMENT``, ``CLOCK_GAIN`` above any other place."""
    return found is not None and found[1] >= CLOCK_AGREEMENT and found[1] - found[2] >= CLOCK_GAIN


def at_elapsed(start: datetime) -> pl.Expr:
    """``ts`` of samples that print no time: ``start`` plus their ``elapsed_s``."""
    millis = (pl.col("elapsed_s") * 1000).round().cast(pl.Int64)
    return (pl.lit(start).cast(pl.Datetime("ms")) + pl.duration(milliseconds=millis)).alias("ts")


def clock_notes(
    run: Run,
    placed_at: tuple[datetime, float, float] | None,
    placed: bool,
    candidate: tuple[float, float, float] | None,
    applied: tuple[float, float, float] | None,
) -> list[dict[str, str]]:
    """``Run.mismatches`` with what was found of the GPU clock: a trace without time placed
    (or too unclear to place), a shifted clock applied (or too weak to apply)."""
    out = list(run.mismatches)
    if placed_at is not None:
        start, score, elsewhere = placed_at
        files = ", ".join(Path(f).name for f in run.untimed_gpu_files)
        found = (
            f"its busy stretches line up best with the log's decoding when its first sample "
            f"is at {start:%Y-%m-%d %H:%M:%S} ({score:.0%} agreement, {elsewhere:.0%} at best "
            "anywhere else)"
        )
        stamp = f"{start:%Y-%m-%dT%H:%M:%S}"
        if placed:
            detail = (
                f"the trace prints no time; {found}, so it is read there: set [gpu_trace] "
                f"start = {stamp} in run.toml to make it explicit"
            )
        else:
            detail = (
                f"the trace prints no time and nothing places it on the log's clock; {found}, "
                "too unclear to use, so its samples are not used: set [gpu_trace] start "
                "(local time of the first sample) in run.toml"
            )
        kept = [m for m in out if not (m["input"] == "GPU trace" and m["files"] == files)]
        out = [*kept, {"input": "GPU trace", "files": files, "detail": detail}]
    if candidate is not None:
        shift, score, recorded = candidate
        offset = run.config.clock_offset_s + shift
        seen = (
            f"the GPUs' busy stretches line up with the log's decoding {shift:+.0f} s later "
            f"({score:.0%} agreement against {recorded:.0%} as recorded)"
        )
        if applied is not None:
            then = f"the trace is read shifted: set clock_offset_s = {offset:g} in run.toml"
            then += " to make it explicit"
        else:
            then = (
                f"too weak an agreement to apply (under {CLOCK_AGREEMENT:.0%}), so the trace "
                f"is read as recorded: if its clock is off, set clock_offset_s = {offset:g} "
                "in run.toml"
            )
        out.append(
            {
                "input": "GPU clock",
                "files": ", ".join(
                    p.name for fmt in trace_formats() for p in run.files.get(fmt, [])
                ),
                "detail": f"{seen}; {then}",
            }
        )
    return out
