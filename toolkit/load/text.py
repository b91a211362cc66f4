"""Read a text file as a lazy frame of ``(lineno, line)``, one row per physical line.

Nothing is lost: blank lines become null, invalid UTF-8 is replaced (U+FFFD), CRLF endings are
cut, NUL bytes and lone carriage returns stay inside the line. ``.gz`` files are decompressed
to a temporary file once. The column separator handed to the CSV reader is a control byte the
file does not contain, so no line is ever split.
"""

from __future__ import annotations

import tempfile
import zlib
from pathlib import Path

import polars as pl

# Control bytes that never appear in real logs; the first one absent from a file is used.
_SEPARATORS = tuple(bytes([b]) for b in (*range(0x1F, 0x0D, -1), 0x0C, 0x0B, *range(8, 0, -1)))
_CHUNK = 64 << 20
# Leading bytes that make polars' CSV reader inflate a file itself (gzip, zlib, zstd): such a
# text would come out empty or raise, so it is split in Python instead.
_COMPRESSED = (b"\x1f\x8b", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x28\xb5\x2f\xfd")


def is_gzip(path: Path) -> bool:
    """True when the file starts with the gzip magic number."""
    with path.open("rb") as f:
        return f.read(2) == b"\x1f\x8b"


def plain_copy(path: Path, workdir: Path) -> tuple[Path, str | None]:
    """An uncompressed copy of ``path`` (itself when not gzip), and a note if the .gz was cut.

    A cut or corrupt archive keeps every byte that decompressed before the damage.
    """
    if not is_gzip(path):
        return path, None
    out = workdir / (path.name.removesuffix(".gz") or "decompressed")
    problem = None
    inflater = zlib.decompressobj(wbits=31)
    with path.open("rb") as src, out.open("wb") as dst:
        try:
            while chunk := src.read(1 << 20):
                while chunk:
                    dst.write(inflater.decompress(chunk))
                    chunk = inflater.unused_data  # a concatenated gzip member follows
                    if chunk:
                        inflater = zlib.decompressobj(wbits=31)
            dst.write(inflater.flush())
            if not inflater.eof:
                problem = "gzip stream ends early: the file was cut; read what it held"
        except zlib.error as e:
            problem = f"gzip data is corrupt ({e}); read what came before"
    return out, problem


def free_separator(path: Path) -> str | None:
    """A control byte that does not occur in the file, or None when every candidate does."""
    # Real logs hold none of these bytes, so the first candidate costs the only pass.
    return next((c.decode() for c in _SEPARATORS if not contains_byte(path, c)), None)


def contains_byte(path: Path, byte: bytes) -> bool:
    """True when the file holds ``byte`` (read in blocks: no whole-file mapping)."""
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            if byte in block:
                return True
    return False


def _csv_options(separator: str) -> dict:
    """Read every line whole, as one lossy UTF-8 string column, with its 1-based number."""
    return {
        "has_header": False,
        "separator": separator,
        "quote_char": None,
        "comment_prefix": None,
        "schema": {"line": pl.String},
        "encoding": "utf8-lossy",
        "truncate_ragged_lines": True,
        "row_index_name": "lineno",
        "row_index_offset": 1,
        "raise_if_empty": False,
    }


def scan_lines(path: Path, workdir: Path) -> pl.LazyFrame:
    """Lazy ``lineno`` (1-based, Int64) and ``line`` (String, null when blank) of a plain file."""
    if path.stat().st_size == 0:
        return pl.LazyFrame(schema={"lineno": pl.Int64, "line": pl.String})
    separator = free_separator(path)
    with path.open("rb") as f:
        compressed = f.read(4).startswith(_COMPRESSED)
    if separator is None or compressed:  # binary data, or bytes polars would inflate
        return pl.scan_parquet(_split_in_python(path, workdir))
    return pl.scan_csv(path, **_csv_options(separator)).with_columns(
        pl.col("lineno").cast(pl.Int64)
    )


def _split_in_python(path: Path, workdir: Path) -> Path:
    """Lines as Parquet, split by Python in chunks: the slow path for binary-laden files."""
    out = workdir / f"{path.name}.lines.parquet"
    frames: list[pl.DataFrame] = []
    lineno = 1
    carry = b""
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            pieces = (carry + chunk).split(b"\n")
            carry = pieces.pop()
            frames.append(_frame(pieces, lineno))
            lineno += len(pieces)
    if carry:
        frames.append(_frame([carry], lineno))
    pl.concat(frames).write_parquet(out)
    return out


def _frame(pieces: list[bytes], first: int) -> pl.DataFrame:
    text = [(p[:-1] if p.endswith(b"\r") else p).decode("utf-8", "replace") or None for p in pieces]
    return pl.DataFrame(
        {"lineno": pl.int_range(first, first + len(text), eager=True), "line": text},
        schema={"lineno": pl.Int64, "line": pl.String},
    )


def head_lines(path: Path, n: int = 400, max_bytes: int = 1 << 20) -> list[str]:
    """The first ``n`` lines (decoded leniently, gzip or not), for sniffing formats."""
    with path.open("rb") as f:
        data = f.read(max_bytes)
    if data[:2] == b"\x1f\x8b":
        try:
            data = zlib.decompressobj(wbits=31).decompress(data, max_bytes)
        except zlib.error:
            return []
    return data.decode("utf-8", "replace").splitlines()[:n]


def sample_lines(path: Path, chunks: int = 8, size: int = 64 << 10) -> list[str]:
    """Whole lines from the head and from evenly spaced places through a plain file."""
    total = path.stat().st_size
    out = head_lines(path, n=2000, max_bytes=256 << 10)
    if total <= 256 << 10:
        return out
    with path.open("rb") as f:
        for k in range(1, chunks + 1):
            f.seek(total * k // (chunks + 1))
            block = f.read(size).split(b"\n")[1:-1]  # drop the partial first and last lines
            out.extend(b.decode("utf-8", "replace") for b in block)
    return out


def workdir() -> Path:
    """A fresh temporary directory (the caller owns its removal)."""
    return Path(tempfile.mkdtemp(prefix="ppscope-"))
