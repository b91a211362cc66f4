"""What a set of server request records holds, as the JSON ``ppscope parse`` prints."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.load.windows import time_span

__all__ = ["describe_requests", "summarize_requests"]


def summarize_requests(
    table: pl.DataFrame | pl.LazyFrame, skipped: dict[str, int]
) -> dict[str, Any]:
    """Rows per form, their span (arrival to end), how many state a TTFT, aborts, and the
    lines that hold no finished request (reason → count).

    A lazy ``table`` (``SGLangLog.scan_requests()``) is aggregated as it is read: no request
    row is held.
    """
    lf = table.lazy()
    totals, forms = pl.collect_all(
        [
            lf.select(
                requests=pl.len(),
                distinct_ids=pl.col("rid").drop_nulls().n_unique(),
                start=pl.min_horizontal("ts", "end_ts").min(),
                end=pl.col("end_ts").max(),
                with_ttft=pl.col("ttft_ms").is_not_null().sum(),
                with_queue=pl.col("queue_ms").is_not_null().sum(),
                aborted=pl.col("ok").not_().sum(),
            ),
            lf.group_by("form").len(),
        ],
        engine="streaming",
    )
    row = totals.row(0, named=True)
    return {
        "requests": int(row["requests"]),
        "forms": dict(sorted(forms.iter_rows())),
        "distinct_ids": int(row["distinct_ids"]),
        "start": row["start"],
        "end": row["end"],
        "with_ttft": int(row["with_ttft"]),
        "with_queue": int(row["with_queue"]),
        "aborted": int(row["aborted"]),
        "skipped": dict(sorted(skipped.items())),
    }


def describe_requests(s: dict[str, Any], indent: str = "  ") -> list[str]:
    """Text lines of ``summarize_requests``."""
    forms = ", ".join(f"{k} {v}" for k, v in s["forms"].items()) or "none"
    line = f"{indent}requests: {s['requests']} finished ({forms}), {s['distinct_ids']} ids"
    if s["start"] is not None and s["end"] is not None:
        line += f", {time_span(s['start'], s['end'])}"
    lines = [
        line,
        f"{indent}  {s['with_ttft']} state a TTFT, {s['with_queue']} a queue time, "
        f"{s['aborted']} aborted",
    ]
    if s["skipped"]:
        skipped = ", ".join(f"{v} {k}" for k, v in s["skipped"].items())
        lines.append(f"{indent}  other request lines: {skipped}")
    return lines
