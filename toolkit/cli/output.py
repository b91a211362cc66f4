"""What commands print: aligned tables that fit a terminal, wrapped text, progress, errors.

JSON goes through ``toolkit.schema.jsonable.to_json`` (non-finite numbers → null); text tables
are at most ``WIDTH`` columns wide: a wider table is cut into blocks of columns, each repeating
the key column. Everything a command prints or writes (``emit``, ``to_json``, ``fail``) passes
through the one redactor (``toolkit.load.redact``) with the secret values of every run loaded
(``remember_secrets``).
"""

from __future__ import annotations

import math
import shutil
import sys
import textwrap
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import polars as pl

from toolkit.cli.stdin import rename
from toolkit.load.redact import redact_text, redact_value
from toolkit.schema.jsonable import jsonable
from toolkit.schema.jsonable import to_json as _to_json

__all__ = [
    "WIDTH",
    "Progress",
    "aligned",
    "cell",
    "emit",
    "fail",
    "frame_lines",
    "number",
    "remember_secrets",
    "say",
    "secrets",
    "terminal_width",
    "to_json",
    "wrapped",
]

WIDTH = 100
"""Widest line a command prints, whatever the terminal."""


def terminal_width() -> int:
    """The terminal's width, at most ``WIDTH``."""
    return min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


_SECRETS: set[str] = set()
"""Secret values of the runs this process loaded: a command loads, then prints."""


class _RedactedJson(str):
    """JSON text whose strings were redacted one by one (``to_json``): ``emit`` keeps it."""


def remember_secrets(values: Iterable[str]) -> None:
    """Add secret values (``Run.secrets``) that every later output of this process removes."""
    _SECRETS.update(values)


def secrets() -> frozenset[str]:
    """The secret values remembered so far."""
    return frozenset(_SECRETS)


def to_json(value: Any, **kwargs: Any) -> str:
    """``value`` as JSON (``toolkit.schema.jsonable.to_json``), every secret out of it."""
    return _RedactedJson(_to_json(redact_value(jsonable(value), _SECRETS), **kwargs))


def say(message: object) -> None:
    """Print ``message`` on stderr, secrets out."""
    print(redact_text(str(message), _SECRETS), file=sys.stderr)


def fail(message: object) -> int:
    """Print ``ppscope: message`` on stderr; the exit code of bad input (2)."""
    print(f"ppscope: {redact_text(str(message), _SECRETS)}", file=sys.stderr)
    return 2


def emit(text: str, output: Path | None) -> None:
    """Print ``text``, or write it to ``output`` (``-o``) and say where on stderr; secrets out."""
    if not isinstance(text, _RedactedJson):
        text = redact_text(text, _SECRETS)
    if output is None:
        print(text)
        return
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(rename(text) + "\n", encoding="utf-8")
    print(f"wrote {output}", file=sys.stderr)


def number(x: float | None, spec: str) -> str:
    """A number formatted by ``spec``; ``-`` for None or non-finite; no ``-0.0``."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    text = format(x, spec)
    return format(0.0, spec) if text.lstrip("+-").strip("0.") == "" else text


def cell(value: Any, width: int = 40) -> str:
    """A table cell: numbers to 3 significant digits, lists comma-joined, text shortened."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    if isinstance(value, list | tuple):
        return ",".join(map(str, value))
    text = str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _numeric(text: str) -> bool:
    stripped = text.strip().rstrip("×%").replace(",", "").replace("→", "")
    return text.strip() == "-" or stripped.lstrip("+-").replace(".", "", 1).isdigit()


