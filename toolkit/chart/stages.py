"""Stage timeline: one swimlane per PP stage with its batch lines, GPU busy underneath.

Each tick is one ``Decode batch`` (a window of 40 micro-batch steps) or ``Prefill batch`` line
of a stage, on the log's clock. Lock-step ticks across the lanes are how SGLang PP logs (every
stage prints the same micro-batch); the heat strip below shows each stage's GPU busy %.
Time is sent as epoch milliseconds.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.theme import MUTED, PALETTE

__all__ = ["stage_timeline_chart"]

MAX_MARKS = 20_000


def _lane(df: pl.DataFrame) -> pl.Expr:
    multi_dp = df["dp"].n_unique() > 1 if df.height else False
    pp = pl.lit("PP") + pl.col("pp").cast(pl.String)
    return (pl.lit("DP") + pl.col("dp").cast(pl.String) + pl.lit(" ") + pp) if multi_dp else pp


def stage_timeline_chart(
    timeline: pl.DataFrame, gpu: pl.DataFrame | None = None
) -> alt.VConcatChart | alt.Chart:
    """Swimlanes per stage (``stages.stage_timeline``), with ``timeline.stage_gpu_series``
    below as a heat strip per stage when given.

    Parameters
    ----------
    timeline
        ``stage_timeline`` of one launch; at most ~20k lines are drawn (every n-th ordinal).
    gpu
        ``stage_gpu_series``: ``ts``, ``gpu``, ``pp``, ``busy_pct``.
    """
    df = timeline
    if df.height > MAX_MARKS:
        step = -(-df.height // MAX_MARKS)
        df = df.filter(pl.col("ordinal") % step == 0)
    lanes = df.select(
        pl.col("ts").dt.epoch("ms").alias("t_ms"),
        _lane(df).alias("stage"),
        "pp",
        "kind",
        "running_req",
        "token",
        "gen_tok_s",
    )
    order = lanes.sort("pp")["stage"].unique(maintain_order=True).to_list()
    x = alt.X("t_ms:T", title="time (log clock)")
    stages = lanes["pp"].n_unique() if lanes.height else 0
    ticks = (
        alt.Chart(lanes.drop("pp"))
        .mark_tick(thickness=2, size=14)
        .encode(
            x=x,
            y=alt.Y("stage:N", sort=order, title=None),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=["decode", "prefill"], range=[PALETTE[0], PALETTE[1]]),
                title="line",
            ),
            tooltip=[
                alt.Tooltip("stage:N"),
                alt.Tooltip("kind:N"),
                alt.Tooltip("t_ms:T", format="%H:%M:%S", title="time"),
                alt.Tooltip("running_req:Q", title="#running-req (one slot)"),
                alt.Tooltip("token:Q", title="#token"),
                alt.Tooltip("gen_tok_s:Q", title="gen tok/s", format=".1f"),
            ],
        )
        .properties(
            height=max(60, 22 * len(order)),
            title=alt.TitleParams(
                f"{stages} stage(s) on one clock: each tick is a batch line",
                subtitle="ticks lined up across lanes are normal: every PP stage logs the same "
                "micro-batch",
            ),
        )
    )
    if gpu is None or not gpu.height:
        return ticks
    strip = _gpu_strip(gpu, order, x)
    return alt.vconcat(ticks, strip).resolve_scale(x="shared", color="independent")


def _gpu_strip(gpu: pl.DataFrame, order: list[str], x: alt.X) -> alt.Chart:
    series = gpu.filter(pl.col("ts").is_not_null()).sort("gpu", "ts")
    step = (
        series.select(pl.col("ts").diff().over("gpu").dt.total_milliseconds().min()).item() or 1000
    )
    known = series["pp"].null_count() < series.height
    label = (
        pl.lit("PP") + pl.col("pp").cast(pl.String)
        if known
        else pl.lit("GPU ") + pl.col("gpu").cast(pl.String)
    )
    # GPUs of one stage (TP ranks) are averaged: the lane is the stage.
    cells = (
        series.with_columns(stage=label, t_ms=pl.col("ts").dt.epoch("ms"))
        .group_by("stage", "t_ms")
        .agg(pl.col("busy_pct").mean())
        .with_columns(t_end_ms=pl.col("t_ms") + step)
        .sort("stage", "t_ms")
    )
    lanes = order if known else sorted(cells["stage"].unique().to_list())
    return (
        alt.Chart(cells)
        .mark_rect()
        .encode(
            x=x,
            x2="t_end_ms:T",
            y=alt.Y("stage:N", sort=lanes, title=None),
            color=alt.Color(
                "busy_pct:Q",
                scale=alt.Scale(domain=[0, 100], scheme="greys"),
                title="GPU busy %",
            ),
            tooltip=[
                alt.Tooltip("stage:N"),
                alt.Tooltip("t_ms:T", format="%H:%M:%S", title="time"),
                alt.Tooltip("busy_pct:Q", format=".0f", title="busy %"),
            ],
        )
        .properties(
            height=max(60, 22 * len(lanes)),
            title=alt.TitleParams(
                "GPU busy per stage", subtitle="darker = busier", subtitleColor=MUTED
            ),
        )
    )
