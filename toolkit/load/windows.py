"""When each launch of a run ran, and which measurement files belong to none.

A launch group's window runs from its first line to its last batch line, widened by
``MARGIN_S`` on both sides and never past the next launch's start. A timed measurement file (a
benchmark result, a GPU trace, metrics, a phase file, ``/server_info`` answers) none of whose
times meet any window belongs to no launch: it is listed (``stray_inputs``), never attributed to
the nearest one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError

__all__ = [
    "INPUT_KINDS",
    "MARGIN_S",
    "launch_windows",
    "stray_inputs",
    "stray_notes",
    "time_span",
]

INPUT_KINDS = ("benchmark results", "GPU trace", "metrics", "phase file", "server info")
"""The timed measurement files a launch window may hold."""

MARGIN_S = 120.0
"""Seconds a measurement may start before a launch's first line or end after its last batch
line and still belong to it (a trace started before the server, a result saved after)."""


def launch_windows(spans: pl.DataFrame) -> list[dict[str, Any]]:
    """Per launch group of ``spans`` (``LAUNCH_SPANS``) in time order: ``group``, ``number``
    (1-based), ``start``, ``end``, ``lo``/``hi`` (the window its measurements may fall in),
    ``sources``, ``lineno`` (of its first launch), ``batch_lines``, ``why`` (what marks a start
    no dump marks), ``members`` (its launches)."""
    if not spans.height:
        return []
    per = (
        spans.sort("group", "start", "source", "lineno")
        .group_by("group", maintain_order=True)
        .agg(
            start=pl.col("start").min(),
            end=pl.col("end").max(),
            sources=pl.col("source"),
            lineno=pl.col("lineno").first(),
            batch_lines=pl.col("batch_lines").sum(),
            why=pl.col("why").first(),
            members=pl.col("launch"),
        )
        .sort("group")
    )
    rows = per.to_dicts()
    margin = timedelta(seconds=MARGIN_S)
    for i, r in enumerate(rows):
        start = r["start"] or r["end"]
        later = [o["start"] for o in rows[i + 1 :] if o["start"] is not None]
        following = min((t for t in later if start is not None and t > start), default=None)
        hi = r["end"] + margin if r["end"] is not None else None
        if hi is not None and following is not None:
            hi = min(hi, max(following, r["end"]))
        r.update(number=i + 1, lo=start - margin if start is not None else None, hi=hi)
    return rows


def stray_inputs(run: Any, kinds: tuple[str, ...] = INPUT_KINDS) -> list[dict[str, Any]]:
    """Timed measurement files of ``run`` (a ``Run``) none of whose times meet a launch window:
    ``input``, ``file``, ``start``, ``end``, for the input ``kinds`` asked (of
    ``INPUT_KINDS``). Empty without launches (nothing to place them against). Results printed
    inside a log belong to it and are never listed."""
    windows = [(w["lo"], w["hi"]) for w in launch_windows(run.launch_spans) if w["lo"] and w["hi"]]
    if not windows:
        return []
    logs = [str(p) for p in run.files.get("sglang-log", [])]
    reads = {
        "benchmark results": (lambda: run.bench_all and run.bench_all.runs, "ts", "ts"),
        "GPU trace": (lambda: run.gpu and run.gpu.samples, "ts", "ts"),
        "metrics": (lambda: run.metrics and run.metrics.samples, "ts", "ts"),
        "phase file": (lambda: run.phase_marks, "start", "end"),
        "server info": (lambda: run.server_info, "ts", "ts"),
    }
    parts = [(kind, *reads[kind]) for kind in kinds]
    out = []
    for kind, read, lo, hi in parts:
        try:
            frame = read()
        except ToolkitError:
            continue  # an unreadable file is its loader's error, where it is used
        if frame is None or not frame.height:
            continue
        spans = (
            frame.filter(~pl.col("source").cast(pl.String).is_in(logs))
            .group_by("source", maintain_order=True)
            .agg(lo=pl.col(lo).min(), hi=pl.col(hi).max())
        )
        for source, first, last in spans.iter_rows():
            if first is None or last is None:
                continue  # no time: nothing to place it by (its own notes say so)
            if not any(first <= w_hi and last >= w_lo for w_lo, w_hi in windows):
                out.append({"input": kind, "file": str(source), "start": first, "end": last})
    return out


def stray_notes(strays: list[dict[str, Any]]) -> list[dict[str, str]]:
    """``stray_inputs`` said as ``Run.mismatches`` notes."""
    return [
        {
            "input": s["input"],
            "files": Path(s["file"]).name,
            "detail": f"its times ({_at(s['start'])} – {_at(s['end'])}) meet no server launch "
            "of the log, so it belongs to none and is not used",
        }
        for s in strays
    ]


def _at(ts: datetime | None) -> str:
    return f"{ts:%Y-%m-%d %H:%M:%S}" if ts is not None else "?"


def time_span(start: datetime, end: datetime) -> str:
    """``2026-05-01 10:15:40 to 10:15:51``; the end's date too when the span crosses midnight.

    >>> time_span(datetime(2026, 5, 1, 23, 50), datetime(2026, 5, 2, 0, 10))
    '2026-05-01 23:50:00 to 2026-05-02 00:10:00'
    """
    same_day = start.date() == end.date()
    return f"{start:%Y-%m-%d %H:%M:%S} to {end:{'%H:%M:%S' if same_day else '%Y-%m-%d %H:%M:%S'}}"
