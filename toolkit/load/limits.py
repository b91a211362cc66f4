"""Plausible limits of the numbers in an input that size work: one home, each with its reason.

An analysis allocates by some numbers it reads (a replay holds one entry per request in flight,
a slot loop one per micro-batch slot). Each such number is checked here before anything is
allocated; a value beyond its limit is a declared error naming the file, the line and the limit,
so the memory of an analysis never follows a number in an input.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import polars as pl

from toolkit.errors import ParseError, ToolkitError

__all__ = ["LIMITS", "Limit", "beyond", "check", "check_at", "python_time"]


class Limit(NamedTuple):
    """The largest plausible value of a number and why."""

    name: str
    most: int
    why: str


LIMITS: dict[str, Limit] = {
    limit.name: limit
    for limit in (
        Limit("concurrency", 100_000, "requests in flight one benchmark holds against one server"),
        Limit("num_prompts", 100_000_000, "requests one benchmark run sends"),
        Limit("requests", 100_000_000, "requests one simulation replays"),
        Limit("parallel_size", 4_096, "GPUs (tp, pp, dp, ep ranks) one server spans"),
        Limit("slots", 4_096, "micro-batch slots of one pipeline (pp + async depth)"),
        Limit("running_requests", 1_000_000, "requests one scheduler holds at once"),
        Limit("tokens", 1_000_000_000, "tokens of one request, chunk or KV pool"),
        Limit("phases", 100_000, "benchmark phases of one run"),
    )
}


def beyond(name: str, value: int | float) -> str | None:
    """Why ``value`` is beyond the limit of ``name`` (a message naming the limit), or None."""
    limit = LIMITS[name]
    if value <= limit.most:
        return None
    shown = (
        f"{value}" if len(str(value)) <= 24 else f"{str(value)[:20]}… ({len(str(value))} digits)"
    )
    return f"{name} {shown} is beyond the limit of {limit.most:,} ({limit.why})"


def check(name: str, value: int | float | None, what: str) -> None:
    """Raise ``ToolkitError`` (``what: ...``) when ``value`` is beyond the limit of ``name``."""
    reason = None if value is None else beyond(name, value)
    if reason is not None:
        raise ToolkitError(f"{what}: {reason}")


def check_at(name: str, value: int | float | None, path: str | Path, lineno: int | None) -> None:
    """Raise ``ParseError`` at ``path:lineno`` when ``value`` is beyond the limit of ``name``."""
    reason = None if value is None else beyond(name, value)
    if reason is not None:
        raise ParseError(path, lineno, reason)


def python_time(ts: pl.Expr) -> pl.Expr:
    """``ts`` where its year is one Python's datetime holds (1 to 9999), else null: a
    ``[0000-01-01 …]`` stamp stays in its line's text and is never a time."""
    return pl.when(ts.dt.year().is_between(1, 9999)).then(ts)
