"""Profiler traces on the log's clock.

A Kineto trace's times are the host's system clock: microseconds since the epoch (UTC), or
since its ``baseTimeNanoseconds``. The SGLang log prints the server's local time. Both come
from one host's clock, so they differ by its time-zone offset (``clocks.ZONE_SHIFTS_S``, or
none): the offset taken is the one that puts the trace's loop iterations inside the log's
decoding window of the phase it was profiled in (the whole log's batch lines for a trace of no
named phase), and only when exactly one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import polars as pl

from toolkit.analyze.clocks import ZONE_SHIFTS_S, zone_words
from toolkit.load.profile import ProfileTrace

__all__ = ["ProfileClock", "profile_clock", "trace_span_s"]

SLACK_S = 5.0
"""Seconds a trace may stick out of its window (the log prints whole seconds)."""


@dataclass(frozen=True)
class ProfileClock:
    """Seconds to add to a trace's epoch times to put them on the log's clock, and why; None
    when no single offset fits."""

    offset_s: float | None
    how: str


def trace_span_s(trace: ProfileTrace) -> tuple[float, float] | None:
    """First and last time (epoch seconds) of a trace's ranges and kernels."""
    ranges = trace.events.filter(pl.col("ph") == "X").drop_nulls(["ts_us", "dur_us"])
    if not ranges.height:
        return None
    base = (trace.base_ns or 0) / 1e9
    start = float(ranges["ts_us"].min()) / 1e6  # type: ignore[arg-type]
    end = float((ranges["ts_us"] + ranges["dur_us"]).max()) / 1e6  # type: ignore[arg-type]
    return base + start, base + end


def _naive_s(ts: datetime) -> float:
    """A naive log time as seconds, the way the log's clock reads it."""
    return ts.replace(tzinfo=UTC).timestamp()


def profile_clock(
    trace: ProfileTrace, window: tuple[datetime, datetime] | None, what: str
) -> ProfileClock:
    """The offset that places ``trace`` inside ``window`` (the log's times of ``what``: the
    phase it was profiled in, or the run)."""
    span = trace_span_s(trace)
    if span is None or window is None:
        return ProfileClock(None, "no times to place it by")
    lo, hi = _naive_s(window[0]) - SLACK_S, _naive_s(window[1]) + SLACK_S
    fits = [z for z in (0, *ZONE_SHIFTS_S) if lo <= span[0] + z and span[1] + z <= hi]
    if len(fits) != 1:
        why = "no time-zone offset" if not fits else f"{len(fits)} time-zone offsets"
        return ProfileClock(None, f"{why} put it inside {what}: not placed")
    zone = fits[0]
    said = "as recorded" if zone == 0 else f"its clock {zone_words(zone)} the log's"
    return ProfileClock(float(zone), f"{said}: inside {what}")
