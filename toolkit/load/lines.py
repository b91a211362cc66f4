"""Read a text file as a lazy frame of ``(lineno, line)``, one row per physical line.

Nothing is lost: blank lines become null, invalid UTF-8 is replaced (U+FFFD), CRLF endings are
cut, NUL bytes and lone carriage returns stay inside the line. ``.gz`` files are decompressed
to a temporary file once. The column separator handed to the CSV reader is a control byte the
file does not contain, so no line is ever split.
"""

from __future__ import annotations

import gzip
import mmap
import shutil
import tempfile
from pathlib import Path

import polars as pl

from toolkit.errors import ToolkitError

# Control bytes that never appear in real logs; the first one absent from a file is used.
_SEPARATORS = (b"\x1f", b"\x1e", b"\x1d", b"\x1c", b"\x01", b"\x02", b"\x03", b"\x04")


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic number."""
    with path.open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def plain_copy(path: Path, workdir: Path) -> Path:
    """The path of an uncompressed copy of ``path`` (itself when not gzip)."""
    if not is_gzip(path):
        return path
    out = workdir / (path.name.removesuffix(".gz") or "decompressed")
    try:
        with gzip.open(path, "rb") as src, out.open("wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
    except (OSError, EOFError) as e:  # a cut .gz: keep what decompressed
        if not out.exists():
            raise ToolkitError(f"{path}: cannot decompress: {e}") from e
    return out


def free_separator(path: Path) -> str:
    """A control byte that does not occur in the file."""
    if path.stat().st_size == 0:
        return _SEPARATORS[0].decode()
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for sep in _SEPARATORS:
            if m.find(sep) < 0:
                return sep.decode()
    raise ToolkitError(f"{path}: binary file: every candidate separator byte occurs in it")


def scan_lines(path: Path) -> pl.LazyFrame:
    """Lazy ``lineno`` (1-based, Int64) and ``line`` (String, null when blank) of a plain file."""
    if path.stat().st_size == 0:
        return pl.LazyFrame(schema={"lineno": pl.Int64, "line": pl.String})
    return pl.scan_csv(
        path,
        has_header=False,
        separator=free_separator(path),
        quote_char=None,
        comment_prefix=None,
        schema={"line": pl.String},
        encoding="utf8-lossy",
        truncate_ragged_lines=True,
        row_index_name="lineno",
        row_index_offset=1,
        raise_if_empty=False,
    ).with_columns(pl.col("lineno").cast(pl.Int64))


def head_lines(path: Path, n: int = 400, max_bytes: int = 1 << 20) -> list[str]:
    """The first ``n`` lines (decoded leniently), for sniffing formats."""
    opener = gzip.open if is_gzip(path) else open
    try:
        with opener(path, "rb") as f:
            data = f.read(max_bytes)
    except (OSError, EOFError):
        return []
    return data.decode("utf-8", "replace").splitlines()[:n]


def workdir() -> Path:
    """A fresh temporary directory (the caller owns its removal)."""
    return Path(tempfile.mkdtemp(prefix="ppscope-"))
