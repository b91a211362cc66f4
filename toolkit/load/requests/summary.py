"""What a set of server request records holds, as the JSON ``ppscope parse`` prints."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.load.windows import time_span

__all__ = ["describe_requests", "summarize_requests"]


def summarize_requests(table: pl.DataFrame, skipped: dict[str, int]) -> dict[str, Any]:
    """Rows per form, their span (arrival to end), how many state a TTFT, aborts, and the
    lines that hold no finished request (reason → count)."""
    start = pl.min_horizontal("ts", "end_ts").min()
    span = table.select(start=start, end=pl.col("end_ts").max()) if table.height else None
    return {
        "requests": table.height,
        "forms": dict(sorted(table.group_by("form").len().iter_rows())),
        "distinct_ids": table["rid"].drop_nulls().n_unique(),
        "start": span["start"][0] if span is not None else None,
        "end": span["end"][0] if span is not None else None,
        "with_ttft": int(table["ttft_ms"].is_not_null().sum()),
        "with_queue": int(table["queue_ms"].is_not_null().sum()),
        "aborted": int(table["ok"].not_().sum()),
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
