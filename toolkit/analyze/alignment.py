"""Log-ordinal alignment of pipeline stages: each stage's n-th batch line against the
reference (lowest) stage's, re-anchored where a log lost lines (``stages.stage_timeline``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import numpy as np
import polars as pl

__all__ = ["ALIGN_TOLERANCE_S", "ALIGN_WINDOW", "aligned_ordinals"]

_I = pl.Int64()
_STREAK = 16  # matches in a row before the walk matches the rest of a run vectorized

ALIGN_WINDOW = 3  # lines a stage may be missing (or have extra) before alignment gives up
ALIGN_TOLERANCE_S = 10.0  # lines matched across stages must be this close in time


def aligned_ordinals(df: pl.DataFrame) -> pl.Series:
    """Each line's log ordinal on the reference (lowest) stage of its DP rank and kind.

    In lock-step every stage's n-th line is the reference's n-th line, so the own count is
    the ordinal. A log that lost lines (journald rate limiting, a rotated head) would shift a
    stage's count for good and read as a desync from there on; so a stage whose lines do not
    match the reference one for one is walked against it, re-anchoring when a line appears a
    few lines later on the other side with the same values. Lines the reference lacks get
    null (they cannot be compared); genuine differences keep their position.
    """
    own = df.select(pl.int_range(pl.len()).over("dp", "pp", "kind").alias("o"))["o"].to_list()
    groups = (
        df.with_row_index("_i")
        .group_by("dp", "kind", "pp")
        .agg("_i", "running_req", "token", "ts")
        .sort("dp", "kind", "pp")
    )
    out: list[int | None] = list(own)
    reference: dict[tuple[Any, Any], dict[str, list[Any]]] = {}
    for g in groups.iter_rows(named=True):
        key = (g["dp"], g["kind"])
        if key not in reference:  # sorted by pp: the first is the reference stage
            reference[key] = g
            continue
        ref = reference[key]
        same = len(ref["_i"]) == len(g["_i"]) and all(
            a == b and c == d
            for a, b, c, d in zip(
                ref["running_req"], g["running_req"], ref["token"], g["token"], strict=True
            )
        )
        if same:
            continue
        for index, ordinal in zip(g["_i"], _walk(ref, g), strict=True):
            out[index] = ordinal
    return pl.Series("ordinal", out, dtype=_I)


def _walk(ref: dict[str, list[Any]], stage: dict[str, list[Any]]) -> list[int | None]:
    """Two-pointer alignment of one stage's lines to the reference stage's."""
    rr, rt, rts = ref["running_req"], ref["token"], ref["ts"]
    sr, st, sts = stage["running_req"], stage["token"], stage["ts"]
    n, m = len(rr), len(sr)
    tolerance = timedelta(seconds=ALIGN_TOLERANCE_S)

    def match(i: int, j: int) -> bool:
        return (
            sr[j] is not None
            and sr[j] == rr[i]
            and st[j] == rt[i]
            and abs(sts[j] - rts[i]) <= tolerance
        )

    same_run = _matched_run(ref, stage, tolerance)
    out: list[int | None] = [None] * m
    i = j = streak = 0
    while i < n and j < m:
        if match(i, j):
            # Past a few matches in a row, the rest of the run is matched at once.
            streak += 1
            k = same_run(i, j) if streak >= _STREAK else 1
            out[j : j + k] = range(i, i + k)
            i, j = i + k, j + k
            continue
        streak = 0
        skip = next((k for k in range(1, ALIGN_WINDOW + 1) if i + k < n and match(i + k, j)), 0)
        if skip:  # the stage lost lines the reference has
            i += skip
            continue
        extra = next((k for k in range(1, ALIGN_WINDOW + 1) if j + k < m and match(i, j + k)), 0)
        if extra:  # the reference lost lines this stage has: they stay unaligned
            j += extra
            continue
        out[j] = i  # a genuine difference (or a cut line) at this ordinal
        i, j = i + 1, j + 1
    return out


def _matched_run(
    ref: dict[str, list[Any]], stage: dict[str, list[Any]], tolerance: timedelta
) -> Callable[[int, int], int]:
    """``run(i, j)``: how many lines from reference line ``i`` and stage line ``j`` on match
    (``_walk``'s test, vectorized; at least 1 when they match)."""
    rr, rt = _ints(ref["running_req"]), _ints(ref["token"])
    sr, st = _ints(stage["running_req"]), _ints(stage["token"])
    rts, sts = _millis(ref["ts"]), _millis(stage["ts"])
    tol = tolerance.total_seconds() * 1000.0

    def run(i: int, j: int) -> int:
        width, total = 64, 0
        while True:
            a, b = slice(i + total, i + total + width), slice(j + total, j + total + width)
            k = min(len(rr[a]), len(sr[b]))
            if not k:
                return total
            a, b = slice(a.start, a.start + k), slice(b.start, b.start + k)
            ok = (
                (sr[b] >= 0)
                & (sr[b] == rr[a])
                & (st[b] == rt[a])
                & (np.abs(sts[b] - rts[a]) <= tol)
            )
            miss = np.flatnonzero(~ok)
            if miss.size:
                return total + int(miss[0])
            total += k
            width *= 4

    return run


def _ints(values: list[Any]) -> np.ndarray:
    """Counts as int64 with -1 for a missing value (counts are never negative)."""
    return np.array([-1 if v is None else v for v in values], dtype=np.int64)


def _millis(values: list[Any]) -> np.ndarray:
    """Datetimes as float milliseconds (NaN when missing: never within the tolerance)."""
    return pl.Series(values, dtype=pl.Datetime("ms")).cast(pl.Int64).cast(pl.Float64).to_numpy()
