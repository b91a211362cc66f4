"""The lines most of a log is made of, typed by one compiled pass over a chunk's bytes.

A steady-state SGLang log is mostly ``Decode batch`` / ``Prefill batch`` lines and uvicorn
access lines behind one wrapper. ``scan`` reads each line once and takes it only when it is
printable ASCII of exactly the common form: the file's wrapper (none, or journald ``short`` /
``short-precise``), a dated ``[date time(.mmm)( TAGn)*]`` prefix at its start, then a batch
message of one of the file's sampled shapes with plain values (``12``, ``0.07``, ``True``), or
an access line. ``rows`` gives such a line the row ``plan.line_plan`` gives it; every other line
is left to the plan. The lane narrows where a line is typed, never what it becomes: a test holds
the two equal on every fixture and on generated lines near each boundary.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from toolkit.load.compiled.primitives import MAX_DECIMAL_DIGITS, POW10, loads, scratch
from toolkit.load.compiled.primitives import clock as _clock
from toolkit.load.compiled.primitives import copy as _copy
from toolkit.load.compiled.primitives import days_from_civil as _days
from toolkit.load.compiled.primitives import digit as _digit
from toolkit.load.compiled.primitives import month_days as _month_days
from toolkit.load.compiled.primitives import number as _number
from toolkit.load.compiled.primitives import starts_with as _same
from toolkit.load.sglang.batch_line import GRAPH_LABELS, KEY_COLUMN

WRAPPER_CODES = {"raw": 0, "journald-short": 15, "journald-short-precise": 22}
KINDS = ("decode", "prefill", "http")
_INT, _FLOAT, _BOOL = 0, 1, 2
_MONTHS = np.frombuffer(b"JanFebMarAprMayJunJulAugSepOctNovDec", np.uint8)
_TAG_TEXT = np.frombuffer(b"ATTN_CPMOE_DP", np.uint8)  # the rank tags of more than two letters
_HEADS = (b"Decode batch", b"Prefill batch", b"INFO:")
_HEAD_TEXT = np.frombuffer(b"".join(_HEADS), np.uint8)
_HEAD_END = np.cumsum([len(h) for h in _HEADS]).astype(np.int64)
_ACCESS = np.frombuffer(b' - "', np.uint8)
_BOOLS = np.frombuffer(b"TrueFalse", np.uint8)


@dataclass(frozen=True)
class Shapes:
    """The file's sampled batch shapes as flat arrays for the compiled pass."""

    kinds: np.ndarray  # per shape: 0 decode, 1 prefill
    key_start: np.ndarray  # per shape: its first key (index into the key arrays), plus the end
    text: np.ndarray  # every key's printed text, one after the other
    text_end: np.ndarray  # per key: where its text ends in ``text``
    column: np.ndarray  # per key: its column among ``columns``
    vtype: np.ndarray  # per key: _INT, _FLOAT or _BOOL
    pct: np.ndarray  # per key: a trailing ``%`` is dropped first
    holds: np.ndarray  # per shape and a last row for no shape, per column: a key of it
    device: tuple[str | None, ...]  # per shape, then None: the device of its graph key
    columns: tuple[str, ...]


def shape_table(shapes: list[tuple[str, tuple[str, ...]]]) -> Shapes | None:
    """The shapes as arrays, or None when one holds a type the lane does not read."""
    types = {pl.Int64: _INT, pl.Float64: _FLOAT, pl.Boolean: _BOOL}
    fields = [KEY_COLUMN[k] for _, keys in shapes for k in keys]
    if any(not keys for _, keys in shapes) or any(f.dtype not in types for f in fields):
        return None
    columns = tuple(dict.fromkeys(f.column for f in fields))
    keys = [k for _, ks in shapes for k in ks]
    if not all(k.isascii() for k in keys):
        return None
    holds = np.zeros((len(shapes) + 1, len(columns)), np.bool_)
    for j, (_, ks) in enumerate(shapes):
        for k in ks:
            holds[j, columns.index(KEY_COLUMN[k].column)] = True
    return Shapes(
        kinds=np.array([0 if kind == "decode" else 1 for kind, _ in shapes], np.int64),
        key_start=np.cumsum([0] + [len(ks) for _, ks in shapes]).astype(np.int64),
        text=np.frombuffer("".join(keys).encode() or b"\0", np.uint8),
        text_end=np.cumsum([len(k) for k in keys]).astype(np.int64),
        column=np.array([columns.index(f.column) for f in fields], np.int64),
        vtype=np.array([types[f.dtype] for f in fields], np.int64),
        pct=np.array([f.column.endswith("_pct") for f in fields], np.bool_),
        holds=holds,
        device=(
            *(next((k.split()[0] for k in ks if k in GRAPH_LABELS), None) for _, ks in shapes),
            None,
        ),
        columns=columns,
    )


