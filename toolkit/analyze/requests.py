"""Where a request's time goes on the server: queueing, prefill and decode, per phase.

The server's request records (``schema.requests.SERVER_REQUESTS``) may state one request
several times: an export record, a ``Finish:`` line and a ``ReqTimeStats`` line of every PP
stage. ``merged_requests`` keeps one row per request id, each field from the most complete
record that states it (export, then JSON event, then ``Finish:``, then the time-stats line of
the lowest PP rank, whose queue is the admission queue of the pipeline).
"""

from __future__ import annotations

import polars as pl

from toolkit.schema.requests import (
    REQUEST_BREAKDOWN,
    REQUEST_TIMELINE,
    SERVER_REQUEST_COLUMNS,
    SERVER_REQUESTS,
)

__all__ = [
    "PHASE_SLACK_S",
    "merged_requests",
    "request_breakdown",
    "request_timeline",
    "requests_of_phases",
]

PHASE_SLACK_S = 5.0
"""A request that arrived this long before its phase's first decode line still belongs to it
(its prefill precedes the decoding the phase is made of)."""
_PRIORITY = {"export": 0, "log-json": 1, "finish": 2, "time-stats": 3}


def merged_requests(requests: pl.DataFrame) -> pl.DataFrame:
    """One row per request id (rows without an id stay as they are): ``SERVER_REQUESTS``."""
    if not requests.height:
        return pl.DataFrame(schema=SERVER_REQUESTS)
    ranked = requests.with_columns(
        _rank=pl.col("form").replace_strict(_PRIORITY, default=9, return_dtype=pl.Int32),
    ).sort("_rank", "pp", "source", "lineno", nulls_last=True)
    named = ranked.filter(pl.col("rid").is_not_null())
    keep = [c.name for c in SERVER_REQUEST_COLUMNS if c.name != "rid"]
    merged = named.group_by("rid", maintain_order=True).agg(
        pl.col(c).drop_nulls().first() for c in keep
    )
    out = pl.concat([merged.select(SERVER_REQUESTS.names()), ranked.filter(pl.col("rid").is_null())
                     .select(SERVER_REQUESTS.names())])  # fmt: skip
    return out.cast(dict(SERVER_REQUESTS)).sort("ts", "source", "lineno", nulls_last=True)


def requests_of_phases(
    requests: pl.DataFrame, phases: pl.DataFrame | None, launches: pl.DataFrame | None
) -> pl.DataFrame:
    """``requests`` without the rows of log launches whose span overlaps none of ``phases``.

    ``requests`` carry ``launch`` (``Run.server_requests``); ``launches`` is
    ``assembly.LAUNCH_SPANS`` (dump to last batch line). A restart with other flags is
    another configuration: its requests are not the phases'. Rows of no launch (files of
    their own, lines before a file's first dump), launches with no time and every row when
    there are no phases or no spans are kept.
    """
    if (
        "launch" not in requests.columns
        or launches is None
        or not launches.height
        or phases is None
        or not phases.height
    ):
        return requests
    _us = pl.Datetime("us")
    windows = phases.select(
        pl.col("start").cast(_us).alias("_ps"), pl.col("end").cast(_us).alias("_pe")
    ).drop_nulls()
    spans = launches.select(
        "launch",
        pl.coalesce("start", "end").cast(_us).alias("_ls"),
        pl.coalesce("end", "start").cast(_us).alias("_le"),
    )
    untimed = spans.filter(pl.col("_ls").is_null())["launch"].to_list()
    meets = (pl.col("_ps") <= pl.col("_le")) & (pl.col("_pe") >= pl.col("_ls"))
    overlapping = spans.drop_nulls().join(windows, how="cross").filter(meets)["launch"]
    keep = sorted({*overlapping.to_list(), *untimed})
    return requests.filter(pl.col("launch").is_null() | pl.col("launch").is_in(keep))


