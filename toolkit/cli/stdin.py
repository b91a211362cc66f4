"""``-`` as an input: standard input spooled once to a temporary file, shown as ``<stdin>``.

The stream is copied in blocks (bounded memory) to a file named ``<stdin>`` in a fresh
temporary folder, then read like any file: its format (and compression) told by its content.
A command that takes run directories gets a folder named ``<stdin>`` holding that one file.
While the command runs, everything it prints or writes names the input ``<stdin>``, never the
temporary path; the folder is removed afterwards.
"""

from __future__ import annotations

import argparse
import io
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, TextIO

from toolkit.errors import ToolkitError, UnknownFormat

__all__ = ["STDIN", "rename", "spool", "spooled", "stdin_inputs"]

STDIN = "<stdin>"
"""How standard input is named in every message, error and output."""
_BLOCK = 1 << 20
_spools: list[tuple[str, str]] = []  # (temporary path, what is shown instead), longest first


def spool(source: BinaryIO, folder: Path) -> Path:
    """Copy ``source`` to ``folder/<stdin>`` in blocks; the file's path.

    Raises
    ------
    UnknownFormat
        Nothing came: the stream was empty.
    """
    out = folder / STDIN
    copied = 0
    with out.open("wb") as dst:
        while block := source.read(_BLOCK):
            dst.write(block)
            copied += len(block)
    if not copied:
        raise UnknownFormat(STDIN, "standard input is empty: pipe a file in ('- < FILE')")
    return out


def spooled(path: Path) -> bool:
    """Whether ``path`` is the spooled copy of standard input (or its run folder)."""
    return any(str(path) == spool_path for spool_path, _ in _spools)


def rename(text: str) -> str:
    """``text`` with every spooled path replaced by ``<stdin>``."""
    for path, shown in _spools:
        text = text.replace(path, shown)
    return text


class _Renaming(io.TextIOBase):
    """A text stream that shows spooled paths as ``<stdin>``."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(rename(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()


@contextmanager
def stdin_inputs(args: argparse.Namespace) -> Iterator[argparse.Namespace]:
    """``args`` with a ``-`` input replaced by spooled standard input (a file, or a run folder
    when the command takes run directories: ``args.stdin_as``), output renamed meanwhile.

    Raises
    ------
    ToolkitError
        ``-`` given twice or to a command that reads no input file (``ingest`` records its
        logs' paths), or standard input is a terminal.
    UnknownFormat
        Standard input is empty.
    """
    kind = getattr(args, "stdin_as", None)
    names = [n for n in ("paths", "a", "b") if hasattr(args, n)]
    given = [(n, i) for n in names for i, p in enumerate(_as_list(getattr(args, n))) if _dash(p)]
    if not given:
        yield args
        return
    if kind is None:
        raise ToolkitError(f"{STDIN}: '-' is not an input of {args.command}; name the file")
    if len(given) > 1:
        raise ToolkitError(f"{STDIN}: '-' given {len(given)} times; standard input is read once")
    source = getattr(sys.stdin, "buffer", None)  # None: closed, or replaced by a text stream
    if source is None or sys.stdin.isatty():
        raise ToolkitError(f"{STDIN}: standard input is a terminal or closed; pipe a file in")
    parent = Path(tempfile.mkdtemp(prefix="ppscope-stdin-"))
    streams = sys.stdout, sys.stderr
    try:
        folder = parent / STDIN if kind == "run" else parent
        folder.mkdir(exist_ok=True)
        file = spool(source, folder)
        target: Path | list[Path] = folder if kind == "run" else file
        _spools[:0] = [(str(file), STDIN), (str(folder), STDIN)]
        name, index = given[0]
        value = getattr(args, name)
        if isinstance(value, list):
            target = [*value[:index], target, *value[index + 1 :]]
        sys.stdout, sys.stderr = _Renaming(streams[0]), _Renaming(streams[1])
        given_args = {**vars(args), name: target}
        if "no_cache" in given_args:  # a cache entry of a file removed afterwards serves no one
            given_args["no_cache"] = True
        yield argparse.Namespace(**given_args)
    finally:
        sys.stdout, sys.stderr = streams
        _spools.clear()
        shutil.rmtree(parent, ignore_errors=True)


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else [value]


def _dash(value: object) -> bool:
    return isinstance(value, Path | str) and str(value) == "-"