@dataclass(frozen=True)
class Lane:
    """What the pass made of a chunk: the lines it took, in order (their index in the chunk and
    their fields), their text fields as ``ranks␟header␟message`` lines, and the bytes of the
    lines it left, with their indexes."""

    line: np.ndarray
    kind: np.ndarray
    shape: np.ndarray  # -1 for an access line
    wrapper_us: np.ndarray
    ts_ms: np.ndarray
    values: np.ndarray  # per column: an integer, or a float's bits
    text: bytes
    left: bytes
    left_line: np.ndarray


def scan(data: bytes, lines: int, wrapper: str, year: int | None, table: Shapes) -> Lane:
    """Run the compiled pass over the first ``lines`` lines of ``data``."""
    buf = np.frombuffer(data, np.uint8)
    line = np.empty(lines, np.int64)
    kind = np.empty(lines, np.int8)
    shape = np.empty(lines, np.int8)
    wrapper_us = np.empty(lines, np.int64)
    ts_ms = np.empty(lines, np.int64)
    values = np.empty((len(table.columns), lines), np.int64)  # a column a shape lacks is masked
    text = scratch("text", len(data) + 2 * lines)
    left = scratch("left", len(data) + 1)
    left_line = np.empty(lines, np.int64)
    sizes = np.zeros(3, np.int64)  # lines taken, bytes of text, bytes left
    _scan(
        buf, lines, WRAPPER_CODES[wrapper], -1 if year is None else year,
        table.kinds, table.key_start, table.text, table.text_end, table.column, table.vtype,
        table.pct,
        line, kind, shape, wrapper_us, ts_ms, values, values.view(np.float64), text, left,
        left_line, sizes,
    )  # fmt: skip
    n, n_text, n_left = (int(v) for v in sizes)
    return Lane(
        line[:n], kind[:n], shape[:n], wrapper_us[:n], ts_ms[:n], values[:, :n],
        text[:n_text].tobytes(), left[:n_left].tobytes(), left_line[: lines - n],
    )  # fmt: skip


TEXT_SEPARATOR = "\x1f"  # a taken line is printable ASCII: it holds none


@functools.cache
def ready() -> bool:
    """The compiled pass is loaded (from numba's cache, else compiled): a one-line scan."""
    table = shape_table([])
    assert table is not None
    return loads("log-line", lambda: scan(b"x\n", 1, "raw", None, table))


def rows(lane: Lane, first_lineno: int, table: Shapes, schema: pl.Schema, *, wrapper: str,
         year: int | None) -> pl.DataFrame:  # fmt: skip
    """The plan's rows (``schema``) of the lines ``lane`` took."""
    width = WRAPPER_CODES[wrapper]
    shape = lane.shape.astype(np.int64)
    shape[shape < 0] = len(table.device) - 1  # no shape: the last row of ``holds``, ``device``
    held = table.holds[shape]
    names = ["ranks", "header", "message"] if width else ["ranks", "message"]
    strings = pl.read_csv(
        lane.text, has_header=False, separator=TEXT_SEPARATOR, quote_char=None,
        comment_prefix=None, schema=dict.fromkeys(names, pl.String), empty_string_is_null=False,
    )  # fmt: skip
    columns = [
        *strings.iter_columns(),
        pl.Series("lineno", lane.line + first_lineno),
        pl.Series("ts", lane.ts_ms).cast(pl.Datetime("ms")),
        pl.Series("wrapper_ts", lane.wrapper_us).cast(pl.Datetime("us")),
        pl.Series("kind", KINDS, dtype=pl.String).gather(lane.kind),
    ]
    if "graph_device" in schema:
        columns.append(pl.Series("graph_device", table.device, dtype=pl.String).gather(shape))
    for c, name in enumerate(table.columns):
        values = lane.values[c]
        values = values.view(np.float64) if schema[name] == pl.Float64 else values
        columns += [pl.Series(name, values), pl.Series(f"_held{c}", held[:, c])]
    out: dict[str, pl.Expr] = {
        **{c.name: pl.col(c.name) for c in columns},
        "odd": pl.lit(False),
        "has_prefix": pl.lit(True),
        "glued": pl.lit(False),  # the lane takes only lines that start with the prefix
        "unresolved": pl.lit(False),
        **{
            name: pl.when(pl.col(f"_held{c}")).then(pl.col(name))
            for c, name in enumerate(table.columns)
        },
    }
    if not width or year is None:
        del out["wrapper_ts"]
    return pl.DataFrame(columns).select(
        (out[name] if name in out else pl.lit(None)).cast(dtype).alias(name)
        for name, dtype in schema.items()
    )


