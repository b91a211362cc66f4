"""Warnings, errors and tracebacks of an SGLang log, each multi-line record as one row.

A record starts at a line the typing pass called ``error`` and takes the unprefixed lines
that directly follow it in the same file (a traceback's frames, a wrapped message). A
traceback is summarized by its last unindented line (the exception); any other record by its
first line, and it is a warning when its level or text says so.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from toolkit.schema.sglang import ERRORS, RANK_TAGS

__all__ = ["error_table", "group_errors"]


def group_errors(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Error lines and the unprefixed lines that continue them (tracebacks), as records.

    ``rows`` are candidate lines in file order (``source``, ``lineno``, ``ts``, rank tags,
    ``kind``, ``has_prefix``, ``level``, ``message``). Returns the ``ERRORS`` table and the
    ``(source, lineno)`` of every line a record took, with ``_err = "error"``.
    """
    records: list[dict[str, Any]] = []
    spans: list[tuple[str, int]] = []
    current: dict[str, Any] | None = None
    for r in rows.iter_rows(named=True):
        if (
            current is not None
            and r["source"] == current["source"]
            and r["lineno"] == current["end_lineno"] + 1
            and not r["has_prefix"]
        ):
            current["end_lineno"] = r["lineno"]
            current["lines"].append(r["message"] or "")
            spans.append((r["source"], r["lineno"]))
            continue
        current = None
        if r["kind"] == "error":
            keep = ("source", "lineno", "ts", *RANK_TAGS)
            current = {
                **{k: r[k] for k in keep},
                "end_lineno": r["lineno"],
                "lines": [r["message"]],
                "first_level": r["level"],
            }
            records.append(current)
            spans.append((r["source"], r["lineno"]))
    table = [_record(rec) for rec in records]
    spans_df = pl.DataFrame(spans, schema={"source": pl.String, "lineno": pl.Int64}, orient="row")
    return (
        pl.DataFrame(table, schema=ERRORS, orient="row"),
        spans_df.with_columns(_err=pl.lit("error")),
    )


def _record(rec: dict[str, Any]) -> dict[str, Any]:
    lines = rec.pop("lines")
    printed_level = rec.pop("first_level")
    text = "\n".join(lines)
    if "Traceback (most recent call last)" in text:
        level = "traceback"
        tail = [ln for ln in lines if ln and not ln.startswith((" ", "\t"))]
        summary = tail[-1] if tail else lines[0]
    else:
        warned = printed_level == "WARNING" or re.search(r"WARNING|Warning\b", lines[0])
        level = "warning" if warned else "error"
        summary = lines[0]
    return {**rec, "level": level, "summary": summary, "text": text}


def error_table(rows: pl.DataFrame) -> pl.DataFrame:
    """The ``ERRORS`` table from the lines records span, vectorized (``group_errors`` reads
    the same records row by row): ``rows`` in file order, each with its record's ``_record``."""
    msg = pl.col("message")
    plain = msg.is_not_null() & (msg != "") & ~msg.str.starts_with(" ") & ~msg.str.starts_with("\t")
    records = rows.group_by("_record", maintain_order=True).agg(
        pl.col("source", "lineno", "ts", *RANK_TAGS).first(),
        end_lineno=pl.col("lineno").last(),
        _level=pl.col("level").first(),
        _first=msg.first(),
        _last_plain=msg.filter(plain).last(),
        text=msg.fill_null("").str.join("\n"),
    )
    traceback = pl.col("text").str.contains("Traceback (most recent call last)", literal=True)
    warned = (pl.col("_level") == "WARNING").fill_null(False) | pl.col("_first").str.contains(
        r"WARNING|Warning\b"
    )
    records = records.with_columns(
        level=pl.when(traceback)
        .then(pl.lit("traceback"))
        .when(warned)
        .then(pl.lit("warning"))
        .otherwise(pl.lit("error")),
        summary=pl.when(traceback).then(pl.coalesce("_last_plain", "_first")).otherwise("_first"),
    )
    return records.select(ERRORS.names()).cast(dict(ERRORS))
