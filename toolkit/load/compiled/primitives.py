"""Compiled primitives for reading text straight from its bytes (numba, no GIL).

The compiled passes over log and trace lines (``log_lines``, ``smi_rows``) share
these: every read is bounded by an end the caller gives, and each returns -1 (or False) for
bytes that are not what it reads, so a pass leaves such a line to the general reader.
"""

from __future__ import annotations

import mmap
import threading
import warnings
from collections.abc import Callable

import numba
import numpy as np
from numba.core import cgutils, types
from numba.extending import intrinsic

POW10 = np.array([10.0**k for k in range(16)])  # exact: a mantissa over one is rounded once
MAX_DECIMAL_DIGITS = 15  # a mantissa below 2**53: the quotient is the nearest double
# A plain number ``\d+(\.\d+)?`` is read by a loop written out where it is used: a compiled
# call per value (a returned tuple) costs a sixth of a pass.


_THREAD = threading.local()


def scratch(name: str, size: int) -> np.ndarray:
    """A byte buffer of this thread's, kept for its next block: a pass writes a block's worth
    of bytes, and fresh pages for them cost a fifth of the pass. What is written there must be
    copied out (``tobytes``) before the thread's next pass."""
    buf = getattr(_THREAD, name, None)
    if buf is None or buf.size < size:
        buf = np.empty(size, np.uint8)
        setattr(_THREAD, name, buf)
    return buf[:size]


def mapped(shape: int | tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """An array on pages mapped for it alone (uninitialized as far as callers know), for
    outputs polars keeps without a copy.

    numpy asks for transparent huge pages for arrays of 4 MiB or more, and where the kernel's
    THP ``defrag`` setting is ``madvise`` a fault there may compact memory first: a load
    measured 0.9 s or 1.6 s by the state of memory. A mapping of its own takes 4 KiB pages as
    they are written, and pages never written cost nothing.
    """
    dims = (shape,) if isinstance(shape, int) else shape
    count = int(np.prod(dims))
    itemsize = np.dtype(dtype).itemsize
    pages = mmap.mmap(-1, max(count * itemsize, 1))
    return np.frombuffer(pages, dtype, count).reshape(dims)


def loads(name: str, probe: Callable[[], object]) -> bool:
    """Whether a compiled pass loads here (``probe`` runs it on a tiny input). One that does
    not (numba cannot compile it on this machine) is named in one warning; its lines then go
    to the general reader, which types them the same, only slower."""
    try:
        probe()
    except Exception as e:  # numba's errors and LLVM's: the general reader still works
        warnings.warn(
            f"ppscope: the compiled {name} pass does not load here ({type(e).__name__}: {e}); "
            "the general reader types every line",
            RuntimeWarning,
            stacklevel=2,
        )
        return False
    return True


@numba.njit(nogil=True, cache=True, inline="always")
def digit(b):
    return b - 48 if 48 <= b <= 57 else -1


@numba.njit(nogil=True, cache=True)
def number(buf, p, n):
    """The value of the ``n`` digits at ``p``, or -1."""
    v = 0
    for k in range(n):
        d = digit(buf[p + k])
        if d < 0:
            return -1
        v = v * 10 + d
    return v


@numba.njit(nogil=True, cache=True)
def days_from_civil(y, m, d):
    """Days from 1970-01-01 to the civil date (H. Hinnant's algorithm)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@numba.njit(nogil=True, cache=True)
def month_days(y, m):
    if m == 2:
        return 29 if (y % 4 == 0 and y % 100 != 0) or y % 400 == 0 else 28
    return 30 if m == 4 or m == 6 or m == 9 or m == 11 else 31


@numba.njit(nogil=True, cache=True)
def starts_with(buf, p, e, text, t0, t1):
    """``buf[p:]`` starts with ``text[t0:t1]`` before ``e``."""
    if p + (t1 - t0) > e:
        return False
    for k in range(t1 - t0):  # noqa: SIM110 (a compiled loop, not a generator)
        if buf[p + k] != text[t0 + k]:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def clock(buf, p):
    """Seconds of the day of ``HH:MM:SS`` at ``p``, or -1 (the caller checks the bounds)."""
    h, m, s = number(buf, p, 2), number(buf, p + 3, 2), number(buf, p + 6, 2)
    if buf[p + 2] != 58 or buf[p + 5] != 58 or not (0 <= h <= 23 and 0 <= m <= 59 and 0 <= s <= 59):
        return -1
    return h * 3600 + m * 60 + s


@intrinsic
def _memcpy(typingctx, dst, dst_at, src, src_at, size):
    """``memcpy`` of ``size`` bytes from ``src[src_at:]`` to ``dst[dst_at:]`` (uint8 arrays)."""

    def codegen(context, builder, signature, args):
        dst_v, dst_at_v, src_v, src_at_v, size_v = args
        dst_a = context.make_array(signature.args[0])(context, builder, dst_v)
        src_a = context.make_array(signature.args[2])(context, builder, src_v)
        to = builder.gep(dst_a.data, [dst_at_v])
        frm = builder.gep(src_a.data, [src_at_v])
        cgutils.raw_memcpy(builder, to, frm, size_v, 1)

    return types.void(dst, dst_at, src, src_at, size), codegen


@numba.njit(nogil=True, cache=True)
def copy(buf, start, end, out, at):
    """``buf[start:end]`` into ``out`` at ``at``; where it ends there (an array slice copy
    per field costs several times more)."""
    if start < 0 or end > buf.size or at < 0 or at + end - start > out.size:
        raise IndexError("copy out of range")
    if end > start:
        _memcpy(out, at, buf, start, end - start)
    return at + end - start