# ---------------------------------------------------------------------------------------------
# The compiled pass (its primitives in ``primitives``). Every read is checked against
# the line's end; a line that leaves the common form at any byte is not taken.


@numba.njit(nogil=True, cache=True)
def _month(buf, p):
    """1-12 for the English month abbreviation at ``p``, else 0."""
    for k in range(12):
        m = 3 * k
        if buf[p] == _MONTHS[m] and buf[p + 1] == _MONTHS[m + 1] and buf[p + 2] == _MONTHS[m + 2]:
            return k + 1
    return 0


@numba.njit(nogil=True, cache=True)
def _tag(buf, q, n):
    """Length of the rank tag (DP, PP, TP, EP, ATTN_CP, MOE_DP) at ``q``, else 0."""
    c = buf[q]
    if (c == 68 or c == 80 or c == 84 or c == 69) and q + 1 < n and buf[q + 1] == 80:
        return 2
    if c == 65 and _same(buf, q, n, _TAG_TEXT, 0, 7):
        return 7
    if c == 77 and _same(buf, q, n, _TAG_TEXT, 7, 13):
        return 6
    return 0


@numba.njit(nogil=True, cache=True)
def _access_end(buf, q, n):
    """The end of a line from ``q`` that holds `` - "`` (uvicorn's access line) and is
    printable ASCII, else -1."""
    found = False
    while q < n and buf[q] != 10:
        if buf[q] < 32 or buf[q] > 126:
            return -1
        if not found and buf[q] == 32 and _same(buf, q, n, _ACCESS, 0, 4):
            found = True
        q += 1
    return q if found else -1


