"""``ppscope capture``'s ``/metrics`` snapshots: one JSON object per scrape, a line each.

Each line is ``{"ts": "2025-05-25T21:40:21.123", "text": "<the exposition, whole>"}``, the
capture host's local time without a zone (``toolkit.capture.metrics``). Lines are read one at a
time and never longer than ``MAX_LINE_BYTES``; a compressed file is read decompressed (a cut or
corrupt stream keeps the scrapes before the damage, and says so).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from toolkit.errors import ParseError
from toolkit.load import compression
from toolkit.load.damage import CUT_LINE, note
from toolkit.load.inputs import check_input, head_lines
from toolkit.load.jsonl import json_object, local_time, lone_surrogate
from toolkit.load.prometheus.tally import Tally

__all__ = ["MAX_LINE_BYTES", "is_snapshot_file", "snapshots"]

MAX_LINE_BYTES = 64 << 20
"""A scrape of many ranks is a few MB of text; a longer line is something else."""
_HEAD = re.compile(r'^\{"ts": "\d{4}-\d\d-\d\dT[\d:.]{8,15}", "text": "')


def is_snapshot_file(path: Path) -> bool:
    """True when the first non-empty line starts like a capture snapshot (``{"ts": …,
    "text": …``), or is no JSON object and a later one of the first five does (a damaged
    first line, which the reader names); a line may be too long to read whole here."""
    for line in head_lines(path, n=5):
        if not line.strip():
            continue
        if _HEAD.match(line) or _whole_snapshot(line):
            return True
        if json_object(line) is not None:
            return False  # a JSON object of another kind: another format
    return False


def _whole_snapshot(line: str) -> bool:
    record = json_object(line)
    return record is not None and set(record) == {"ts", "text"}


def snapshots(
    path: Path, skipped: Tally, *, strict: bool = False
) -> Iterator[tuple[int, datetime, str]]:
    """(line number, scrape time, exposition text) of every scrape of the file.

    A line that is no snapshot (cut by a stop, too long, no JSON, a time with a zone) is
    counted in ``skipped`` by reason; with ``strict`` it raises ``ParseError``.
    """
    path = check_input(path)
    with compression.Stream(path) as stream:
        lineno = 0
        for lineno, raw, whole in compression.bounded_lines(stream, MAX_LINE_BYTES):
            if not whole:
                _reject(path, lineno, "line longer than 64 MiB", raw[:200], skipped, strict)
                continue
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line.strip():
                skipped.add("blank")
                continue
            found = _snapshot(line)
            if isinstance(found, str):
                cut = not raw.endswith(b"\n")  # the last line, cut by a writer that stopped
                if cut:
                    note(ParseError(path, lineno, CUT_LINE, line))
                _reject(path, lineno, found, line, skipped, strict, named=cut)
                continue
            yield lineno, *found
        if stream.problem:
            skipped.add("compressed", f"{path}: after line {lineno}: {stream.problem}")


def _snapshot(line: str) -> tuple[datetime, str] | str:
    """(time, text) of a snapshot line, or why it is none."""
    record = json_object(line)
    if record is None:
        return "not a JSON object (a line cut short?)"
    if not isinstance(record.get("text"), str):
        return 'not a snapshot: a JSON object with "ts" and "text" expected'
    broken = lone_surrogate(line, record)
    if broken is not None:
        return broken
    stamp = record.get("ts")
    ts = local_time(stamp)
    if ts is None:
        return f"ts {str(stamp)[:40]!r} is no local time such as 2025-05-25T21:40:21.123"
    return ts, record["text"]


def _reject(
    path: Path,
    lineno: int,
    reason: str,
    line: str | bytes,
    skipped: Tally,
    strict: bool,
    *,
    named: bool = False,
) -> None:
    """Raise the line with ``strict``; else count it, and name it in the damage being
    collected (``damage.note``) unless it is already (``named``)."""
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    if strict:
        raise ParseError(path, lineno, reason, text)
    if not named:
        note(ParseError(path, lineno, reason, text))
    skipped.add("bad line", f"{path}:{lineno}: {reason}")
