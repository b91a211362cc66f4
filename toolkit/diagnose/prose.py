"""Lists in finding texts, summarized: a finding's sentence stays short however long the run.

A run of thousands of windows must not print its load thousands of times: ``loads`` names each
distinct value once, says how many times a value repeats, and stops after a few.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

__all__ = ["SHOWN", "loads"]

SHOWN = 6
"""Distinct values a list in a finding names before it says how many more there are."""


def loads(
    values: Iterable[int | float], unit: str = "", what: str = "phases", limit: int = SHOWN
) -> str:
    """Values (concurrencies, requests) as a short list: distinct, ascending, then ``unit``; a
    single value repeated says in how many ``what``; at most ``limit`` then how many more.

    >>> loads([1, 2, 4], " requests")
    '1, 2, 4 requests'
    >>> loads([64] * 1191, " requests", "windows")
    '64 requests in 1,191 windows'
    >>> loads([1, 2, 4, 8, 16, 32, 64, 128])
    '1, 2, 4, 8, 16, 32 and 2 more'
    """
    counts = Counter(_plain(v) for v in values)
    if not counts:
        return ""
    ordered = sorted(counts)
    if len(ordered) == 1 and counts[ordered[0]] > 1:
        value = ordered[0]
        return f"{value}{unit} in {counts[value]:,} {what}"
    shown = ", ".join(str(v) for v in ordered[:limit])
    rest = len(ordered) - limit
    return shown + (f" and {rest} more" if rest > 0 else "") + unit


def _plain(value: int | float) -> int | float:
    return int(value) if float(value).is_integer() else round(float(value), 1)
