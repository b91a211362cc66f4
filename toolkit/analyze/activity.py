"""When each input says the server was working, second by second, to line its clock up with
the log's (``clocks.fit_clock``).

Every function returns ``ts`` (a whole second) and ``busy_pct`` (0–100), on the input's
recorded clock: the GPUs' mean busy % of a trace; 100 for each second of a ``/metrics``
interval in which the server generated tokens (or its stages ran forwards, or it held
running requests), 0 for one in which it did not; 100 for each second of a benchmark run of a
phase file.
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.series import busy_pct

__all__ = [
    "ACTIVITY_METRICS",
    "MAX_INTERVAL_S",
    "metrics_activity",
    "phase_activity",
    "trace_activity",
]

_T = pl.Datetime("ms")

ACTIVITY_METRICS: tuple[str, ...] = (
    "sglang:generation_tokens_total",
    "sglang:gpu_execution_seconds_total",
    "sglang:forward_execution_seconds_total",
    "sglang:num_running_reqs",
)
"""``/metrics`` series that say the server was decoding, best first: the first one present is
read."""

MAX_INTERVAL_S = 60.0
"""A counter interval longer than this (a scrape gap, a restart) says too little about when
within it the work happened: it is not read."""


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={"ts": _T, "busy_pct": pl.Float64()})


def trace_activity(samples: pl.DataFrame) -> pl.DataFrame:
    """Mean busy % over the GPUs of a trace, per second (samples without a time left out)."""
    timed = samples.filter(pl.col("ts").is_not_null())
    if not timed.height:
        return _empty()
    value, _ = busy_pct(timed)
    return (
        timed.group_by(pl.col("ts").cast(_T).dt.truncate("1s"))
        .agg(busy_pct=value.mean())
        .drop_nulls()
        .sort("ts")
    )


def metrics_activity(samples: pl.DataFrame) -> pl.DataFrame:
    """Per second, 100 where the first of ``ACTIVITY_METRICS`` the scrapes hold grew (a
    counter: every second of the interval it grew in) or was above 0 (a gauge: the second of
    the scrape), else 0."""
    for metric in ACTIVITY_METRICS:
        rows = samples.filter((pl.col("metric") == metric) & pl.col("ts").is_not_null())
        if rows.height:
            break
    else:
        return _empty()
    end = pl.col("ts").cast(_T).dt.epoch("s")
    if rows["kind"][0] == "counter":
        rows = rows.filter(pl.col("interval_s").is_between(0, MAX_INTERVAL_S, closed="right"))
        start = end - pl.col("interval_s").ceil().cast(pl.Int64) + 1
        seconds = pl.int_ranges(start, end + 1)
    else:
        seconds = pl.concat_list(end)
    per_series = rows.select(ts=seconds, on=pl.col("value").fill_null(0.0) > 0).explode("ts")
    return (
        per_series.group_by("ts")
        .agg(busy_pct=pl.col("on").any().cast(pl.Float64) * 100.0)
        .select(pl.from_epoch("ts", time_unit="s").cast(_T), "busy_pct")
        .sort("ts")
    )


def phase_activity(marks: pl.DataFrame) -> pl.DataFrame:
    """Every second of each benchmark run a phase file marks (``start`` to ``end``) at 100."""
    runs = marks.filter(pl.col("start").is_not_null() & pl.col("end").is_not_null())
    runs = runs.filter(pl.col("end") >= pl.col("start"))
    if not runs.height:
        return _empty()
    seconds = pl.int_ranges(
        pl.col("start").cast(_T).dt.epoch("s"), pl.col("end").cast(_T).dt.epoch("s") + 1
    )
    return (
        runs.select(ts=seconds)
        .explode("ts")
        .unique()
        .select(pl.from_epoch("ts", time_unit="s").cast(_T), busy_pct=pl.lit(100.0))
        .sort("ts")
    )