@numba.njit(nogil=True, cache=True)
def _scan(buf, lines, width, year, kinds, key_start, text, text_end, column, vtype, pct,
          line, kind, shape, wrapper_us, ts_ms, ints, floats, out, left, left_line,
          sizes):  # fmt: skip
    """Type the lines it can into rows 0, 1, ... of the outputs and their text into ``out``,
    copy the others into ``left``; ``sizes``: lines taken, bytes of ``out`` and ``left``.

    One loop on purpose: written as calls per line and field that share state through small
    arrays, it ran at a third of this speed. Each step leaves ``ok`` false (or ``end`` -1) at
    the first byte that is not of the common form, and the line is then left.
    """
    n = buf.size
    s = taken = at = held = 0
    for i in range(lines):
        end = -1
        p = s  # where the SGLang line starts
        ok = True
        if width:  # journald: ``Mon DD HH:MM:SS(.uuuuuu) host ident[pid]: ``
            ok = s + width + 3 <= n and buf[s + 3] == 32 and buf[s + 6] == 32
            ok = ok and buf[s + width] == 32
            if ok:
                month = _month(buf, s)
                d1, d2 = buf[s + 4], _digit(buf[s + 5])
                day = d2 if d1 == 32 else 10 * _digit(d1) + d2
                ok = month > 0 and d2 >= 0 and 1 <= day <= 31 and (d1 == 32 or _digit(d1) >= 1)
            if ok:
                secs = _clock(buf, s + 7)
                micros = 0
                if width == 22:
                    micros = _number(buf, s + 16, 6)
                    ok = buf[s + 15] == 46 and micros >= 0
            if ok:
                colon = s + width  # no ": " before: the time has none, and a space follows it
                while colon + 1 < n and not (buf[colon] == 58 and buf[colon + 1] == 32):
                    if buf[colon] < 32 or buf[colon] > 126:  # the line's end, or not ASCII
                        ok = False
                        break
                    colon += 1
                ok = ok and secs >= 0 and colon + 1 < n and colon - s > width
            if ok and year >= 0:
                ok = day <= _month_days(year, month)
                stamp = (_days(year, month, day) * 86400 + secs) * 1_000_000 + micros
                wrapper_us[taken] = stamp
            p = colon + 2 if ok else -1
        # ``[YYYY-MM-DD HH:MM:SS(.mmm)( TAGn)*] ``
        ok = ok and p + 23 <= n and buf[p] == 91 and buf[p + 5] == 45 and buf[p + 8] == 45
        ok = ok and buf[p + 11] == 32
        if ok:
            y, mo, d = _number(buf, p + 1, 4), _number(buf, p + 6, 2), _number(buf, p + 9, 2)
            secs = _clock(buf, p + 12)
            ok = not (y < 1 or not (1 <= mo <= 12) or d < 1 or d > _month_days(y, mo) or secs < 0)
        if ok:
            q = p + 20
            ms = 0
            if buf[q] == 46:
                ok = q + 5 <= n
                if ok:
                    ms = _number(buf, q + 1, 3)
                    ok = ms >= 0 and _digit(buf[q + 4]) < 0
                    q += 4
        if ok:
            ranks = q
            while q + 1 < n and buf[q] == 32:
                size = _tag(buf, q + 1, n)
                q += 1 + size
                if size == 0 or q >= n or _digit(buf[q]) < 0:
                    ok = False
                    break
                while q < n and _digit(buf[q]) >= 0:
                    q += 1
            ok = ok and q + 2 < n and buf[q] == 93 and buf[q + 1] == 32
        if ok:
            ranks_end = q
            ts_ms[taken] = (_days(y, mo, d) * 86400 + secs) * 1000 + ms
            m = q + 2  # the message
            for h in range(3):
                h0 = 0 if h == 0 else _HEAD_END[h - 1]
                if not _same(buf, m, n, _HEAD_TEXT, h0, _HEAD_END[h]):
                    continue
                after = m + _HEAD_END[h] - h0
                j = -1
                if h == 2:
                    end = _access_end(buf, after, n)
                elif (
                    after + 2 <= n
                    and (buf[after] == 44 or buf[after] == 46)
                    and buf[after + 1] == 32
                ):
                    # ``key: value, ...`` of the first shape the tail is, typed into this row
                    plain = True
                    for js in range(len(kinds)):
                        if kinds[js] != h:
                            continue
                        q = after + 2
                        fits = True
                        for k in range(key_start[js], key_start[js + 1]):
                            if k > key_start[js]:
                                if q + 2 > n or buf[q] != 44 or buf[q + 1] != 32:
                                    fits = False
                                    break
                                q += 2
                            t0 = 0 if k == 0 else text_end[k - 1]
                            if not _same(buf, q, n, text, t0, text_end[k]):
                                fits = False
                                break
                            q += text_end[k] - t0
                            if q + 2 > n or buf[q] != 58 or buf[q + 1] != 32:
                                fits = False
                                break
                            q += 2
                            if vtype[k] == _BOOL:
                                if _same(buf, q, n, _BOOLS, 0, 4):
                                    ints[column[k], taken] = 1
                                    q += 4
                                elif _same(buf, q, n, _BOOLS, 4, 9):
                                    ints[column[k], taken] = 0
                                    q += 5
                                else:
                                    plain = False
                                    break
                                continue
                            floating = vtype[k] == _FLOAT
                            mantissa, digits, scale = 0, 0, -1  # a plain number (see primitives)
                            while q < n:
                                b = buf[q]
                                if 48 <= b <= 57:
                                    mantissa = mantissa * 10 + (b - 48)  # wraps past 18 digits
                                    digits += 1
                                    if scale >= 0:
                                        scale += 1
                                elif b == 46 and floating and scale < 0 and digits > 0:
                                    scale = 0
                                else:
                                    break
                                q += 1
                            if (
                                digits == 0
                                or scale == 0
                                or digits > (MAX_DECIMAL_DIGITS if floating else 18)
                            ):
                                plain = False  # none, none after the point, or too many
                                break
                            if pct[k] and q < n and buf[q] == 37:
                                q += 1
                            if floating:
                                floats[column[k], taken] = mantissa / POW10[max(scale, 0)]
                            else:
                                ints[column[k], taken] = mantissa
                        if not plain:  # the keys fit but a value is not plain: the plan decides
                            break
                        if fits:
                            if q == n or buf[q] == 10:
                                j, end = js, q
                                break
                            if (
                                q + 2 <= n
                                and buf[q] == 44
                                and buf[q + 1] == 32
                                and (q + 2 == n or buf[q + 2] == 10)
                            ):
                                j, end = js, q + 2
                                break
                if end >= 0:
                    line[taken] = i
                    kind[taken] = h
                    shape[taken] = j
                    taken += 1
                    at = _copy(buf, ranks, ranks_end, out, at)
                    out[at] = 31
                    at += 1
                    if width:
                        at = _copy(buf, s + width + 1, p - 2, out, at)
                        out[at] = 31
                        at += 1
                    at = _copy(buf, m, end, out, at)
                    out[at] = 10
                    at += 1
                break
        if end < 0:
            end = s
            while end < n and buf[end] != 10:
                end += 1
            left_line[i - taken] = i
            held = _copy(buf, s, end, left, held)
            left[held] = 10
            held += 1
        s = end + 1
    sizes[0] = taken
    sizes[1] = at
    sizes[2] = held
