"""Cumulative scrapes to intervals: the one place counters are differenced and histograms averaged.

Samples of every reader are collected in ``RawSamples`` (one row per sample per scrape), then
``intervals`` turns them into the declared ``METRICS`` table: per series (source, metric, ranks,
other labels), sorted by time, each scrape against the series' previous one. A counter or a
histogram's sum or count that went down means the server restarted: that interval is dropped and
counted as a reset. A counter's or histogram's first scrape is its baseline and yields no row.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.prometheus.exposition import Sample
from toolkit.load.prometheus.tally import Tally
from toolkit.schema.prometheus import METRICS, RANK_LABELS

__all__ = ["RAW", "RawSamples", "dedupe", "intervals", "split_labels"]

_RANK = re.compile(r"\d{1,6}")
_KEY = ("source", "metric", "pp_rank", "tp_rank", "dp_rank", "labels")
RAW: dict[str, pl.DataType] = {
    "source": pl.String(),
    "lineno": pl.Int64(),
    "ts": pl.Datetime("ms"),
    "metric": pl.String(),
    "kind": pl.String(),
    "part": pl.String(),
    "pp_rank": pl.Int32(),
    "tp_rank": pl.Int32(),
    "dp_rank": pl.Int32(),
    "labels": pl.String(),
    "value": pl.Float64(),
}


class RawSamples:
    """Samples as read, one row each, before differencing."""

    def __init__(self) -> None:
        self._cols: dict[str, list[Any]] = {k: [] for k in RAW}
        self._labels: dict[tuple[tuple[str, str], ...], tuple[Any, ...]] = {}

    def __len__(self) -> int:
        return len(self._cols["value"])

    def add(self, source: str, lineno: int | None, ts: datetime | None, sample: Sample) -> None:
        """Keep one sample of a scrape taken at ``ts`` (None: a scrape of no known time)."""
        key = tuple(sorted(sample.labels.items()))
        split = self._labels.get(key)
        if split is None:
            split = self._labels[key] = split_labels(sample.labels)
        cols = self._cols
        for name, value in (
            ("source", source),
            ("lineno", lineno),
            ("ts", ts),
            ("metric", sample.metric),
            ("kind", sample.kind),
            ("part", sample.part),
            ("value", sample.value),
        ):
            cols[name].append(value)
        for name, value in zip((*RANK_LABELS, "labels"), split, strict=True):
            cols[name].append(value)

    def frame(self) -> pl.DataFrame:
        """The samples as a frame."""
        return pl.DataFrame(self._cols, schema=RAW)


def split_labels(labels: dict[str, str]) -> tuple[Any, ...]:
    """(pp_rank, tp_rank, dp_rank, the other labels as JSON); a rank label that is no small
    whole number stays among the other labels."""
    ranks: list[int | None] = []
    rest = dict(labels)
    for name in RANK_LABELS:
        value = rest.get(name)
        if value is not None and _RANK.fullmatch(value):
            ranks.append(int(rest.pop(name)))
        else:
            ranks.append(None)
    return (*ranks, json.dumps(rest, sort_keys=True, ensure_ascii=False))


def dedupe(raw: pl.DataFrame, tally: Tally, *, strict: bool = False) -> pl.DataFrame:
    """``raw`` with each series read once per scrape.

    A series printed twice in one scrape (same file, time, metric, labels and part) is no
    second scrape: differenced, it would read as a restart and double every rate. Copies of the
    same value are read once (counted as ``duplicate``); copies that disagree are left out
    (``conflict``), or raise ``ParseError`` at the second copy with ``strict``.
    """
    key = [*_KEY, "kind", "part", "ts"]
    groups = (
        raw.group_by(key)
        .agg(
            n=pl.len(),
            values=pl.col("value").n_unique(),
            first=pl.col("lineno").min(),
            second=pl.col("lineno").sort().get(1, null_on_oob=True),
        )
        .filter(pl.col("n") > 1)
    )
    if not groups.height:
        return raw
    same = groups.filter(pl.col("values") == 1)
    conflicts = groups.filter(pl.col("values") > 1)
    if same.height:
        row = same.row(0, named=True)
        where = f"{row['source']}:{row['second']}: {row['metric']} as on line {row['first']}"
        tally.add("duplicate", where, n=int((same["n"] - 1).sum()))
    if conflicts.height:
        row = conflicts.row(0, named=True)
        reason = f"{row['metric']} printed again in one scrape with another value"
        if strict:
            raise ParseError(
                row["source"], row["second"], f"{reason} (first on line {row['first']})"
            )
        tally.add(
            "conflict", f"{row['source']}:{row['second']}: {reason}", n=int(conflicts["n"].sum())
        )
        raw = raw.join(conflicts.select(key), on=key, how="anti", nulls_equal=True)
    return raw.unique(subset=key, keep="first", maintain_order=True)


def intervals(raw: pl.DataFrame, *, clock_offset_s: float = 0.0) -> tuple[pl.DataFrame, int]:
    """The ``METRICS`` table of raw samples, and the number of intervals dropped as resets."""
    if not raw.height:
        return pl.DataFrame(schema=METRICS), 0
    raw = raw.sort([*_KEY, "ts", "lineno"], nulls_last=True)
    interval = (pl.col("ts") - pl.col("ts").shift(1).over(_KEY)).dt.total_milliseconds() / 1e3
    gauges = raw.filter(pl.col("kind") == "gauge").with_columns(
        interval_s=interval, count=pl.lit(None, pl.Float64)
    )
    counters = raw.filter(pl.col("kind") == "counter").with_columns(
        interval_s=interval,
        delta=pl.col("value") - pl.col("value").shift(1).over(_KEY),
    )
    histograms = (
        raw.filter(pl.col("kind") == "histogram")
        .group_by([*_KEY, "ts"], maintain_order=True)
        .agg(
            pl.col("lineno").first(),
            pl.col("value").filter(pl.col("part") == "sum").last().alias("sum"),
            pl.col("value").filter(pl.col("part") == "count").last().alias("n"),
        )
        .drop_nulls(["sum", "n"])
        .sort([*_KEY, "ts"], nulls_last=True)
        .with_columns(
            interval_s=interval,
            d_sum=pl.col("sum") - pl.col("sum").shift(1).over(_KEY),
            d_n=pl.col("n") - pl.col("n").shift(1).over(_KEY),
        )
    )
    resets = int((counters["delta"] < 0).sum()) + int(
        ((histograms["d_sum"] < 0) | (histograms["d_n"] < 0)).sum()
    )
    counters = counters.filter(pl.col("delta") >= 0).with_columns(
        value=pl.col("delta"), count=pl.lit(None, pl.Float64)
    )
    histograms = histograms.filter((pl.col("d_sum") >= 0) & (pl.col("d_n") >= 0)).with_columns(
        kind=pl.lit("histogram"),
        value=pl.when(pl.col("d_n") > 0).then(pl.col("d_sum") / pl.col("d_n")),
        count=pl.col("d_n"),
    )
    columns = list(METRICS.names())
    table = pl.concat(
        [f.select(columns).cast(METRICS) for f in (gauges, counters, histograms)]  # type: ignore[arg-type]
    )
    if clock_offset_s:
        table = table.with_columns(pl.col("ts") + timedelta(seconds=clock_offset_s))
    return table.sort("ts", "metric", "pp_rank", "tp_rank", "dp_rank", nulls_last=True), resets
