"""What every chart sends and how it reads time.

Time columns are epoch milliseconds (``t``). One run's views sit on a UTC scale, so the axis shows
the log's own wall clock whatever the reader's time zone; views that compare runs recorded on
different days use minutes since each run's first line.
"""

from __future__ import annotations

import altair as alt
import polars as pl

__all__ = ["data_of", "elapsed_x", "labels_of", "time_tooltip", "time_x"]


def data_of(frame: pl.DataFrame, digits: int = 3) -> alt.Data:
    """Inline row data for a chart: floats rounded, non-finite numbers as null.

    Rows go in as plain values (not a DataFrame), so altair's 5000-row guard does not apply:
    the library downsamples before it charts.
    """
    exprs = []
    for name, dtype in frame.schema.items():
        col = pl.col(name)
        if dtype.is_float():
            col = pl.when(col.is_finite()).then(col.round(digits))
        elif isinstance(dtype, pl.Datetime):
            col = col.dt.epoch("ms")
        exprs.append(col.alias(name))
    return alt.Data(values=frame.select(exprs).to_dicts())


def time_x(title: str = "time (log clock)") -> alt.X:
    return alt.X("t:T", scale=alt.Scale(type="utc"), axis=alt.Axis(format="%H:%M", title=title))


def time_tooltip() -> alt.Tooltip:
    return alt.Tooltip("t:T", timeUnit="utcyearmonthdatehoursminutesseconds", title="time")


def elapsed_x() -> alt.X:
    """Time since each run's start (``t`` in ms from its first line), in minutes."""
    return alt.X("minutes:Q", title="minutes since the run's first decode line")


def labels_of(frame: pl.DataFrame, column: str = "label") -> list[str]:
    return [x for x in frame[column].unique(maintain_order=True).to_list() if x is not None]
