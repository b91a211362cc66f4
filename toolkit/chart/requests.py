"""Server-side time to first token split into queueing and prefill, per phase; and each
request's arrival, queue end, first token and end."""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import data_of
from toolkit.chart.theme import MUTED, WIDTH

__all__ = ["request_timeline_chart", "ttft_split_chart"]

_PARTS = ["queue", "prefill"]
_PART_COLORS = ["#d95f02", "#1b9e77"]


def ttft_split_chart(frame: pl.DataFrame) -> alt.Chart:
    """Median TTFT of each phase as a stacked bar: waiting queue, then the rest (prefill).

    ``frame`` has ``phase`` (text, in the order to show), ``part`` (``queue`` or
    ``prefill``) and ``ms``.
    """
    order = frame["phase"].unique(maintain_order=True).to_list()
    return (
        alt.Chart(data_of(frame.select("phase", "part", "ms")))
        .mark_bar()
        .encode(
            x=alt.X("phase:N", sort=order, title="phase (concurrency offered)"),
            y=alt.Y("ms:Q", stack="zero", title="median server-side TTFT, ms"),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=_PARTS, range=_PART_COLORS),
                sort=_PARTS,
                title="part of TTFT",
            ),
            order=alt.Order("part_order:Q"),
            tooltip=["phase:N", "part:N", alt.Tooltip("ms:Q", format=".1f")],
        )
        .transform_calculate(part_order="datum.part == 'queue' ? 0 : 1")
        .properties(
            width=WIDTH,
            title=alt.TitleParams(
                "Where the time to first token goes",
                subtitle="queue: waiting to be scheduled; prefill: the rest up to the first token",
                subtitleColor=MUTED,
            ),
        )
    )


def request_timeline_chart(frame: pl.DataFrame) -> alt.Chart:
    """One horizontal line per request: queueing (arrival to queue end), prefill (to the
    first token) and decode (to the end), or forward (queue end to the end) where no first
    token time is known, against minutes since the first arrival.

    ``frame`` has ``row`` (request order), ``part``, ``t0`` and ``t1`` (ms since the first
    arrival).
    """
    data = data_of(frame.select("row", "part", "t0", "t1"))
    return (
        alt.Chart(data)
        .transform_calculate(m0="datum.t0 / 60000", m1="datum.t1 / 60000")
        .mark_rule(strokeWidth=2)
        .encode(
            x=alt.X("m0:Q", title="minutes since the first arrival"),
            x2="m1:Q",
            y=alt.Y("row:O", axis=None, title="requests in arrival order"),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=[*_PARTS, "decode"], range=[*_PART_COLORS, "#7570b3"]),
                title="phase of the request",
            ),
        )
        .properties(width=WIDTH, title="Each request on the server")
    )
