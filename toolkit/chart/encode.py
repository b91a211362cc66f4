"""What every chart sends and how it reads time.

Time columns are epoch milliseconds (``t``). One run's views sit on a UTC scale, so the axis shows
the log's own wall clock whatever the reader's time zone; views that compare runs recorded on
different days use minutes since each run's first line.

Time axes use a 24-hour clock whose label resolution follows the tick: ``21:47`` on a whole
minute, ``21:47:30`` between minutes, the date (``May 26``) on a midnight tick, so labels never
repeat and a span across days says which day. Stacked time views take one explicit domain
(``time_domain``) so their columns line up.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import polars as pl

from toolkit.chart.theme import MUTED, WIDTH

__all__ = [
    "TIME_FORMAT",
    "count_axis",
    "data_of",
    "elapsed_x",
    "labels_of",
    "phase_marks",
    "time_axis",
    "time_domain",
    "time_tooltip",
    "time_x",
]

TIME_FORMAT: dict[str, str] = {
    "year": "%Y",
    "quarter": "%b %d",
    "month": "%b %d",
    "week": "%b %d",
    "date": "%b %d",
    "hours": "%H:%M",
    "minutes": "%H:%M",
    "seconds": "%H:%M:%S",
    "milliseconds": "%H:%M:%S.%L",
}
"""Vega's multi-format for time labels: each tick formatted by its finest non-zero unit."""

LABEL_SPACING = 110
"""Pixels per time label: a ``21:47:30`` label is ~55 px, and gaps keep them apart."""


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


def time_axis(width: int, title: str | None = "time (log clock)") -> alt.Axis:
    """A 24-hour time axis with about one label per ``LABEL_SPACING`` pixels."""
    return alt.Axis(
        format=TIME_FORMAT,
        title=title,
        tickCount=max(3, width // LABEL_SPACING),
        labelOverlap=True,
        labelSeparation=8,
    )


def time_domain(frame: pl.DataFrame, column: str = "t", pad_ms: int = 0) -> list[int] | None:
    """``[first, last + pad_ms]`` of an epoch-ms column: one x range for stacked views."""
    if column not in frame.columns or not frame.height:
        return None
    values = frame[column].drop_nulls()
    if not values.len():
        return None
    return [int(values.min()), int(values.max()) + int(pad_ms)]


def time_x(
    width: int,
    title: str | None = "time (log clock)",
    *,
    field: str = "t",
    domain: Sequence[int] | None = None,
    zoom: alt.Parameter | None = None,
) -> alt.X:
    """An x channel of epoch-ms time on the UTC scale: 24-hour labels, an explicit ``domain``
    when views are stacked, and ``zoom`` (an interval selection) narrowing it when set."""
    scale: dict[str, object] = {"type": "utc"}
    if domain is not None:
        scale["domain"] = list(domain)
    if zoom is not None:
        if domain is None:
            scale["domain"] = zoom
        else:  # the brush's extent when there is one, else the shared domain
            scale["domainRaw"] = alt.ExprRef(f"{zoom.name}.{field}")
    return alt.X(f"{field}:T", scale=alt.Scale(**scale), axis=time_axis(width, title))


def time_tooltip(field: str = "t") -> alt.Tooltip:
    return alt.Tooltip(f"{field}:T", timeUnit="utcyearmonthdatehoursminutesseconds", title="time")


def elapsed_x(width: int = WIDTH) -> alt.X:
    """Time since each run's start (``t`` in ms from its first line), in minutes, with about
    one label per ``LABEL_SPACING`` pixels."""
    return alt.X(
        "minutes:Q",
        axis=alt.Axis(
            title="minutes since the run's first decode line",
            tickCount=max(3, width // LABEL_SPACING),
        ),
    )


def count_axis(title: str) -> alt.Axis:
    """An axis of whole counts: integer ticks only."""
    return alt.Axis(title=title, format="d", tickMinStep=1)


def labels_of(frame: pl.DataFrame, column: str = "label") -> list[str]:
    return [x for x in frame[column].unique(maintain_order=True).to_list() if x is not None]


def phase_marks(phases: pl.DataFrame | None, x: alt.X, field: str = "t") -> list[alt.Chart]:
    """A dotted rule where each benchmark phase starts, labelled by the concurrency it offered.

    ``phases`` has ``field`` (epoch ms of the phase's first decode line) and ``label``
    (``c=8``); the layers carry their own small dataset and use the chart's ``x``.
    """
    if phases is None or not phases.height:
        return []
    data = data_of(phases.select(field, "label"))
    rule = alt.Chart(data).mark_rule(color=MUTED, strokeDash=[2, 3], opacity=0.7).encode(x=x)
    text = (
        alt.Chart(data)
        .mark_text(align="left", baseline="top", dx=3, dy=2, color=MUTED, fontSize=11)
        .encode(x=x, y=alt.value(0), text="label:N")
    )
    return [rule, text]
