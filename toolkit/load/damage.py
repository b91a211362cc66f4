"""Damaged inputs used as far as they are readable, their damage named with ``path:line``.

A loader that meets damage it can read past (a JSONL file whose writer was killed mid-line, one
unreadable file among several) calls ``damaged(error)``: inside ``collecting()`` the error is
kept and the loader goes on with the rest; outside, it is raised, so a caller that collects no
damage stays strict. ``Run.damage`` says what was kept this way, commands exit 1 on it ("some
input failed, the rest were used").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.phase_marks import PHASE_FORMAT, phase_file_problems

__all__ = [
    "CUT_LINE",
    "DAMAGED",
    "all_damage",
    "collecting",
    "cut_tail",
    "damage_rows",
    "damaged",
    "damaged_kind",
    "input_damage",
    "note",
]

CUT_LINE = "cut last line (the writer stopped mid-line); the lines before it were read"
DAMAGED = "damaged "
"""Prefix of the ``input`` of a damage row: the input was read only in part."""
SHOWN = 5
"""Damaged places of one file a row names; the others are counted."""

_SINK: ContextVar[list[ToolkitError] | None] = ContextVar("ppscope_damage", default=None)


def damaged(error: ToolkitError) -> None:
    """Keep ``error`` in the damage being collected, or raise it when none is."""
    sink = _SINK.get()
    if sink is None:
        raise error
    sink.append(error)


def note(error: ToolkitError) -> None:
    """Keep ``error`` in the damage being collected, if any (for a loader that also reports it
    its own way, as a skipped line)."""
    sink = _SINK.get()
    if sink is not None:
        sink.append(error)


@contextmanager
def collecting() -> Iterator[list[ToolkitError]]:
    """The damage loaders report inside the block (``damaged``), in order."""
    found: list[ToolkitError] = []
    token = _SINK.set(found)
    try:
        yield found
    finally:
        _SINK.reset(token)


def cut_tail(text: str, lineno: int, lines: int) -> bool:
    """Whether line ``lineno`` (1-based, of ``lines``) is the last and ends without a newline:
    where a writer killed mid-line leaves a line cut.

    >>> cut_tail('{"a": 1}\\n{"a"', 2, 2), cut_tail('{"a": 1}\\n{"a"\\n', 2, 2)
    (True, False)
    """
    return lineno == lines and not text.endswith("\n")


def damage_rows(errors: list[ToolkitError], what: str) -> list[dict[str, Any]]:
    """``Run.mismatches`` rows of the damage of one kind of input (``what``): one per file,
    its ``input`` marked ``DAMAGED``, its first ``SHOWN`` places named as
    ``file:line: reason`` (the count of the others after them).

    >>> [r["detail"] for r in damage_rows([ParseError("a/b.jsonl", 2, "not valid JSON")], "x")]
    ['b.jsonl:2: not valid JSON']
    """
    by_file: dict[str, list[ToolkitError]] = {}
    for error in errors:
        path = getattr(error, "path", None)
        by_file.setdefault(str(path) if path is not None else "?", []).append(error)
    out = []
    for path, found in by_file.items():
        places = []
        for error in found[:SHOWN]:
            line = getattr(error, "lineno", None)
            reason = getattr(error, "reason", None) or str(error)
            where = f"{Path(path).name}:{line}" if line is not None else Path(path).name
            places.append(f"{where}: {reason}")
        more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
        out.append(
            {
                "input": DAMAGED + what,
                "files": Path(path).name,
                "detail": "; ".join(places) + more,
            }
        )
    return out


def damaged_kind(input_kind: str) -> str | None:
    """The kind of input a ``Run.mismatches`` row's ``input`` names when the row is damage
    (``damage_rows``), else None.

    >>> damaged_kind("damaged benchmark results"), damaged_kind("GPU trace")
    ('benchmark results', None)
    """
    return input_kind.removeprefix(DAMAGED) if input_kind.startswith(DAMAGED) else None


def input_damage(run: Any) -> list[dict[str, Any]]:
    """``Run.mismatches`` rows of every input of ``run`` that was used as far as it was
    readable (its benchmark results, server info and metrics are loaded for it)."""
    for part in ("bench_all", "server_info", "metrics"):
        try:
            getattr(run, part)
        except ToolkitError:
            continue  # unreadable as a whole: the loader's error, where the input is used
    return [row for what, errors in run.found.items() for row in damage_rows(errors, what)]


def all_damage(run: Any) -> list[dict[str, Any]]:
    """``input_damage`` and the lines of the run's phase files that were left out (which
    ``Run.mismatches`` lists in its own note): everything a command exits 1 for."""
    try:
        bad = phase_file_problems(run.files.get(PHASE_FORMAT, []))
    except ToolkitError:
        bad = []  # an unreadable phase file is its loader's error, where it is used
    errors = [ParseError(path, lineno, reason) for path, lineno, reason in bad]
    return input_damage(run) + damage_rows(list(errors), "phase file")
