"""A run's profiler traces as tracks beside its stage timeline: one process per pipeline stage
(``PPk profile``) holding the scheduler loop's ranges and each GPU stream's kernels, on the
log's clock (``analyze.profile_clock``). A trace no offset places is left out and named in
``otherData.profile``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from toolkit.analyze.profile_clock import profile_clock
from toolkit.load.profile import ProfileTrace
from toolkit.run_analysis import RunAnalysis

__all__ = ["PROFILE_PID", "profile_tracks"]

PROFILE_PID = 3000  # after the server's, the GPUs' and /metrics processes
MAX_EVENTS = 200_000
"""Ranges and kernels kept per trace (the first ones: a profile is a few steps)."""
_GPU = ("kernel", "gpu_memcpy", "gpu_memset")


def profile_tracks(ctx: RunAnalysis) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The trace events of the run's profile (one track group per stage and phase) and, per
    trace, where it was placed (``file``, ``phase``, ``pp``, ``offset_s``, ``how``)."""
    profile = ctx.run.profile
    if profile is None:
        return [], []
    events: list[dict[str, Any]] = []
    placed: list[dict[str, Any]] = []
    groups = sorted({(p, t.pp if t.pp is not None else (t.rank or 0))
                     for t, p in zip(profile.traces, profile.phases, strict=True)},
                    key=lambda g: (str(g[0]), g[1]))  # fmt: skip
    for trace, phase in zip(profile.traces, profile.phases, strict=True):
        pp = trace.pp if trace.pp is not None else (trace.rank or 0)
        index = ctx.profile_phase(phase)
        window, what = _window(ctx, index)
        clock = profile_clock(trace, window, what)
        placed.append({"file": trace.path.name, "phase": phase, "pp": pp,
                       "offset_s": clock.offset_s, "how": clock.how})  # fmt: skip
        if clock.offset_s is None or (trace.tp or 0) > 0:
            continue  # one TP rank per stage: they run the same loop
        pid = PROFILE_PID + groups.index((phase, pp))
        name = f"{ctx.label} PP{pp} profile" + (f" ({phase})" if phase else "")
        events += _tracks(trace, pid, name, clock.offset_s)
    return events, placed


def _window(ctx: RunAnalysis, index: int | None) -> tuple[tuple[datetime, datetime] | None, str]:
    if index is not None:
        row = ctx.phase(index)
        if row.get("start") is not None and row.get("end") is not None:
            return (row["start"], row["end"]), f"phase {index}'s decoding"
    ts = ctx.batches["ts"].drop_nulls() if ctx.batches.height else None
    if ts is None or not ts.len():
        return None, "the log"
    return (ts.min(), ts.max()), "the log's batch lines"  # type: ignore[return-value]


def _tracks(trace: ProfileTrace, pid: int, name: str, offset_s: float) -> list[dict[str, Any]]:
    base_us = (trace.base_ns or 0) / 1e3 + offset_s * 1e6
    rows = trace.events.filter(
        (pl.col("ph") == "X")
        & pl.col("ts_us").is_not_null()
        & pl.col("dur_us").is_not_null()
        & (pl.col("cat").is_in(_GPU) | (pl.col("cat") == "user_annotation"))
    ).head(MAX_EVENTS)
    gpu = pl.col("cat").is_in(_GPU)
    rows = rows.with_columns(
        track=pl.when(gpu).then(pl.col("stream").fill_null(0) + 1).otherwise(0),
    )
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
         "args": {"name": name}},
        {"name": "process_sort_index", "ph": "M", "ts": 0, "pid": pid, "tid": 0,
         "args": {"sort_index": pid}},
    ]  # fmt: skip
    for track in sorted(rows["track"].unique().to_list()):
        label = "CPU loop" if track == 0 else f"GPU stream {track - 1}"
        out.append({"name": "thread_name", "ph": "M", "ts": 0, "pid": pid, "tid": track,
                    "args": {"name": label}})  # fmt: skip
    for r in rows.select("name", "cat", "ts_us", "dur_us", "track").iter_rows():
        out.append({"name": r[0], "cat": r[1], "ph": "X", "ts": round(base_us + r[2], 3),
                    "dur": round(r[3], 3), "pid": pid, "tid": r[4]})  # fmt: skip
    return out
