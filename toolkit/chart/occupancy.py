"""Occupancy: requests offered and running against the one slot ``#running-req`` shows.

Under PP the logged ``#running-req`` is one micro-batch slot. ``#token`` divided by the mean
context gives the requests really running; divided again by the slot size it gives the slots
that hold them. The lower panel puts that against the stage count (every stage needs one) and
the slot count (``pp_size + pp_async_batch_depth``).
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import count_axis, phase_marks, time_domain, time_x
from toolkit.chart.theme import MUTED, PALETTE, WIDTH

__all__ = ["occupancy_chart"]

_SERIES = {
    "offered": "offered (benchmark)",
    "running_est": "running (from #token)",
    "running_req": "#running-req (one slot)",
}


def occupancy_chart(
    occupancy: pl.DataFrame,
    phases: pl.DataFrame | None = None,
    headline: str | None = None,
) -> alt.VConcatChart:
    """Requests over time, and active slots against stages (``occupancy.slot_occupancy``).

    ``phases`` (``t`` epoch ms, ``label`` such as ``c=8``) marks where each benchmark phase
    starts. Both panels share one time range. ``headline`` is the title's sentence
    (``analyze.occupancy.peak_headline``: the busiest phase's figures, as its table states
    them); without one the title names what the panels compare.
    """
    base = occupancy.with_columns(t_ms=pl.col("ts").dt.epoch("ms"))
    domain = time_domain(base, "t_ms")
    long = (
        base.select("t_ms", *(pl.col(c).cast(pl.Float64) for c in _SERIES))
        .unpivot(index="t_ms", variable_name="series", value_name="requests")
        .filter(pl.col("requests").is_not_null())
        .with_columns(pl.col("series").replace_strict(_SERIES))
    )
    x = time_x(WIDTH, field="t_ms", domain=domain)
    marks = phase_marks(
        phases.rename({"t": "t_ms"}) if phases is not None else None, x, field="t_ms"
    )
    names = list(_SERIES.values())
    requests = (
        alt.Chart(long)
        .mark_line(interpolate="step-after")
        .encode(
            x=x,
            y=alt.Y("requests:Q", axis=count_axis("requests")),
            color=alt.Color(
                "series:N", scale=alt.Scale(domain=names, range=list(PALETTE[:3])), title=None
            ),
            strokeDash=alt.condition(
                alt.datum.series == _SERIES["offered"], alt.value([5, 4]), alt.value([1, 0])
            ),
            tooltip=["series:N", alt.Tooltip("requests:Q", format=".1f")],
        )
    )
    upper = alt.layer(requests, *marks).properties(
        width=WIDTH, height=200, title=_title(headline, bool(marks))
    )
    slots = base.select("t_ms", "active_slots_est").filter(pl.col("active_slots_est").is_not_null())
    active = (
        alt.Chart(slots)
        .mark_line(point=alt.OverlayMarkDef(color=PALETTE[3]), color=PALETTE[3])
        .encode(
            x=x,
            y=alt.Y("active_slots_est:Q", axis=count_axis("active slots")),
            tooltip=[alt.Tooltip("active_slots_est:Q", format=".1f", title="active slots")],
        )
    )
    refs = _references(occupancy)
    layers: list[alt.Chart] = [active]
    if refs.height:
        layers.append(
            alt.Chart(refs)
            .mark_rule(color=MUTED, strokeDash=[3, 3])
            .encode(y="value:Q", tooltip=["name:N", "value:Q"])
        )
        layers.append(
            alt.Chart(refs)
            .mark_text(align="left", dx=4, dy=-6, color=MUTED)
            .encode(y="value:Q", text="name:N", x=alt.value(0))
        )
    lower = alt.layer(*layers).properties(width=WIDTH, height=140)
    return alt.vconcat(upper, lower).resolve_scale(x="shared")


def _references(occupancy: pl.DataFrame) -> pl.DataFrame:
    """The stage count (every stage needs a slot) and the slot count, as horizontal rules."""
    if not occupancy.height:
        return pl.DataFrame(schema={"name": pl.String, "value": pl.Int64})
    stages, slots = occupancy["stages"].max(), occupancy["slots"].max()
    rows = [("stages", stages)]
    if slots is not None and slots != stages:
        rows.append(("slots", slots))
    return pl.DataFrame(rows, schema={"name": pl.String, "value": pl.Int64}, orient="row")


def _title(headline: str | None, phases: bool = False) -> alt.TitleParams:
    sub = "dashed: what the benchmark offered" + (
        "; dotted: a phase starts, at its concurrency" if phases else ""
    )
    text = headline or "Requests running vs the one slot #running-req shows"
    return alt.TitleParams(text, subtitle=sub)