def aligned(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    keys: int = 1,
    width: int = WIDTH,
    indent: str = "",
) -> list[str]:
    """Aligned columns: numbers flush right, text flush left.

    When the table is wider than ``width``, the columns after the first ``keys`` are cut into
    blocks that fit, each block printed under the key columns again.
    """
    grid = [list(header), *[list(r) for r in rows]]
    widths = [max(len(r[i]) for r in grid) for i in range(len(header))]
    right = [all(_numeric(r[i]) for r in grid[1:]) and len(grid) > 1 for i in range(len(header))]
    blocks: list[list[int]] = []
    key_width = sum(widths[:keys]) + 2 * keys + len(indent)
    current: list[int] = []
    used = key_width
    for i in range(keys, len(header)):
        if current and used + widths[i] + 2 > width:
            blocks.append(current)
            current, used = [], key_width
        current.append(i)
        used += widths[i] + 2
    blocks.append(current)
    out: list[str] = []
    for n, block in enumerate(blocks):
        if n:
            out.append("")
        for r in grid:
            cells = [
                r[i].rjust(widths[i]) if right[i] else r[i].ljust(widths[i])
                for i in [*range(keys), *block]
            ]
            out.append((indent + "  ".join(cells)).rstrip())
    return out


def frame_lines(frame: pl.DataFrame, rows: int, *, indent: str = "") -> list[str]:
    """A frame as an aligned table of at most ``rows`` rows, plus a note on the rest."""
    shown = frame.head(rows)
    body = [[cell(v) for v in row] for row in shown.iter_rows()]
    out = aligned([str(c) for c in shown.columns], body, indent=indent)
    if frame.height > rows:
        out.append(f"{indent}... {frame.height - rows} more rows (--json has them all)")
    return out


def wrapped(text: str, indent: str = "", width: int | None = None) -> list[str]:
    """``text`` wrapped to the terminal, continuation lines indented two more."""
    lines = textwrap.wrap(
        text,
        width=width or terminal_width(),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_on_hyphens=False,
    )
    return lines or [indent]


class Progress:
    """Progress of a long command on stderr: one line per step, or a live line on a terminal.

    On a terminal the line names the step and shows the share of steps done with an estimate
    of the time left (``diagnose pp8: 40 % · ~12 s left``), redrawn every half second by a
    background thread so a long step never sits in silence; elsewhere (a CI log, a pipe) each
    step prints one plain line as it starts. ``quiet`` prints nothing. ``add`` grows the total
    when a command learns of more steps as it goes.
    """

    def __init__(
        self,
        total: int,
        *,
        quiet: bool = False,
        stream: TextIO | None = None,
        title: str = "",
    ) -> None:
        self.stream = stream or sys.stderr
        self.total = total
        self.title = title
        self.quiet = quiet
        self.shown = not quiet and self.stream.isatty()
        self._label = ""
        self._done = 0
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Progress:
        if self.shown:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.stream.write("\r\x1b[2K")
            self.stream.flush()

    def add(self, steps: int) -> None:
        """``steps`` more steps to come."""
        with self._lock:
            self.total += steps

    @contextmanager
    def step(self, label: str) -> Iterator[None]:
        """One unit of work (a file, a run's analysis), named on the progress line while it
        runs."""
        with self._lock:
            self._label = label
            number, total = self._done + 1, max(self.total, self._done + 1)
        if self.shown:
            self._draw()
        elif not self.quiet:
            head = f"{self.title}: " if self.title else ""
            self.stream.write(f"{head}[{number}/{total}] {label}\n")
            self.stream.flush()
        try:
            yield
        finally:
            with self._lock:
                self._done += 1

    def line(self) -> str:
        """The terminal's progress line now: step, share done, estimate of the time left."""
        with self._lock:
            seconds = time.monotonic() - self._started
            done, total, label = self._done, max(self.total, self._done + 1), self._label
        head = f"{self.title} {label}" if self.title else label
        share = f"{100 * done / total:.0f} %"
        if done:  # the steps so far set the pace of the rest
            left = seconds / done * (total - done)
            return f"{head}: {share} · ~{left:.0f} s left"
        return f"{head}: {share} · {seconds:.0f} s so far"

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            self._draw()

    def _draw(self) -> None:
        self.stream.write("\r\x1b[2K" + self.line()[: terminal_width() - 1])
        self.stream.flush()
