"""The multi-line error records of a typed log: found from small columns, read whole only
where a record spans."""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import polars as pl

from toolkit.load.sglang.error_records import error_table
from toolkit.schema.sglang import RANK_TAGS

if TYPE_CHECKING:
    from collections.abc import Collection

    from toolkit.load.sglang.store import Store


class ErrorRecordViews:
    """The error-record tables of ``SGLangLog`` (a mixin: it reads the log's stores)."""

    sources: list[Store]

    if TYPE_CHECKING:  # provided by SGLangLog

        def scan(self, kinds: Collection[str] | None = None) -> pl.LazyFrame: ...

        def _resolved(self, lf: pl.LazyFrame) -> pl.LazyFrame: ...

    @cached_property
    def _error_record_lines(self) -> pl.DataFrame:
        """The lines of every error record (``source``, ``_order``, ``lineno``, ``_record``),
        found from small columns only: a log may hold millions of unprefixed lines."""
        kind, prefixed = pl.col("kind"), pl.col("has_prefix")
        candidates = (kind == "error") | (kind.is_in(["other", "progress"]) & ~prefixed)
        keys = (
            self.scan(["error", "other", "progress"])
            .filter(candidates)
            .select("_order", "lineno", "has_prefix", _error=kind == "error")
            .collect(engine="streaming")
            .sort("_order", "lineno")
        )
        lineno, order = pl.col("lineno"), pl.col("_order")
        new = prefixed | (lineno != lineno.shift(1) + 1) | (order != order.shift(1))
        paths = {i: s.path for i, s in enumerate(self.sources)}
        # A record's lines from its first error line on; counted over the whole table (a
        # window per record costs 400 bytes a line on a log of a million records).
        start = new.fill_null(True)
        seen = pl.col("_error").cast(pl.Int64).cum_sum()
        before = pl.when(start).then(seen - pl.col("_error").cast(pl.Int64)).forward_fill()
        return (
            keys.with_columns(_record=start.cum_sum(), _seen=seen, _before=before)
            .filter(pl.col("_seen") > pl.col("_before"))
            .select(
                pl.col("_order").replace_strict(paths, return_dtype=pl.String).alias("source"),
                "_order",
                "lineno",
                "_record",
            )
        )

    @cached_property
    def _error_groups(self) -> pl.DataFrame:
        """Error records: only the lines the records span are read whole."""
        spans = self._error_record_lines
        rows = self._resolved(self._scan_rows(spans)).select(
            "source", "_order", "lineno", "ts", "level", "message", *RANK_TAGS
        )
        rows = (
            rows.collect(engine="streaming")
            .join(spans, on=["_order", "lineno"], how="inner", suffix="_")
            .sort("_order", "lineno")
        )
        records = error_table(rows)
        if len(self.sources) > 1:
            records = records.sort("ts", "source", "lineno", nulls_last=True, maintain_order=True)
        return records

    def _scan_rows(self, wanted: pl.DataFrame) -> pl.LazyFrame:
        """Only the lines ``wanted`` names (``_order``, ``lineno``): a filter each store's
        pieces can skip row groups by, not a join over every line."""
        frames = []
        for (order,), rows in wanted.group_by("_order"):
            s = self.sources[int(order)]
            frames.append(
                s.scan()
                .filter(pl.col("lineno").is_in(rows.get_column("lineno").implode()))
                .with_columns(
                    source=pl.lit(s.path), _offset=pl.lit(s.clock_offset_s), _order=pl.lit(order)
                )
            )
        if not frames:
            return self.scan().head(0)
        return pl.concat(frames, how="diagonal_relaxed")

    def _error_spans(self) -> pl.DataFrame:
        """``source``, ``lineno`` and ``_err`` of every line an error record holds."""
        spans = self._error_record_lines.select("source", "lineno")
        return spans.with_columns(_err=pl.lit("error"))
