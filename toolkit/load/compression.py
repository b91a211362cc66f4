"""What compression a file uses, told by its first bytes (never its name), and how to read it.

gzip, zstd, xz and bzip2 are read as streams, one member (frame) after another, so memory stays
bounded by a block whatever the ratio: zstd input is fed 1 KiB at a time (a zstd block can
expand at most about 32,000 times), the others are asked for at most what the reader wants. A
stream that is cut or damaged is read as far as it goes and says why in ``Stream.problem``.
Compressed data or archives of other kinds (lz4, 7z, zip, rar, lzip, .Z, lzop, legacy .lzma, a
tar archive, or one compression inside another) raise ``UnsupportedCompression``: they are
never read as text.
"""

from __future__ import annotations

import bz2
import io
import lzma
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zstandard

from toolkit.errors import UnknownFormat, UnsupportedCompression

__all__ = [
    "CODECS",
    "Codec",
    "Stream",
    "bounded_lines",
    "codec_of",
    "head_bytes",
    "identify",
    "plain_copy",
]

PROBE_BYTES = 512
"""Bytes of a file (decompressed, for a compressed one) its kind is judged from."""
_BLOCK = 1 << 20
_ZSTD_FEED = 1 << 10


@dataclass(frozen=True)
class Codec:
    """A compression ppscope decompresses: its name, how its data starts, a fresh decoder."""

    name: str
    magic: tuple[bytes, ...]
    new: Callable[[], Any]
    suffix: str

    def matches(self, head: bytes) -> bool:
        return head.startswith(self.magic)


def _bzip2_head(head: bytes) -> bool:
    # "BZh9" may begin a text; the block (or end-of-stream) magic after it may not.
    return (
        len(head) >= 10 and head[3:4] in b"123456789" and head[4:10] in (b"1AY&SY", b"\x17rE8P\x90")
    )


_ZSTD_SKIPPABLE = tuple(bytes([b]) + b"\x2a\x4d\x18" for b in range(0x50, 0x60))

CODECS: tuple[Codec, ...] = (
    Codec("gzip", (b"\x1f\x8b",), lambda: zlib.decompressobj(wbits=31), ".gz"),
    Codec(
        "zstd",
        (b"\x28\xb5\x2f\xfd", *_ZSTD_SKIPPABLE),
        lambda: zstandard.ZstdDecompressor().decompressobj(),
        ".zst",
    ),
    Codec("xz", (b"\xfd7zXZ\x00",), lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ), ".xz"),
    Codec("bzip2", (b"BZh",), bz2.BZ2Decompressor, ".bz2"),
)
"""The compressions read transparently, in the order they are tried."""

# (leading bytes, offset, what it is, how to get text out of it)
_UNSUPPORTED: tuple[tuple[bytes, int, str, str], ...] = (
    (b"\x04\x22\x4d\x18", 0, "lz4 data", "decompress it first (lz4 -d)"),
    (b"\x02\x21\x4c\x18", 0, "lz4 (legacy) data", "decompress it first (lz4 -d)"),
    (b"7z\xbc\xaf\x27\x1c", 0, "a 7z archive", "extract it first (7z x)"),
    (b"PK\x03\x04", 0, "a zip archive", "extract it first (unzip)"),
    (b"PK\x05\x06", 0, "a zip archive", "extract it first (unzip)"),
    (b"PK\x07\x08", 0, "a zip archive", "extract it first (unzip)"),
    (b"Rar!\x1a\x07", 0, "a rar archive", "extract it first (unrar x)"),
    (b"LZIP\x01", 0, "lzip data", "decompress it first (lzip -d)"),
    (b"\x1f\x9d", 0, "compress (.Z) data", "decompress it first (uncompress)"),
    (b"\x1f\xa0", 0, "LZH compress data", "decompress it first"),
    (b"\x89LZO\x00\r\n\x1a\n", 0, "lzop data", "decompress it first (lzop -d)"),
    (b"\x5d\x00\x00", 0, "legacy lzma data", "decompress it first (xz -d)"),
    # POSIX and GNU tar headers; the NUL keeps a text with "ustar" at byte 257 a text
    (b"ustar\x00", 257, "a tar archive", "extract it first (tar xf) and name the files"),
    (b"ustar  \x00", 257, "a tar archive", "extract it first (tar xf) and name the files"),
)


