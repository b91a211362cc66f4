"""A GPU trace without time placed on the log's clock, and the notes of every input's clock.

A trace that prints no time (``dcgmi dmon`` without ``[gpu_trace] start``) is placed where its
busy stretches agree best with the log's decoding stretches (``series.cadence_windows``: cut at
pauses of the log's own cadence), and used only when that place stands out. Timed inputs are
fitted file by file (``input_clocks``); ``clock_notes`` says what was found and done.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl

from toolkit.analyze.clocks import CLOCK_AGREEMENT, CLOCK_GAIN, MIN_CLOCK_SHIFT_S, ClockFit
from toolkit.analyze.series import busy_pct, cadence_windows
from toolkit.load.assembly import clock_placement
from toolkit.load.run import Run

__all__ = [
    "CLOCK_AGREEMENT",
    "CLOCK_GAIN",
    "MIN_CLOCK_SHIFT_S",
    "at_elapsed",
    "clock_notes",
    "is_clear",
    "placement",
]

_NOTE_INPUT = {"GPU trace": "GPU clock", "metrics": "metrics clock", "phases": "phase clock"}


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
    fits: Iterable[ClockFit],
) -> list[dict[str, str]]:
    """``Run.mismatches`` with what was found of the inputs' clocks: a trace without time
    placed (or too unclear to place); each input whose clock was shifted, is too weak to
    shift, or cannot be placed (``ClockFit.note``). A fit's note replaces the run's own "no
    overlap" note of the trace."""
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
    notes = [(fit, fit.note()) for fit in fits]
    notes = [(fit, note) for fit, note in notes if note is not None]
    if run.gpu_span is not None and any(fit.input == "GPU trace" for fit, _ in notes):
        # the whole trace has times: the run's "GPU trace" note is its "no overlap" one
        out = [m for m in out if m["input"] != "GPU trace"]
    for fit, note in notes:
        out.append(
            {"input": _NOTE_INPUT.get(fit.input, fit.input), "files": fit.files, "detail": note}
        )
    return out