def _with_phase(requests: pl.DataFrame, phases: pl.DataFrame | None) -> pl.DataFrame:
    if phases is None or not phases.height or not requests.height:
        return requests.with_columns(
            phase=pl.lit(None, pl.Int64), concurrency=pl.lit(None, pl.Int64)
        )
    start, end = pl.col("start").cast(pl.Datetime("us")), pl.col("end").cast(pl.Datetime("us"))
    offered = pl.col("offered") if "offered" in phases.columns else pl.lit(None)
    marks = (
        phases.sort("start")
        .select(
            pl.col("phase").cast(pl.Int64),
            # the slack never reaches back into the previous phase
            pl.max_horizontal(start - pl.duration(seconds=PHASE_SLACK_S), end.shift(1)).alias(
                "_from"
            ),
            end.alias("_to"),
            offered.cast(pl.Int64).alias("concurrency"),
        )
        .sort("_from")
    )
    dated = requests.with_row_index("_row")
    placed = (
        dated.filter(pl.col("ts").is_not_null())
        .sort("ts")
        .join_asof(marks, left_on="ts", right_on="_from", strategy="backward")
        .with_columns(
            pl.when(pl.col("ts") <= pl.col("_to")).then(pl.col(c)).alias(c)
            for c in ("phase", "concurrency")
        )
        .select("_row", "phase", "concurrency")
    )
    return dated.join(placed, on="_row", how="left", maintain_order="left").drop("_row")


def request_breakdown(
    requests: pl.DataFrame,
    phases: pl.DataFrame | None = None,
    *,
    launches: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per phase: server-side TTFT split into queueing and the rest (prefill), decode time per
    output token, and the share of end-to-end time spent queueing (``REQUEST_BREAKDOWN``).

    ``requests``: ``SERVER_REQUESTS`` rows (merged per request id here); ``phases``: a frame
    with ``phase``, ``start``, ``end`` and optionally ``offered`` (``analyze.phases``); a
    request belongs to the phase it arrived in. Without phases, one row covers every request.
    With ``launches`` (``LAUNCH_SPANS``) only the launches the phases overlap count
    (``requests_of_phases``).
    """
    requests = requests_of_phases(requests, phases, launches)
    rows = _with_phase(merged_requests(requests), phases)
    if not rows.height:
        return pl.DataFrame(schema=REQUEST_BREAKDOWN)
    per_token = pl.when(pl.col("output_len") > 1).then(
        pl.col("decode_ms") / (pl.col("output_len") - 1)
    )
    e2e = pl.coalesce("e2e_ms", pl.col("queue_ms") + pl.col("forward_ms"))
    both = pl.col("queue_ms").is_not_null() & e2e.is_not_null()
    table = (
        rows.group_by("phase", maintain_order=True)
        .agg(
            pl.col("concurrency").drop_nulls().first(),
            pl.len().alias("requests"),
            pl.col("ttft_ms").count().alias("with_ttft"),
            *(
                expr
                for name in ("ttft", "queue", "prefill")
                for expr in (
                    pl.col(f"{name}_ms").median().alias(f"{name}_median_ms"),
                    pl.col(f"{name}_ms").quantile(0.9, "linear").alias(f"{name}_p90_ms"),
                )
            ),
            per_token.median().alias("decode_per_token_ms"),
            pl.when(e2e.filter(both).sum() > 0)
            .then(pl.col("queue_ms").filter(both).sum() / e2e.filter(both).sum())
            .alias("queue_share"),
            pl.col("ok").not_().sum().alias("aborted"),
        )
        .sort("phase", nulls_last=True)
    )
    return table.select(REQUEST_BREAKDOWN.names()).cast(dict(REQUEST_BREAKDOWN))


def request_timeline(
    requests: pl.DataFrame,
    phases: pl.DataFrame | None = None,
    *,
    max_points: int = 20_000,
    launches: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per request with its arrival, queue end, first token and end, for a chart
    (``REQUEST_TIMELINE``); evenly thinned to ``max_points`` rows. Requests without an
    arrival time, and with ``launches`` those of launches the phases do not overlap
    (``requests_of_phases``), are left out."""
    requests = requests_of_phases(requests, phases, launches)
    rows = _with_phase(merged_requests(requests), phases).filter(pl.col("ts").is_not_null())
    step = max(1, -(-rows.height // max(max_points, 1)))
    rows = rows.gather_every(step)
    queue = pl.duration(microseconds=(pl.col("queue_ms") * 1e3).round().cast(pl.Int64))
    out = rows.select(
        "rid",
        "phase",
        pl.col("ts").alias("start"),
        (pl.col("ts") + queue).alias("queue_end"),
        pl.col("first_token_ts").alias("first_token"),
        pl.col("end_ts").alias("end"),
    )
    return out.cast(dict(REQUEST_TIMELINE))
