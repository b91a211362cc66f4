"""Cells that hold no value: which text, how often, first where; and strict mode's check.

Every GPU reader counts the cells it could not read as a number in an ``unavailable`` table
(schema ``UNAVAILABLE``): a tool's "no value" markers are ``unsupported``, a bracketed driver
message is an ``error``, anything else ``unreadable``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from toolkit.errors import ParseError
from toolkit.schema.gpu import UNAVAILABLE

__all__ = ["UNSUPPORTED", "check_cells", "missing_cells", "unavailable_table", "value_kind"]

UNSUPPORTED = ("[N/A]", "[Not Supported]", "N/A", "[Not Found]")
"""nvidia-smi's markers of a field the GPU or driver does not provide."""


def value_kind(value: pl.Expr) -> pl.Expr:
    """unsupported (the tool says it has no value), error (a driver error), else unreadable."""
    return (
        pl.when(value.is_in(list(UNSUPPORTED)) | (value == "-") | (value == "N/W"))
        .then(pl.lit("unsupported"))
        .when(value.str.starts_with("["))
        .then(pl.lit("error"))
        .otherwise(pl.lit("unreadable"))
    )


def missing_cells(lf: pl.LazyFrame, typed: pl.Expr, raw: pl.Expr, field: str) -> pl.LazyFrame:
    """Per distinct printed text of ``field`` that did not type: its count and first line."""
    return (
        lf.filter(typed.is_null() & raw.is_not_null())
        .group_by(raw.alias("value"))
        .agg(pl.len().alias("count"), pl.col("lineno").min().alias("first_lineno"))
        .with_columns(field=pl.lit(field))
    )


def unavailable_table(
    checks: Sequence[pl.LazyFrame],
    source: str,
    kind: Callable[[pl.Expr], pl.Expr] = value_kind,
) -> pl.DataFrame:
    """The ``unavailable`` rows of one file from its ``missing_cells`` queries."""
    missing = pl.concat(pl.collect_all(list(checks))) if checks else pl.DataFrame()
    if not missing.height:
        return pl.DataFrame(schema=UNAVAILABLE)
    return (
        missing.with_columns(
            source=pl.lit(source),
            kind=kind(pl.col("value")),
            count=pl.col("count").cast(pl.Int64),
        )
        .select(UNAVAILABLE.names())
        .cast(dict(UNAVAILABLE))
        .sort("first_lineno", "field")
    )


def check_cells(unavailable: pl.DataFrame, source: str) -> None:
    """Strict mode: raise at the first cell that holds an error instead of a value."""
    bad = unavailable.filter(pl.col("kind") != "unsupported")
    if bad.height:
        r = bad.sort("first_lineno").row(0, named=True)
        raise ParseError(source, r["first_lineno"], f"field {r['field']!r} holds {r['value']!r}")
