"""Scaling views: throughput, efficiency and latency against concurrency, and the frontier.

Each function takes a frame of ``toolkit.analyze.scaling`` and returns an altair chart whose
title states what the data shows. Concurrency is on a log2 axis (doublings equally spaced);
each layer gets only the columns it encodes.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import labels_of
from toolkit.chart.theme import MUTED, WIDTH, color_scale, log2_scale

__all__ = ["efficiency_chart", "frontier_chart", "latency_chart", "throughput_chart"]

_LATENCY_NAMES = {
    "ttft_median_ms": "median TTFT",
    "tpot_median_ms": "median TPOT",
    "itl_median_ms": "median ITL",
    "e2e_median_ms": "median E2E latency",
}


def _concurrency_x(frame: pl.DataFrame, title: str = "concurrent requests") -> alt.X:
    ticks = sorted({int(c) for c in frame["concurrency"].drop_nulls().to_list()})
    return alt.X(
        "concurrency:Q",
        scale=log2_scale(),
        axis=alt.Axis(values=ticks, format="d", title=title),
    )


def _color(frame: pl.DataFrame) -> alt.Color:
    return alt.Color("label:N", scale=color_scale(labels_of(frame)), title="layout")


def throughput_chart(
    table: pl.DataFrame, gap: pl.DataFrame | None = None, verdict: str | None = None
) -> alt.LayerChart:
    """Output tok/s against concurrency, one line per layout, with ideal-linear references.

    Parameters
    ----------
    table
        A ``scaling_table``. Its ``ideal_tok_s`` (linear from each layout's lowest point) is
        drawn dashed; interpolated points are hollow.
    gap
        Optional ``scaling_gap``: at each of its concurrencies a bar joins the two layouts and
        a note gives the leader's advantage.
    verdict
        The title: the sentence every headline states (``analyze.headline.gap_verdict``, its
        caveat inside); without one the title names the best point.
    """
    color = _color(table)
    x = _concurrency_x(table)
    # Linear references soon dwarf the measurements; the axis stops at 1.5× the best point and
    # the dashed lines are clipped there, so the measured lines stay readable.
    top = table["output_tok_s"].max()
    scale = alt.Scale(domain=[0, 1.5 * top]) if isinstance(top, int | float) and top > 0 else None
    y = alt.Y("output_tok_s:Q", title="output tokens/s", scale=scale or alt.Undefined)
    measured = table.select("label", "concurrency", "output_tok_s", "n_runs", "interpolated")
    lines = alt.Chart(measured).mark_line().encode(x=x, y=y, color=color)
    points = (
        alt.Chart(measured)
        .mark_point(filled=True)
        .encode(
            x=x,
            y=y,
            color=color,
            fillOpacity=alt.condition("datum.interpolated", alt.value(0), alt.value(1)),
            tooltip=[
                alt.Tooltip("label:N", title="layout"),
                alt.Tooltip("concurrency:Q", title="concurrency"),
                alt.Tooltip("output_tok_s:Q", title="tok/s", format=".1f"),
                alt.Tooltip("n_runs:Q", title="runs"),
            ],
        )
    )
    ideal = (
        alt.Chart(table.select("label", "concurrency", "ideal_tok_s"))
        .mark_line(strokeDash=[5, 4], strokeWidth=1.5, opacity=0.7, clip=True)
        .encode(x=x, y=alt.Y("ideal_tok_s:Q"), color=color)
    )
    layers: list[alt.Chart] = [ideal, lines, points]
    if gap is not None and gap.height:
        led = gap.filter(pl.col("leader").is_not_null() & pl.col("advantage").is_not_null())
        notes = led.select(
            "concurrency",
            pl.min_horizontal("a_tok_s", "b_tok_s").alias("low_tok_s"),
            pl.max_horizontal("a_tok_s", "b_tok_s").alias("high_tok_s"),
            pl.Series(
                "note", [f"{r['advantage']:.2f}× {r['leader']}" for r in led.iter_rows(named=True)]
            ),
        )
        bars = (
            alt.Chart(notes)
            .mark_rule(color=MUTED, strokeWidth=1)
            .encode(x=x, y="low_tok_s:Q", y2="high_tok_s:Q")
        )
        text = (
            alt.Chart(notes)
            .mark_text(align="left", dx=6, dy=-8, color=MUTED, fontWeight=600)
            .encode(x=x, y="high_tok_s:Q", text="note:N")
        )
        layers += [bars, text]
    return alt.layer(*layers).properties(width=WIDTH, title=_throughput_title(table, verdict))


def _throughput_title(table: pl.DataFrame, verdict: str | None) -> alt.TitleParams:
    subtitle = "dashed: linear scaling from each layout's lowest concurrency"
    if verdict:
        return alt.TitleParams(text=verdict, subtitle=subtitle)
    best = table.sort("output_tok_s", descending=True, nulls_last=True)
    if not best.height:
        return alt.TitleParams(text="No throughput data", subtitle=subtitle)
    top = best.row(0, named=True)
    return alt.TitleParams(
        text=f"{top['label']} peaks at {top['output_tok_s']:.0f} tok/s "
        f"at {top['concurrency']} concurrent requests",
        subtitle=subtitle,
    )


def efficiency_chart(table: pl.DataFrame, threshold: float = 0.5) -> alt.LayerChart:
    """Scaling efficiency ``tok_s(c) / (c · tok_s(1))`` against concurrency, per layout.

    A dashed rule marks ``threshold`` (the knee of ``knee``); 1 is linear scaling.
    """
    color = _color(table)
    x = _concurrency_x(table)
    data = table.select("label", "concurrency", "efficiency")
    y = alt.Y("efficiency:Q", title="scaling efficiency (1 = linear)", axis=alt.Axis(format="%"))
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=color,
            tooltip=[
                alt.Tooltip("label:N", title="layout"),
                alt.Tooltip("concurrency:Q"),
                alt.Tooltip("efficiency:Q", format=".0%"),
            ],
        )
    )
    rule = (
        alt.Chart(pl.DataFrame({"threshold": [threshold]}))
        .mark_rule(strokeDash=[4, 4], color=MUTED)
        .encode(y="threshold:Q")
    )
    return alt.layer(rule, lines).properties(width=WIDTH, title=_efficiency_title(table, threshold))


def _efficiency_title(table: pl.DataFrame, threshold: float) -> alt.TitleParams:
    subtitle = f"dashed: {threshold:.0%} of linear, the knee threshold"
    last = (
        table.filter(pl.col("efficiency").is_not_null())
        .sort("concurrency")
        .group_by("label", maintain_order=True)
        .last()
    )
    if not last.height:
        return alt.TitleParams(text="No efficiency data", subtitle=subtitle)
    parts = [
        f"{r['label']} {r['efficiency']:.0%} at {r['concurrency']}"
        for r in last.iter_rows(named=True)
    ]
    return alt.TitleParams(
        text="Share of linear scaling kept: " + ", ".join(parts), subtitle=subtitle
    )


def latency_chart(table: pl.DataFrame, metric: str = "tpot_median_ms") -> alt.Chart:
    """One latency column of a ``scaling_table`` (TPOT, TTFT, ITL, E2E) against concurrency."""
    if metric not in _LATENCY_NAMES:
        raise ValueError(f"metric must be one of {', '.join(_LATENCY_NAMES)}, not {metric!r}")
    name = _LATENCY_NAMES[metric]
    data = table.select("label", "concurrency", metric).filter(pl.col(metric).is_not_null())
    last = data.sort("concurrency").group_by("label", maintain_order=True).last()
    parts = [
        f"{r['label']} {r[metric]:.0f} ms at {r['concurrency']}" for r in last.iter_rows(named=True)
    ]
    title = (
        f"{name[0].upper()}{name[1:]}: " + ", ".join(parts)
        if parts
        else f"No {name} in these results"
    )
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=_concurrency_x(table),
            y=alt.Y(f"{metric}:Q", title=f"{name}, ms"),
            color=_color(table),
            tooltip=[
                alt.Tooltip("label:N", title="layout"),
                alt.Tooltip("concurrency:Q"),
                alt.Tooltip(f"{metric}:Q", format=".1f"),
            ],
        )
        .properties(
            width=WIDTH, title=alt.TitleParams(text=title, subtitle="median over repeated runs")
        )
    )


def frontier_chart(points: pl.DataFrame) -> alt.LayerChart:
    """Throughput against per-token latency (a ``frontier`` frame), one path per layout.

    Points are labelled with their concurrency; Pareto-optimal ones are drawn larger.
    """
    color = _color(points)
    data = points.select("label", "concurrency", "output_tok_s", "latency_ms", "pareto")
    x = alt.X("latency_ms:Q", title="per-token latency (TPOT), ms")
    y = alt.Y("output_tok_s:Q", title="output tokens/s")
    path = (
        alt.Chart(data).mark_line(opacity=0.8).encode(x=x, y=y, color=color, order="concurrency:Q")
    )
    dots = (
        alt.Chart(data)
        .mark_point(filled=True)
        .encode(
            x=x,
            y=y,
            color=color,
            size=alt.condition("datum.pareto", alt.value(160), alt.value(50)),
            tooltip=[
                alt.Tooltip("label:N", title="layout"),
                alt.Tooltip("concurrency:Q"),
                alt.Tooltip("output_tok_s:Q", format=".1f"),
                alt.Tooltip("latency_ms:Q", format=".1f"),
            ],
        )
    )
    text = (
        alt.Chart(data)
        .mark_text(dx=8, dy=-6, align="left", color=MUTED)
        .encode(x=x, y=y, text=alt.Text("concurrency:Q", format="d"))
    )
    return alt.layer(path, dots, text).properties(width=WIDTH, title=_frontier_title(points))


def _frontier_title(points: pl.DataFrame) -> alt.TitleParams:
    subtitle = "large points: no other point has both lower latency and higher throughput"
    best = points.filter(pl.col("pareto"))
    if not best.height:
        return alt.TitleParams(text="No latency data for a frontier", subtitle=subtitle)
    counts = best.group_by("label", maintain_order=True).len().sort("len", descending=True)
    top = counts.row(0, named=True)
    return alt.TitleParams(
        text=f"{top['label']} holds {top['len']} of the {best.height} best "
        "latency-throughput trade-offs",
        subtitle=subtitle,
    )
