"""nvidia-smi CSV rows typed by one compiled pass over the file's bytes.

A ``--query-gpu`` trace is millions of rows of the same shape: ``2026/05/25 21:40:21.123, 0,
45 %, 81234 MiB, 312.45 W``. ``read`` takes a row when every cell is exactly what its column
holds (the time, a plain number, the number and the column's unit, ``", "`` between cells) and
types it from its bytes; every other row (``[N/A]``, a cut or longer row, a blank line, another
header, any byte outside printable ASCII) is given to the CSV reader's plan, and the rows are
put back in line order. A test holds both ways to the same frame.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numba
import numpy as np
import polars as pl

from toolkit.load import compiled
from toolkit.load.compiled.primitives import (
    MAX_DECIMAL_DIGITS,
    POW10,
    clock,
    copy,
    days_from_civil,
    loads,
    mapped,
    month_days,
    number,
    scratch,
)

BLOCK_BYTES = 16 << 20
WORKERS = 2
_TIME, _INT, _FLOAT, _UNIT, _TEXT = 0, 1, 2, 3, 4
TEXT_SEPARATOR = "\x1f"  # a taken row is printable ASCII: it holds none


@dataclass(frozen=True)
class Layout:
    """What each column of a row holds, for the compiled pass."""

    cells: np.ndarray  # per column: _TIME, _INT, _FLOAT or _UNIT (a number, a space, the unit)
    units: np.ndarray  # every unit's text, one after the other
    unit_start: np.ndarray  # per column: where its unit starts in ``units``
    unit_end: np.ndarray  # and where it ends
    dtypes: tuple[pl.DataType, ...]
    shortest: int  # bytes of the shortest row the pass takes, with its newline


def layout(kinds: Sequence[str], units: Sequence[str | None]) -> Layout | None:
    """The layout of columns of these kinds (``ts``, ``gpu``, ``float``, ``str``) and value
    units, or None when a unit is not printable ASCII."""
    cells, text, ends, dtypes = [], b"", [], []
    for kind, unit in zip(kinds, units, strict=True):
        if kind == "ts" and unit is None:
            cells.append(_TIME)
            dtypes.append(pl.Datetime("ms"))
        elif kind == "gpu" and unit is None:
            cells.append(_INT)
            dtypes.append(pl.Int32())
        elif kind == "float" and (unit is None or (unit.isascii() and unit.isprintable())):
            cells.append(_FLOAT if unit is None else _UNIT)
            text += (unit or "").encode()
            dtypes.append(pl.Float64())
        elif kind == "str":
            cells.append(_TEXT)
            dtypes.append(pl.String())
        else:
            return None
        ends.append(len(text))
    if not cells:
        return None
    return Layout(
        cells=np.array(cells, np.int64),
        units=np.frombuffer(text or b"\0", np.uint8),
        unit_start=np.array([0, *ends[:-1]], np.int64),
        unit_end=np.array(ends, np.int64),
        dtypes=tuple(dtypes),
        shortest=sum(19 if cell == _TIME else 1 for cell in cells)
        + len(text)
        + sum(cell == _UNIT for cell in cells)
        + 2 * (len(cells) - 1)
        + 1,
    )


@functools.cache
def ready() -> bool:
    """The compiled pass is loaded (from numba's cache, else compiled): a one-row block."""
    lane = layout(["ts", "gpu"], [None, None])
    assert lane is not None
    return loads("nvidia-smi row", lambda: _typed_block(b"2026/05/25 21:40:21.000, 0\n", lane,
                                                         ["ts", "gpu"]))  # fmt: skip


def read(
    path: Path,
    header_lineno: int,
    lane: Layout,
    columns: Sequence[str],
    plan: Callable[[bytes], pl.DataFrame],
) -> pl.DataFrame:
    """Every row after the header line: ``lineno``, the typed ``columns`` and ``_suspect``.

    Blocks of whole lines are typed by two threads at once; ``plan`` types the bytes of the
    rows the pass left (its ``lineno`` counts them from 1).
    """
    done: list[Block] = []
    with path.open("rb") as f, ThreadPoolExecutor(WORKERS) as pool:
        _skip_lines(f, header_lineno)
        pending: deque[Future[Block]] = deque()
        for data in _blocks(f, buffers=WORKERS + 2):
            pending.append(pool.submit(_typed_block, data, lane, columns))
            while len(pending) > WORKERS:  # so a block's buffer is free when it is read again
                done.append(pending.popleft().result())
        done += [p.result() for p in pending]
    compiled.note_use("nvidia-smi row")
    first = header_lineno + 1  # the number of the block's first line
    frames, left, left_lines = [], [], []
    for block in done or [_typed_block(b"", lane, columns)]:
        frames.append(block.rows.with_columns(pl.col("lineno") + first))
        if block.left_lines.size:
            left.append(block.left)
            left_lines.append(block.left_lines + first)
        first += block.lines
    if left:
        linenos = pl.Series(np.concatenate(left_lines))
        typed = plan(b"".join(left)).with_columns(
            lineno=pl.lit(linenos).gather(pl.col("lineno") - 1)
        )
        frames.append(typed.select(frames[0].columns))
    out = pl.concat(frames)
    return out.sort("lineno") if left else out


def _skip_lines(f: BinaryIO, lines: int) -> None:
    """Move ``f`` past its first ``lines`` lines."""
    while lines > 0:
        start = f.tell()
        block = f.read(1 << 20)
        if not block:
            return
        at = -1
        while lines > 0:
            at = block.find(b"\n", at + 1)
            if at < 0:
                break
            lines -= 1
        if lines == 0:
            f.seek(start + at + 1)


def _blocks(f: BinaryIO, buffers: int) -> Iterator[memoryview]:
    """The rest of ``f`` in blocks of whole lines (the last may lack its newline), read into
    ``buffers`` buffers in turn: a block's bytes are overwritten when the ``buffers``-th block
    after it is read, so the caller holds fewer blocks than that. A block ends at its last
    newline, and the next is read from there; a line longer than a buffer is read into one
    twice as large, once."""
    ring = [bytearray(BLOCK_BYTES) for _ in range(buffers)]
    turn = 0
    pos = f.tell()
    size = BLOCK_BYTES
    while True:
        buf = ring[turn % buffers] if size == BLOCK_BYTES else bytearray(size)
        got = f.readinto(buf)
        if not got:
            return
        view = memoryview(buf)[:got]
        if got < size:  # the end of the file
            yield view
            return
        cut = buf.rfind(b"\n") + 1
        if cut == 0:  # no newline yet: read from the same place into twice the size
            size *= 2
        else:
            yield view[:cut]
            turn += 1
            pos += cut
            size = BLOCK_BYTES
        f.seek(pos)


@dataclass(frozen=True)
class Block:
    """One block typed: its lines, the rows the pass took (``lineno`` from 0 in the block),
    and the bytes and line indexes of the rows it left."""

    lines: int
    rows: pl.DataFrame
    left: bytes
    left_lines: np.ndarray


def _typed_block(data: bytes | memoryview, lane: Layout, columns: Sequence[str]) -> Block:
    """The compiled pass over one block of whole lines.

    The block's frame holds the pass's arrays without a copy; the rows are counted by the
    pass, not by a pass of their own.
    """
    buf = np.frombuffer(data, np.uint8)
    rows = len(data) // lane.shortest + 1  # no more rows fit; untouched pages cost nothing
    taken = mapped(rows, np.int64)
    values = mapped((len(lane.cells), rows), np.float64)
    ts_ms = mapped(rows, np.int64)
    rest = scratch("smi-rest", len(data) + 1)  # copied out below
    rest_lines = scratch("smi-rest-lines", 8 * (len(data) + 1)).view(np.int64)
    text = scratch("smi-text", len(data) + 1)  # the text cells of the rows taken
    sizes = np.zeros(5, np.int64)  # taken, rest bytes, rest lines, lines, text bytes
    _pass(buf, lane.cells, lane.units, lane.unit_start, lane.unit_end, taken, values, ts_ms, rest,
          rest_lines, text, sizes)  # fmt: skip
    n, n_rest, n_left, lines, n_text = (int(v) for v in sizes)
    names = [name for c, name in enumerate(columns) if lane.cells[c] == _TEXT]
    strings = pl.read_csv(
        text[:n_text].tobytes(), has_header=False, separator=TEXT_SEPARATOR, quote_char=None,
        comment_prefix=None, schema=dict.fromkeys(names, pl.String), empty_string_is_null=False,
        raise_if_empty=False,
    ) if names and n else pl.DataFrame(schema=dict.fromkeys(names, pl.String))  # fmt: skip
    out = [pl.Series("lineno", taken[:n])]
    for c, (name, dtype) in enumerate(zip(columns, lane.dtypes, strict=True)):
        if lane.cells[c] == _TEXT:
            out.append(strings.get_column(name))
            continue
        column = ts_ms[:n] if lane.cells[c] == _TIME else values[c, :n]
        out.append(pl.Series(name, column).cast(dtype))
    out.append(pl.repeat(False, n, eager=True).alias("_suspect"))
    return Block(lines, pl.DataFrame(out), rest[:n_rest].tobytes(), rest_lines[:n_left].copy())


# ---------------------------------------------------------------------------------------------
# The compiled pass (its primitives in ``primitives``): every read is bounded by the
# line's end; a row that leaves the layout at any byte is left to the CSV reader. It is one
# loop on purpose: written as calls per row and cell that share state through small arrays, it
# ran at a third of this speed.


@numba.njit(nogil=True, cache=True)
def _pass(buf, cells, units, unit_start, unit_end, taken, values, ts_ms, rest, rest_lines, text,
          sizes):  # fmt: skip
    """Type the rows it can into rows 0, 1, ... of the outputs (their text cells into
    ``text``, each followed by a separator, a newline after a row's last), copy the others
    into ``rest``; ``sizes``: rows taken, bytes of ``rest``, rows left, lines, bytes of
    ``text``."""
    n = buf.size
    s = k = at = i = left = text_at = 0
    last_q, last_secs = -1, 0  # the last time read: where, and its seconds (a trace repeats
    # its second for 8 GPUs or more, so most times are a compare)
    while s < n:
        row_at = text_at
        q = s
        ok = True
        for c in range(cells.size):
            if c > 0:
                if q + 2 > n or buf[q] != 44 or buf[q + 1] != 32:
                    ok = False
                    break
                q += 2
            cell = cells[c]
            if cell == _TIME:  # YYYY/MM/DD HH:MM:SS(.mmm)
                if q + 19 > n:
                    ok = False
                    break
                same = last_q >= 0
                if same:
                    for j in range(18, -1, -1):  # the seconds differ first
                        if buf[q + j] != buf[last_q + j]:
                            same = False
                            break
                if not same:
                    if buf[q + 4] != 47 or buf[q + 7] != 47 or buf[q + 10] != 32:
                        ok = False
                        break
                    y, mo, d = number(buf, q, 4), number(buf, q + 5, 2), number(buf, q + 8, 2)
                    secs = clock(buf, q + 11)
                    if y < 1 or not (1 <= mo <= 12) or d < 1 or d > month_days(y, mo) or secs < 0:
                        ok = False
                        break
                    last_q, last_secs = q, days_from_civil(y, mo, d) * 86400 + secs
                q += 19
                ms = 0
                if q < n and buf[q] == 46:
                    ms = number(buf, q + 1, 3) if q + 4 <= n else -1
                    if ms < 0:
                        ok = False
                        break
                    q += 4
                ts_ms[k] = last_secs * 1000 + ms
                continue
            if cell == _TEXT:  # as the reader keeps it: no space at either end, printable
                start = q  # ASCII, neither [...] nor N/A
                while q < n and buf[q] != 44 and buf[q] != 10:
                    if buf[q] < 32 or buf[q] > 126:
                        ok = False
                        break
                    q += 1
                if (
                    not ok
                    or q == start
                    or buf[start] == 32
                    or buf[q - 1] == 32
                    or buf[start] == 91
                    or (q - start == 3 and buf[start] == 78 and buf[start + 1] == 47
                        and buf[start + 2] == 65)
                ):  # fmt: skip
                    ok = False
                    break
                text_at = copy(buf, start, q, text, text_at)
                text[text_at] = 31
                text_at += 1
                continue
            mantissa, digits, scale = 0, 0, -1  # a plain number (see primitives)
            while q < n:
                b = buf[q]
                if 48 <= b <= 57:
                    mantissa = mantissa * 10 + (b - 48)
                    digits += 1
                    if scale >= 0:
                        scale += 1
                elif b == 46 and cell != _INT and scale < 0 and digits > 0:
                    scale = 0
                else:
                    break
                q += 1
            if digits == 0 or scale == 0 or digits > (9 if cell == _INT else MAX_DECIMAL_DIGITS):
                ok = False  # an Int32 index has at most 9 digits
                break
            if cell == _UNIT:  # a space, then the column's unit
                u0, u1 = unit_start[c], unit_end[c]
                if q + 1 + u1 - u0 > n or buf[q] != 32:
                    ok = False
                    break
                q += 1
                for j in range(u1 - u0):
                    if buf[q + j] != units[u0 + j]:
                        ok = False
                        break
                if not ok:
                    break
                q += u1 - u0
            values[c, k] = mantissa / POW10[max(scale, 0)]
        if ok and (q == n or buf[q] == 10):
            taken[k] = i
            k += 1
            if text_at > row_at:
                text[text_at - 1] = 10  # the row's last separator ends its line
            e = q
        else:
            text_at = row_at
            e = s
            while e < n and buf[e] != 10:
                e += 1
            rest_lines[left] = i
            left += 1
            at = copy(buf, s, e, rest, at)
            rest[at] = 10
            at += 1
        i += 1
        s = e + 1
    sizes[0] = k
    sizes[1] = at
    sizes[2] = left
    sizes[3] = i
    sizes[4] = text_at
