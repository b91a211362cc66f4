"""One loop iteration of every pipeline stage, part by part, as the profiler traces measure it."""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import data_of
from toolkit.chart.theme import MUTED, WIDTH

__all__ = ["PART_COLORS", "stage_round_chart"]

PART_COLORS: dict[str, str] = {
    "receive wait": "#bdbdbd",
    "CPU loop": "#d95f02",
    "kernels": "#1b9e77",
    "transfer": "#7570b3",
    "SendRecv wait": "#e7298a",
    "outside the loop": "#e6ab02",
}


def stage_round_chart(frame: pl.DataFrame) -> alt.Chart:
    """A waterfall per load: one bar per stage, its iteration's parts end to end.

    ``frame`` has ``load`` (text, in the order to show), ``pp``, ``part``, ``start_ms`` and
    ``end_ms`` (``analyze.stage_account.round_waterfall``).
    """
    loads = frame["load"].unique(maintain_order=True).to_list()
    parts = list(PART_COLORS)
    return (
        alt.Chart(data_of(frame.select("load", "pp", "part", "start_ms", "end_ms")))
        .mark_bar()
        .encode(
            x=alt.X("start_ms:Q", title="ms into a loop iteration (mean over the profile)"),
            x2="end_ms:Q",
            y=alt.Y("pp:O", title="stage"),
            color=alt.Color(
                "part:N",
                scale=alt.Scale(domain=parts, range=list(PART_COLORS.values())),
                title="where the time goes",
            ),
            row=alt.Row("load:N", sort=loads, title=None),
            tooltip=[
                "load:N",
                "pp:O",
                "part:N",
                alt.Tooltip("start_ms:Q", format=".2f"),
                alt.Tooltip("end_ms:Q", format=".2f"),
            ],
        )
        .properties(
            width=WIDTH,
            title=alt.TitleParams(
                "Where each stage's loop iteration goes",
                subtitle="kernels and transfers do the work; the rest is waiting or the CPU",
                subtitleColor=MUTED,
            ),
        )
    )
