"""Where each run's requests spend their time on the server: queueing, prefill, decode."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.analyze.requests import request_breakdown, request_timeline, requests_of_phases
from toolkit.chart.requests import request_timeline_chart, ttft_split_chart
from toolkit.errors import ToolkitError
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import MAX_POINTS, titled
from toolkit.report.view import View, note

__all__ = ["request_split"]

_HOW = (
    "No server-side request records in these runs. Start the server with "
    "--export-metrics-to-file (and --enable-metrics for time stamps), "
    "--enable-request-time-stats-logging or --log-requests to record them."
)


def request_split(runs: RunSet, max_points: int = MAX_POINTS) -> View:
    """Per run and phase: server-side TTFT split into queueing and prefill, decode time per
    output token and the share of time spent queueing (``analyze.requests``); the
    per-request timeline of the first run that states arrival times."""
    items: list[Any] = []
    records = []
    timeline_drawn = False
    for run, label in zip(runs, runs.labels, strict=True):
        table = run.server_requests
        if table is None:
            continue
        try:
            phases = runs.analysis(run).phases
        except ToolkitError:
            phases = None
        kept = requests_of_phases(table, phases, run.launch_spans)
        if kept.height < table.height:
            gone = table.join(kept.select("source", "lineno"), on=["source", "lineno"], how="anti")
            items.append(
                note(
                    f"{label}: {gone['rid'].n_unique()} request(s) ({gone.height} record(s)) of "
                    "another server start in the log (a restart) are left out: their launch "
                    "overlaps none of the phases analysed."
                )
            )
        table = kept
        split = request_breakdown(table, phases)
        records.append({"run": label, "phases": split})
        bars = _bars(split)
        if bars.height:
            items.append(titled(ttft_split_chart(bars), label))
        else:
            items.append(
                note(
                    f"{label}: the records state no arrival and first-token times together, so "
                    "the time to first token cannot be split; the table gives what they state."
                )
            )
        items.append(split)
        if not timeline_drawn:
            lines = _timeline(request_timeline(table, phases, max_points=max_points // 3))
            if lines.height:
                items.append(titled(request_timeline_chart(lines), label))
                timeline_drawn = True
    if not records:
        items.append(note(_HOW))
    return View("requests", items, {"requests": records})


def _bars(split: pl.DataFrame) -> pl.DataFrame:
    name = (
        pl.when(pl.col("concurrency").is_not_null())
        .then(pl.format("{} (c={})", pl.col("phase"), pl.col("concurrency")))
        .otherwise(pl.col("phase").cast(pl.String).fill_null("outside phases"))
    )
    # a bar is the TTFT: drawn only where both of its parts are stated
    both = pl.col("queue_median_ms").is_not_null() & pl.col("prefill_median_ms").is_not_null()
    rows = split.filter(both).with_columns(phase=name)
    return (
        rows.select(
            "phase",
            pl.lit("queue").alias("part"),
            pl.col("queue_median_ms").alias("ms"),
        )
        .vstack(
            rows.select(
                "phase",
                pl.lit("prefill").alias("part"),
                pl.col("prefill_median_ms").alias("ms"),
            )
        )
        .filter(pl.col("ms").is_not_null())
    )


def _timeline(frame: pl.DataFrame) -> pl.DataFrame:
    if not frame.height:
        return pl.DataFrame(schema={"row": pl.Int64, "part": pl.String, "t0": pl.Float64,
                                    "t1": pl.Float64})  # fmt: skip
    first = frame["start"].min()
    rows = frame.sort("start").with_row_index("row").with_columns(pl.col("row").cast(pl.Int64))

    def ms(col: str) -> pl.Expr:
        return (pl.col(col) - pl.lit(first)).dt.total_microseconds() / 1e3

    # without a first-token time (ReqTimeStats), the forward part is drawn whole
    rows = rows.with_columns(
        _forward_end=pl.when(pl.col("first_token").is_null()).then(pl.col("end"))
    )
    parts = [
        ("queue", "start", "queue_end"),
        ("prefill", "queue_end", "first_token"),
        ("decode", "first_token", "end"),
        ("forward", "queue_end", "_forward_end"),
    ]
    out = pl.concat(
        rows.select("row", pl.lit(p).alias("part"), ms(a).alias("t0"), ms(b).alias("t1"))
        for p, a, b in parts
    )
    return out.drop_nulls()