def identify(path: str | Path, head: bytes, inside: Codec | None = None) -> Codec | None:
    """The codec of data starting with ``head``, None for uncompressed data.

    Raises
    ------
    UnsupportedCompression
        ``head`` starts a compression or archive ppscope does not read, or (``inside`` given:
        ``head`` is decompressed data) one compression inside another.
    """
    where = f" inside {inside.name}" if inside else ""
    for codec in CODECS:
        if codec.matches(head) and (codec.name != "bzip2" or _bzip2_head(head)):
            if inside:
                hint = "decompress the outer layer first"
                raise UnsupportedCompression(path, f"{codec.name} data{where}", hint)
            return codec
    for magic, offset, kind, hint in _UNSUPPORTED:
        if head[offset : offset + len(magic)] == magic:
            raise UnsupportedCompression(path, kind + where, hint)
    return None


def codec_of(path: str | Path) -> Codec | None:
    """The codec of a file, None when it is uncompressed.

    Raises
    ------
    UnsupportedCompression
        A compression or archive ppscope does not read.
    """
    with Path(path).open("rb") as f:
        return identify(path, f.read(PROBE_BYTES))


class Stream:
    """A file's bytes, decompressed on the fly when it is compressed (members one after another).

    ``problem`` says why a compressed stream ended early or was damaged, if it was; what came
    before stays readable. Use as a context manager, or ``close()`` it.

    Raises
    ------
    UnsupportedCompression
        When opened on a kind of data ppscope does not read.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = self.path.open("rb")
        try:
            self.codec = identify(path, self._file.read(PROBE_BYTES))
            self._file.seek(0)
            self.problem: str | None = None
            self._in = b""
            self._at = 0  # where the unread part of ``_in`` starts
            self._out = b""
            self._dec: Any = None
            self._fed = False  # the current member has been given input
            self._members = 0
            self._ended = False
            if self.codec is not None:  # what it holds must be text, not an archive
                probe = self._decoded(PROBE_BYTES)
                self._out = probe + self._out
                identify(path, probe, inside=self.codec)
        except BaseException:
            self._file.close()
            raise

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def seek(self, pos: int) -> None:
        """Move to byte ``pos`` of an uncompressed file."""
        if self.codec is not None:
            raise ValueError("a compressed stream cannot seek")
        self._file.seek(pos)
        self._out = b""

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; fewer only at the end of the stream."""
        if self.codec is None:
            head, self._out = self._out[:n], self._out[n:]
            return head + self._file.read(n - len(head)) if len(head) < n else head
        return self._decoded(n)

    def readinto(self, buf: memoryview) -> int:
        """Fill ``buf``: the bytes read, fewer only at the end of the stream."""
        if self.codec is not None:
            data = self._decoded(len(buf))
            buf[: len(data)] = data
            return len(data)
        head, self._out = self._out[: len(buf)], self._out[len(buf) :]
        buf[: len(head)] = head
        return len(head) + (self._file.readinto(buf[len(head) :]) or 0)

    def _decoded(self, n: int) -> bytes:
        parts = [self._out[:n]]
        self._out = self._out[n:]
        got = len(parts[0])
        while got < n and not self._ended:
            block = self._step(n - got)
            if len(block) > n - got:  # zstd gives all a piece of input holds
                self._out = block[n - got :] + self._out
                block = block[: n - got]
            parts.append(block)
            got += len(block)
        return b"".join(parts)

    def _take(self, limit: int) -> bytes:
        """At most ``limit`` bytes of compressed input; empty at the end of the file."""
        if self._at >= len(self._in):
            self._in, self._at = self._file.read(_BLOCK), 0
        piece = self._in[self._at : self._at + limit]
        self._at += len(piece)
        return piece

    def _step(self, n: int) -> bytes:
        """Some decompressed bytes (at most ``n`` unless zstd), possibly none; sets ``_ended``."""
        assert self.codec is not None
        name = self.codec.name
        if self._dec is None:
            if self._members and not self._skip_padding():
                self._ended = True
                return b""
            self._dec, self._fed = self.codec.new(), False
        d = self._dec
        exhausted = False
        try:
            if name == "zstd":
                data = self._take(_ZSTD_FEED)
                exhausted = not data
                out = d.decompress(data) if data else b""
            elif name == "gzip":
                data = d.unconsumed_tail or self._take(_BLOCK)
                exhausted = not data
                out = d.decompress(data, n) if data else d.flush()
            else:  # xz, bzip2: they keep input they could not yet turn into output
                data = self._take(_BLOCK) if d.needs_input else b""
                exhausted = d.needs_input and not data
                out = b"" if exhausted else d.decompress(data, n)
        except (zlib.error, lzma.LZMAError, zstandard.ZstdError, OSError, EOFError) as e:
            self._ended = True
            if self._members and not self._fed:
                self.problem = f"bytes after the end of the {name} data are not {name}; ignored"
            elif "too much memory" in str(e):  # zstd --long with a window over 128 MiB
                self.problem = (
                    f"{name} data needs a window over 128 MiB (made with zstd --long: decompress "
                    "it with zstd -d --long=31 first); read what came before"
                )
            else:
                self.problem = f"{name} data is corrupt ({e}); read what came before"
            return b""
        if data:
            self._fed = True
        if d.eof:
            self._in, self._at = d.unused_data + self._in[self._at :], 0
            self._dec = None
            self._members += 1
        elif exhausted:
            self._ended = True
            self.problem = f"{name} stream ends early: the file was cut; read what it held"
        return out

    def _skip_padding(self) -> bool:
        """Skip NUL padding between members; False when no more input follows."""
        while True:
            if self._at >= len(self._in):
                self._in, self._at = self._file.read(_BLOCK), 0
                if not self._in:
                    return False
            rest = self._in[self._at :].lstrip(b"\x00")
            if rest:
                self._in, self._at = rest, 0
                return True
            self._in, self._at = b"", 0


