"""Read a text file as a lazy frame of ``(lineno, line)``, one row per physical line, or in
byte-range chunks of whole lines.

Nothing is lost: blank lines become null, invalid UTF-8 is replaced (U+FFFD), CRLF endings are
cut, NUL bytes and lone carriage returns stay inside the line. Compressed files (gzip, zstd,
xz, bzip2: ``toolkit.load.compression``) are decompressed to a temporary file once
(``compression.plain_copy``) or on the fly (``iter_chunks``). The column
separator handed to the CSV reader is a control byte the text does not contain, so no line is
ever split. Chunks never hold a line whole when it is longer than ``LINE_CAP``: its first bytes
are kept and its length recorded, so one huge line (a binary dump) costs no more memory than a
chunk.
"""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from toolkit.load import compression

# Control bytes that never appear in real logs; the first one absent from a file is used.
_SEPARATORS = tuple(bytes([b]) for b in (*range(0x1F, 0x0D, -1), 0x0C, 0x0B, *range(8, 0, -1)))
_CHUNK = 64 << 20
# Leading bytes that make polars' CSV reader inflate a file itself (gzip, zlib, zstd): such a
# text would come out empty or raise, so it is split in Python instead.
_COMPRESSED = (b"\x1f\x8b", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x28\xb5\x2f\xfd")


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


def lines_frame(data: bytes, linenos: np.ndarray) -> pl.DataFrame:
    """``lineno`` and ``line`` of some lines (each ending in a newline in ``data``), numbered
    ``linenos``: the rows ``chunk_frame`` gives them."""
    frame = chunk_frame(Chunk(0, data, len(linenos), {}), 1)
    return frame.with_columns(lineno=pl.Series(linenos, dtype=pl.Int64))


def head_lines(path: Path, n: int = 400, max_bytes: int = 1 << 20) -> list[str]:
    """The first ``n`` lines (decoded leniently, decompressed), for sniffing formats.

    Raises
    ------
    UnsupportedCompression
        A compression or archive ppscope does not read.
    """
    data = compression.head_bytes(path, max_bytes)
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


# ---------------------------------------------------------------------- chunks of lines
LINE_CAP = 1 << 20
"""Longest line kept whole (bytes); a longer one is cut at this length and its size recorded."""
_BLOCK = 4 << 20
_TAIL_BLOCK = 64 << 10  # the end of a chunk's last line is usually near: read a little first


@dataclass(frozen=True)
class Chunk:
    """The lines of a file that start in one byte range, each line at most ``LINE_CAP`` long.

    ``data`` holds whole lines, each ending in ``\\n``; ``long`` maps the 1-based number of a
    cut line within the chunk to its length in the file (bytes, without the newline).
    """

    index: int
    data: bytes | bytearray
    lines: int
    long: dict[int, int]


class _Source:
    """A file's (decompressed) bytes that can be pushed back; ``problem`` says why a compressed
    stream ended early, if it did (the bytes before stay readable)."""

    def __init__(self, path: Path) -> None:
        self._stream = compression.Stream(path)
        self._pending = b""

    @property
    def problem(self) -> str | None:
        return self._stream.problem

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> _Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def seek(self, pos: int) -> None:
        """Move to byte ``pos`` (plain files only)."""
        self._stream.seek(pos)
        self._pending = b""

    def unread(self, data: bytes) -> None:
        self._pending = data + self._pending

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; fewer only at the end of the stream."""
        head, self._pending = self._pending[:n], self._pending[n:]
        return head + self._stream.read(n - len(head)) if len(head) < n else head

    def readinto(self, buf: bytearray) -> int:
        """Fill ``buf``: the bytes read, fewer only at the end of the stream."""
        head, self._pending = self._pending[: len(buf)], self._pending[len(buf) :]
        buf[: len(head)] = head
        if len(head) == len(buf):
            return len(head)
        with memoryview(buf) as view:
            return len(head) + self._stream.readinto(view[len(head) :])


def chunk_count(size: int, chunk_bytes: int) -> int:
    """How many nominal chunks a plain file of ``size`` bytes has (some may hold no line)."""
    return max(1, -(-size // chunk_bytes))


def read_chunk(path: Path, index: int, chunk_bytes: int, cap: int = LINE_CAP) -> Chunk | None:
    """Chunk ``index`` of a plain file, read on its own (what a worker does); None when no
    line starts in its byte range."""
    start = index * chunk_bytes
    with _Source(path) as src:
        src.seek(max(start - 1, 0))
        skipped = 0
        if start > 0 and src.read(1) != b"\n":
            found = _skip_line(src)  # a line runs over the start: it belongs to the chunk before
            if found is None:
                return None
            skipped = found
        if skipped >= chunk_bytes:
            return None
        chunk, _ = _read_lines(src, index, chunk_bytes - skipped, cap)
        return chunk


def iter_chunks(
    path: Path,
    chunk_bytes: int,
    cap: int = LINE_CAP,
    problems: list[str] | None = None,
    *,
    buffers: int = 0,
) -> Iterator[Chunk]:
    """Every chunk of a file in order, in one pass (plain or decompressed on the fly).

    Chunk ``k`` holds the lines that start in bytes ``[k, k + 1) * chunk_bytes`` of the
    (decompressed) file, so a plain file's chunks equal those ``read_chunk`` reads one by one;
    a chunk no line starts in is skipped. A cut or corrupt compressed stream yields the lines
    before the damage and appends the reason to ``problems``.

    With ``buffers``, chunks are read into that many buffers in turn (``data`` is then a
    ``bytearray``): fresh pages for every chunk cost more than reading it. A chunk's bytes are
    overwritten by the ``buffers``-th chunk after it, so the caller holds fewer chunks than
    that, and no view of one it has let go.
    """
    ring = [bytearray(chunk_bytes + _TAIL_BLOCK) for _ in range(buffers)]
    with _Source(path) as src:
        pos = 0
        for turn in itertools.count():
            index = pos // chunk_bytes
            into = ring[turn % buffers] if ring else None
            budget = (index + 1) * chunk_bytes - pos
            chunk, consumed = _read_lines(src, index, budget, cap, into)
            if chunk is None:
                break
            pos += consumed
            yield chunk
        if src.problem and problems is not None:
            problems.append(src.problem)


def _skip_line(src: _Source) -> int | None:
    """Skip to the start of the next line: the bytes skipped, or None at the end of the file."""
    skipped = 0
    while block := src.read(_BLOCK):
        i = block.find(b"\n")
        if i >= 0:
            src.unread(block[i + 1 :])
            return skipped + i + 1
        skipped += len(block)
    return None


def _read_lines(
    src: _Source, index: int, budget: int, cap: int, into: bytearray | None = None
) -> tuple[Chunk | None, int]:
    """The lines that start in the next ``budget`` bytes, and the bytes consumed; read into
    ``into`` when given (its size is set to the chunk's).

    The chunk's bytes are copied once at most, and its newlines counted without the GIL, so
    the reading thread does not hold up the threads that type the chunks before it.
    """
    if into is None:
        body: bytes | bytearray = src.read(budget)
    else:
        _resize(into, budget)
        _resize(into, src.readinto(into))
        body = into
    if not body:
        return None, 0
    consumed = len(body)
    cut = len(body) if body.endswith(b"\n") else body.rfind(b"\n") + 1
    capped, long = _cap_lines(body, cap, cut)
    lines = int(np.count_nonzero(np.frombuffer(body, np.uint8, cut) == 10))
    tail: list[bytes] = []
    if cut < len(body):  # the last line runs past the budget: read to its end, up to cap
        kept, length, extra = _finish_line(src, bytes(body[cut:]), cap)
        consumed += extra
        lines += 1
        if length > cap:
            long[lines] = length
        tail = [kept, b"\n"]
    if long or into is None:
        whole = capped if long else memoryview(body)[:cut]
        data: bytes | bytearray = b"".join([whole, *tail]) if tail or long else body
    else:  # the chunk's lines are the buffer's: its last line's end goes in after them
        _resize(into, cut)
        into += b"".join(tail)
        data = into
    return Chunk(index, data, lines, long), consumed


def _resize(buf: bytearray, size: int) -> None:
    """Set ``buf``'s size; within what it holds already, nothing is allocated or copied."""
    if size < len(buf):
        del buf[size:]
    elif size > len(buf):
        buf += bytes(size - len(buf))


def _finish_line(src: _Source, head: bytes, cap: int) -> tuple[bytes, int, int]:
    """(the line cut at ``cap``, its full length, bytes read past ``head`` incl. the newline)."""
    keep = cap + 4  # a byte past the cap shows whether the cut splits a UTF-8 character
    kept = [head[:keep]]
    have = len(kept[0])
    length = len(head)
    extra = 0
    size = _TAIL_BLOCK
    while block := src.read(size):
        size = _BLOCK
        i = block.find(b"\n")
        piece = block if i < 0 else block[:i]
        if have < keep:
            kept.append(piece[: keep - have])
            have += len(kept[-1])
        length += len(piece)
        extra += len(piece)
        if i >= 0:
            src.unread(block[i + 1 :])
            extra += 1
            break
    line = b"".join(kept)
    return (_utf8_cut(line, cap) if length > cap else line), length, extra


def _cap_lines(body: bytes, cap: int, end: int) -> tuple[bytes, dict[int, int]]:
    """``body[:end]`` (whole lines) with every line longer than ``cap`` cut, and their lengths
    (``body`` itself when no line is that long).

    Looks only at aligned windows of ``cap // 2`` bytes: a line of ``cap`` bytes or more holds
    one whole window without a newline, so normal text costs one ``find`` per window.
    """
    step = max(cap // 2, 1)
    long: dict[int, int] = {}
    pieces: list[bytes] = []
    done = 0  # body[:done] is settled
    i = 0
    while i + step <= end:
        if body.find(b"\n", i, i + step) >= 0:
            i += step
            continue
        start = body.rfind(b"\n", 0, i) + 1
        stop = body.find(b"\n", i + step, end)
        stop = end if stop < 0 else stop
        if stop - start > cap and start >= done:
            long[body.count(b"\n", 0, start) + 1] = stop - start
            pieces += [body[done:start], _utf8_cut(body[start : start + cap + 4], cap)]
            done = stop
        i = max(stop, i + step)
    if not long:
        return body, long
    pieces.append(body[done:end])
    return b"".join(pieces), long


def _utf8_cut(line: bytes, cap: int) -> bytes:
    """``line[:cap]`` without splitting a UTF-8 character."""
    cut = min(cap, len(line))
    while cut > 0 and cut < len(line) and (line[cut] & 0xC0) == 0x80:
        cut -= 1
    return line[:cut]


def chunk_frame(chunk: Chunk, first_lineno: int) -> pl.DataFrame:
    """``lineno`` and ``line`` of a chunk (the same rows ``scan_lines`` gives for its lines)."""
    separator = next((c for c in _SEPARATORS if c not in chunk.data), None)
    if separator is not None and not chunk.data.startswith(_COMPRESSED):
        opts = _csv_options(separator.decode()) | {"row_index_offset": first_lineno}
        df = pl.read_csv(bytes(chunk.data), **opts)
        if df.height == chunk.lines:
            return df.with_columns(pl.col("lineno").cast(pl.Int64))
    pieces = chunk.data.split(b"\n")[: chunk.lines]  # binary data: split lines in Python
    return _frame(pieces, first_lineno)
