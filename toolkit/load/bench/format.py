"""What a benchmark result format is to ppscope: how it is recognized, read and summarized.

Every reader module (``sglang``, ``vllm``, ``nvidia``, ``aiperf``, ``sweep_csv``) exports one
``Format`` per format it reads; ``toolkit.load.bench.FORMATS`` lists them in sniffing order.
A format's ``load`` returns the runs it finds as ``Parsed`` (before labels and layouts are
resolved); the files here are read whole, compressed ones decompressed first.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from toolkit.load import compression, registry
from toolkit.load import text as lines_io
from toolkit.load.bench.common import Parsed

FILE = "file"
"""Kind of the formats whose whole file is a result (JSON, JSONL, CSV exports)."""
EMBEDDED = "embedded"
"""Kind of the formats printed inside any text log, a server log included."""

HEAD_LINES = 400
"""Lines of a file the detectors see."""
MAX_JSON_BYTES = 256 << 20
"""Larger files are not parsed whole to recognize them; their key names decide."""
NOT_JSON = object()
"""``Peek.json`` of a file that does not parse as JSON."""


@dataclass(frozen=True)
class Options:
    """What a reader may need besides the file: a generic CSV's ``{column: header}``
    ``mapping``, whether a run directory's server log may be cached (``cache``), and whether
    the first damaged line of a file is raised rather than read past (``strict``)."""

    mapping: dict[str, str] | None = None
    cache: bool = True
    strict: bool = False


class Peek:
    """The beginning of a file as the detectors read it, each part computed once per file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @cached_property
    def head(self) -> list[str]:
        """The first ``HEAD_LINES`` lines."""
        return lines_io.head_lines(self.path, n=HEAD_LINES)

    @cached_property
    def first(self) -> str:
        """The first non-blank line, stripped (a byte order mark too); ``""`` if none."""
        return next((ln.lstrip("\ufeff").strip() for ln in self.head if ln.strip()), "")

    @cached_property
    def text(self) -> str:
        """``head`` as one string."""
        return "\n".join(self.head)

    @cached_property
    def json(self) -> Any:
        """The JSON value of the first line (JSONL), else of the whole file, else ``NOT_JSON``.

        Only for a file whose first line opens an object or array; the whole file is parsed
        only up to ``MAX_JSON_BYTES``.
        """
        if not self.first.startswith(("{", "[")):
            return NOT_JSON
        # Plain ``json`` here: a file too deep or with too large an integer is still recognized,
        # and its reader says what is wrong with it (``parse_json``).
        try:
            return json.loads(self.first)
        except (ValueError, RecursionError):
            pass
        if self.path.stat().st_size <= MAX_JSON_BYTES:
            try:
                return json.loads(file_text(self.path))
            except (ValueError, RecursionError):
                pass
        return NOT_JSON

    @cached_property
    def json_object(self) -> dict[str, Any] | None:
        """``json`` when it is an object, else None."""
        return self.json if isinstance(self.json, dict) else None

    def contains(self, needle: bytes) -> bool:
        """Whether the whole (decompressed) file holds ``needle`` anywhere."""
        return contains(self.path, needle)


Format = registry.Format[Peek, Options]
"""A benchmark format (``toolkit.load.registry.Format``)."""
Detector = Callable[[Peek], bool]
Loader = Callable[[Path, Options], list[Parsed]]
Summarizer = Callable[[Path, Options], dict[str, Any]]


# ----------------------------------------------------------------------------- reading
@contextmanager
def plain_file(path: Path) -> Iterator[Path]:
    """The file itself, or a decompressed temporary copy of a compressed one."""
    if compression.codec_of(path) is None:
        yield path
        return
    work = lines_io.workdir()
    try:
        plain, _ = compression.plain_copy(path, work)
        yield plain
    finally:
        shutil.rmtree(work, True)


def file_text(path: Path) -> str:
    """The whole (decompressed) file as text; invalid UTF-8 replaced, a byte order mark cut."""
    with plain_file(path) as plain:
        return plain.read_bytes().decode("utf-8", "replace").lstrip("\ufeff")


def contains(path: Path, needle: bytes) -> bool:
    """Whether the (decompressed) file holds ``needle``, without reading it into memory; a
    damaged compressed stream is searched as far as it goes."""
    if path.stat().st_size == 0:
        return False
    tail = b""
    # Read in blocks, not mapped: a mapped multi-GB log would count whole in the process's RSS.
    plain = compression.codec_of(path) is None
    with path.open("rb") if plain else compression.Stream(path) as stream:
        while block := stream.read(1 << 20):
            data = tail + block
            if needle in data:
                return True
            tail = data[-len(needle) :]  # a match may straddle two blocks
    return False
