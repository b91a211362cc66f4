"""What a GPU format is to ppscope: how it is recognized, read and summarized.

Every format module (``smi``, ``dmon``, ``dcgmi``, ``exporter``, ``topology``, ``inventory``)
exports one ``Format`` per format it reads; ``toolkit.load.gpu.FORMATS`` lists them in
sniffing order. A trace format's ``load`` returns a ``Part`` (one file's samples and the
accounting of its other lines); a companion format's ``load`` returns its own table or object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load import registry
from toolkit.load import text as lines_io

TRACE = "trace"
"""Kind of the formats that are time series: one row per GPU per polling time."""
COMPANION = "companion"
"""Kind of the files that describe the machine (topology, GPU list, processes), not time."""

HEAD_LINES = 200
"""Lines of a file the detectors see."""


@dataclass(frozen=True)
class Options:
    """What a reader may need besides the file itself.

    ``source`` names the file as the user gave it (a compressed file is read from a plain copy);
    ``fields`` is the ``--query-gpu`` list of a CSV without header; ``interval_s`` the
    sampling interval of formats that print no time; ``workdir`` where temporary line stores
    go (None: the system temp directory).
    """

    source: str = ""
    fields: Sequence[str] | None = None
    interval_s: float | None = None
    strict: bool = False
    workdir: Path | None = None


@dataclass
class Part:
    """What one trace loader made of one file: samples plus the accounting of everything else.

    Every physical line of the file (split at ``\\n`` only) is either a line of a sample or a
    row of ``skipped`` (headers, blank lines and problems, each with its reason):
    ``sample_lines + skipped.height == lines``. A sample is one line, except for
    dcgm-exporter, where one sample gathers the metric lines of one GPU in one scrape.
    """

    path: str
    format: str
    lines: int
    samples: pl.DataFrame
    skipped: pl.DataFrame
    unavailable: pl.DataFrame
    notes: tuple[str, ...] = ()
    metric_lines: int | None = None  # lines gathered into samples, when not one per sample

    @property
    def sample_lines(self) -> int:
        """Lines of the file read into samples."""
        return self.samples.height if self.metric_lines is None else self.metric_lines


class Peek:
    """The first lines of a file as the detectors read them, computed once per file.

    Lines pasted into markdown quotes (``> ``, ``\\#``) are read with the quoting taken off.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @cached_property
    def lines(self) -> list[str]:
        """The first ``HEAD_LINES`` lines, unquoted."""
        return _unquoted(lines_io.head_lines(self.path, n=HEAD_LINES))

    @cached_property
    def body(self) -> list[str]:
        """``lines`` without the blank ones."""
        return [ln for ln in self.lines if ln.strip()]

    @cached_property
    def first(self) -> str:
        """The first non-blank line, stripped; ``""`` for an empty file."""
        return self.body[0].strip() if self.body else ""


def _unquoted(lines: list[str]) -> list[str]:
    quoted = [ln for ln in lines if ln.strip()]
    if quoted and all(ln.startswith(">") for ln in quoted):
        lines = [ln[1:].removeprefix(" ") for ln in lines]
    return [ln.replace("\\#", "#", 1) if ln.lstrip().startswith("\\#") else ln for ln in lines]


Format = registry.Format[Peek, Options]
"""A GPU format (``toolkit.load.registry.Format``)."""
Detector = Callable[[Peek], bool]
Loader = Callable[[Path, Options], Any]
Summarizer = Callable[[Path, Options], dict[str, Any]]
