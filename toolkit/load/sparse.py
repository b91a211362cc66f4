"""Collect a lazy table without materializing its empty columns.

Typed tables declare every field any version prints, so most columns of one log are null from
top to bottom (a v0.5.10 log has no speculative or disaggregation fields). Collected as read,
each such column still takes its full width in memory; kept as a null constant it takes none.
"""

from __future__ import annotations

import polars as pl

__all__ = ["collect_sparse"]


def collect_sparse(lf: pl.LazyFrame) -> pl.DataFrame:
    """``lf`` collected (streaming engine), its all-null columns as null constants."""
    schema = lf.collect_schema()
    held = lf.select(pl.all().is_not_null().any()).collect(engine="streaming")
    empty = [name for name in schema.names() if held.height and not held[name][0]]
    if not empty:
        return lf.collect(engine="streaming")
    df = lf.drop(empty).collect(engine="streaming")
    return df.with_columns(pl.lit(None, schema[name]).alias(name) for name in empty).select(
        schema.names()
    )
