"""Phase files: when each benchmark run of a sweep started and ended, written as it ran.

``ppscope capture`` writes ``phases.jsonl``, one JSON object per phase: ``{"phase",
"concurrency", "num_prompts", "start", "end", "exit_code", "results", "command"}`` with local
times of the capture host (``2025-05-25T21:40:21.123``), the clock of its GPU trace. Loaded
with the run's ``clock_offset_s`` added, like the GPU trace, the times are on the log's clock;
benchmark runs are then placed by them instead of by the log's own evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError
from toolkit.load import compression
from toolkit.load.inputs import check_input, split_lines
from toolkit.load.jsonl import first_record, json_object, local_time, lone_surrogate
from toolkit.load.limits import beyond
from toolkit.schema.bench import PHASE_MARKS

__all__ = ["PHASE_FORMAT", "is_phase_file", "load_phase_marks", "phase_file_problems"]

PHASE_FORMAT = "ppscope-phases"
_KEYS = {"phase", "concurrency", "start", "end"}
MAX_BYTES = 16 << 20
"""A phase file holds a line per benchmark run; a larger file is something else."""


def is_phase_file(path: Path) -> bool:
    """True when the first non-empty line is a phase record (a JSON object with ``phase``,
    ``concurrency``, ``start`` and ``end``)."""
    found = first_record(path)
    return found is not None and found[1] is not None and set(found[1]) >= _KEYS


def load_phase_marks(
    paths: Iterable[str | Path], *, clock_offset_s: float = 0.0, strict: bool = False
) -> pl.DataFrame:
    """The phases of every file, in time order (schema ``PHASE_MARKS``).

    A line that is no phase record (cut by a stop, edited by hand) is left out of the table
    and listed by ``phase_file_problems``; with ``strict`` it raises ``ParseError`` with its
    line.
    """
    shift = timedelta(seconds=clock_offset_s)
    rows: list[dict[str, Any]] = []
    for path, lineno, line, row, reason in _records(paths):
        if row is None:
            if strict:
                raise ParseError(path, lineno, reason, line)
            continue
        row["start"] += shift
        row["end"] += shift
        rows.append({"source": str(path), "lineno": lineno, **row})
    table = pl.DataFrame(rows, schema=PHASE_MARKS, orient="row")
    return table.sort("start", "source", "lineno")


def phase_file_problems(paths: Iterable[str | Path]) -> list[tuple[str, int, str]]:
    """``(file, line, reason)`` of every line ``load_phase_marks`` leaves out."""
    return [(str(p), n, why) for p, n, _line, row, why in _records(paths) if row is None]


def _records(
    paths: Iterable[str | Path],
) -> Iterator[tuple[Path, int, str, dict[str, Any] | None, str]]:
    """Every non-blank line of the files: (path, line number, text, record or None, reason)."""
    for path in paths:
        path = check_input(path)
        data = compression.head_bytes(path, MAX_BYTES + 1)  # compressed or not
        if len(data) > MAX_BYTES:
            raise ParseError(path, None, "too large for a phase file")
        text = data.decode("utf-8", "replace")
        for lineno, line in enumerate(split_lines(text), 1):
            if line.strip():
                row, reason = _row(line)
                yield path, lineno, line, row, reason


def _row(line: str) -> tuple[dict[str, Any] | None, str]:
    record = json_object(line)
    if record is None:
        return None, "not a JSON object"
    broken = lone_surrogate(line, record)
    if broken is not None:  # a key or text no table can hold
        return None, broken
    start, end = local_time(record.get("start")), local_time(record.get("end"))
    if start is None or end is None or end < start:
        return None, "start and end must be local times, end not before start"
    for key, limit in (
        ("phase", "phases"),
        ("concurrency", "concurrency"),
        ("num_prompts", "num_prompts"),
    ):
        value = _whole(record.get(key))
        reason = beyond(limit, value) if value is not None else None
        if reason is not None:  # it would size a replay: the line is left out, named
            return None, f"{key}: {reason}"
    return {
        "phase": _whole(record.get("phase")),
        "concurrency": _whole(record.get("concurrency")),
        "num_prompts": _whole(record.get("num_prompts")),
        "start": start,
        "end": end,
        "exit_code": _whole(record.get("exit_code")),
        "results": _whole(record.get("results")),
        "interrupted": record.get("interrupted") is True,
    }, ""


def _whole(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 62:
        return value
    return None
