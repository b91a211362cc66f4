"""AIPerf's ``server_metrics_export.parquet``: the ``/metrics`` scrapes of a benchmark run.

The shape AIPerf documents for its server-metrics Parquet export (schema 1.0):
fixed columns ``endpoint_url``, ``metric_name``, ``metric_type`` (gauge, counter, histogram,
unknown), ``unit``, ``description``, ``timestamp_ns``; values ``value`` (gauge: as scraped;
counter: increase since a reference scrape before profiling), ``sum``, ``count`` (histogram,
likewise), ``bucket_le``, ``bucket_count`` (one row per bucket); every other column is a
Prometheus label (string, null when a series lacks it). AIPerf names a counter by its family
(``sglang:prompt_tokens``): the ``_total`` the server exposes is put back, so a metric has one
name whatever file it came from. AIPerf clamps a counter that went down to 0, so a restart
shows as a drop to 0 (dropped and counted like any reset) and the growth after it starts
late. Times are epoch nanoseconds, read as local time like AIPerf's own request records.

``server_metrics_export.jsonl`` is not read: its records carry no metric type (``{"value": N}``
for counters and gauges alike, counters without ``_total``), so counters cannot be told from
gauges without guessing. The JSON and CSV exports hold statistics, not scrapes.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.bench.common import from_epoch_ns
from toolkit.load.prometheus.series import RAW, split_labels
from toolkit.load.prometheus.tally import Tally

__all__ = ["AIPERF_COLUMNS", "aiperf_samples", "is_aiperf_export"]

AIPERF_COLUMNS: tuple[str, ...] = (
    "endpoint_url",
    "metric_name",
    "metric_type",
    "unit",
    "description",
    "timestamp_ns",
    "value",
    "sum",
    "count",
    "bucket_le",
    "bucket_count",
)
_LABEL = "label:"
_REQUIRED = {"endpoint_url", "metric_name", "metric_type", "timestamp_ns", "value"}
_KINDS = {"gauge": "gauge", "unknown": "gauge", "counter": "counter", "histogram": "histogram"}


def is_aiperf_export(path: Path) -> bool:
    """True for a Parquet file with AIPerf's server-metrics columns."""
    with path.open("rb") as f:
        if f.read(4) != b"PAR1":
            return False
    try:
        names = set(pl.read_parquet_schema(path))
    except Exception:  # polars raises assorted types on a damaged file
        return False
    return names >= _REQUIRED


def aiperf_samples(path: Path, skipped: Tally) -> tuple[pl.DataFrame, int]:
    """The raw samples of the export (``series.RAW`` columns) and its scrapes (timestamps).

    Raises
    ------
    ParseError
        A file polars cannot read, or a column of the wrong type.
    """
    try:
        table = pl.read_parquet(path)
    except Exception as e:  # polars raises assorted types on a damaged file
        raise ParseError(path, None, f"unreadable Parquet file ({str(e)[:120]})") from None
    # every label column, and the endpoint: two servers' series stay apart; renamed so that a
    # label called "kind" or "ts" cannot meet a column made here
    names = [c for c in table.columns if c not in AIPERF_COLUMNS] + ["endpoint_url"]
    table = table.with_columns(pl.col(c).alias(_LABEL + c) for c in names)
    labels = [_LABEL + c for c in names]
    try:
        table = table.with_columns(
            pl.col(*labels, "metric_name", "metric_type").cast(pl.String),
            pl.col("timestamp_ns").cast(pl.Int64),
            *[pl.col(c).cast(pl.Float64) for c in ("value", "sum", "count") if c in table.columns],
        )
    except pl.exceptions.PolarsError as e:
        raise ParseError(path, None, f"a column of the wrong type ({str(e)[:120]})") from None
    for c in ("sum", "count"):
        if c not in table.columns:
            table = table.with_columns(pl.lit(None, pl.Float64).alias(c))
    kind = pl.col("metric_type").replace_strict(_KINDS, default=None)
    table = table.with_columns(kind=kind)
    unknown = table.filter(pl.col("kind").is_null() | pl.col("metric_name").is_null())
    if unknown.height:
        first = unknown["metric_type"][0]
        skipped.add("bad row", f"{path}: metric_type {first!r}", unknown.height)
    table = table.filter(pl.col("kind").is_not_null() & pl.col("metric_name").is_not_null())
    buckets = table.filter(pl.col("kind") == "histogram").height
    series = ["metric_name", "kind", *labels, "timestamp_ns"]
    table = table.unique(series, keep="first", maintain_order=True)  # a histogram's bucket rows
    skipped.add("bucket", n=buckets - table.filter(pl.col("kind") == "histogram").height)
    metric = pl.col("metric_name")
    counter_name = pl.when(metric.str.ends_with("_total")).then(metric).otherwise(metric + "_total")
    table = table.with_columns(
        metric=pl.when(pl.col("kind") == "counter").then(counter_name).otherwise(metric)
    )
    parts = [
        table.filter(pl.col("kind") != "histogram").with_columns(part=pl.lit("value")),
        table.filter(pl.col("kind") == "histogram").with_columns(
            part=pl.lit("sum"), value=pl.col("sum")
        ),
        table.filter(pl.col("kind") == "histogram").with_columns(
            part=pl.lit("count"), value=pl.col("count")
        ),
    ]
    columns = ["metric", "kind", "part", "timestamp_ns", *labels, "value"]
    rows = pl.concat([p.select(columns) for p in parts])
    missing = rows.filter(pl.col("value").is_null() | pl.col("value").is_nan()).height
    skipped.add("non-finite", n=missing)
    rows = rows.filter(pl.col("value").is_not_null() & pl.col("value").is_finite())
    times = rows.select(pl.col("timestamp_ns").unique())
    times = times.with_columns(
        ts=pl.Series([from_epoch_ns(ns) for ns in times["timestamp_ns"]], dtype=pl.Datetime("ms"))
    )
    keys = rows.select(labels).unique().with_row_index("_key")
    split = [
        split_labels({k[len(_LABEL) :]: v for k, v in row.items() if k != "_key" and v is not None})
        for row in keys.iter_rows(named=True)
    ]
    parsed = pl.DataFrame(
        {
            "_key": keys["_key"],
            "pp_rank": pl.Series([s[0] for s in split], dtype=pl.Int32),
            "tp_rank": pl.Series([s[1] for s in split], dtype=pl.Int32),
            "dp_rank": pl.Series([s[2] for s in split], dtype=pl.Int32),
            "labels": pl.Series([s[3] for s in split], dtype=pl.String),
        }
    )
    joined = (
        rows.join(times, on="timestamp_ns", how="left")
        .join(keys, on=labels, how="left", nulls_equal=True)
        .drop(labels)
        .join(parsed, on="_key", how="left")
    )
    out = joined.with_columns(source=pl.lit(str(path)), lineno=pl.lit(None, pl.Int64))
    skipped.add("bad value", f"{path}: timestamp_ns", out.filter(pl.col("ts").is_null()).height)
    out = out.filter(pl.col("ts").is_not_null())
    return out.select(list(RAW)).cast(RAW), times.height  # type: ignore[arg-type]