class _Raw(io.RawIOBase):
    def __init__(self, stream: Stream) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._stream.read(len(b))
        b[: len(data)] = data
        return len(data)


def _buffered(stream: Stream) -> io.BufferedReader:
    """``stream`` with ``readline(limit)``: a file's lines, decompressed in bounded blocks."""
    return io.BufferedReader(_Raw(stream), buffer_size=_BLOCK)


def bounded_lines(stream: Stream, limit: int) -> Iterator[tuple[int, bytes, bool]]:
    """``(line number, bytes, whole)`` of each line of ``stream``, each read within ``limit``
    bytes: a longer line gives its first ``limit + 1`` bytes with ``whole`` False, and the rest
    of it is skipped in bounded pieces. ``stream.problem`` says afterwards whether it ended
    early."""
    f = _buffered(stream)
    lineno = 0
    while raw := f.readline(limit + 1):
        lineno += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while (more := f.readline(1 << 20)) and not more.endswith(b"\n"):
                pass
            yield lineno, raw, False
        else:
            yield lineno, raw, True


def head_bytes(path: str | Path, max_bytes: int) -> bytes:
    """The first ``max_bytes`` bytes of a file, decompressed.

    Raises
    ------
    UnsupportedCompression
        A compression or archive ppscope does not read.
    UnknownFormat
        A compressed stream cut or damaged before any of its data (zstd and bzip2 decode whole
        blocks: a stream cut inside its first block holds nothing).
    """
    with Stream(path) as stream:
        data = stream.read(max_bytes)
        if not data and stream.problem:
            reason = stream.problem.split(";")[0]
            raise UnknownFormat(path, f"nothing could be read: {reason}")
        return data


def plain_copy(path: Path, workdir: Path) -> tuple[Path, str | None]:
    """An uncompressed copy of ``path`` in ``workdir`` (``path`` itself when it is plain), and
    why a compressed stream ended early, if it did (its bytes before the damage are kept).

    Raises
    ------
    UnsupportedCompression
        A compression or archive ppscope does not read.
    """
    with Stream(path) as stream:
        if stream.codec is None:
            return path, None
        out = workdir / (path.name.removesuffix(stream.codec.suffix) or "decompressed")
        if out == path:
            out = workdir / "decompressed"
        with out.open("wb") as dst:
            while block := stream.read(_BLOCK):
                dst.write(block)
        return out, stream.problem
