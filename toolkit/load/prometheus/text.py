"""A saved ``/metrics`` answer (``curl host:port/metrics > metrics.txt``): exposition text as is.

SGLang's exposition carries no time, so a scrape's time comes only from a witness the capture
wrote beside it: a line with a local date-time before the text (``date '+%F %T'; curl ...``,
also ``# 2025-05-25T21:40:21``) or the ``Date:`` header of an HTTP answer saved with it
(``curl -i``; a UTC time, as Prometheus API answers are read). Several answers in one file
are several scrapes: a new one starts at each witness, and where a series of the current
scrape appears again. A scrape without a witness is untimed: ``text_scrapes`` gives it with
time None and the loader lists its values without differencing them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path

from toolkit.errors import ParseError
from toolkit.load import compression
from toolkit.load.inputs import check_input, head_lines
from toolkit.load.prometheus.tally import Tally

__all__ = ["MAX_TEXT_LINE_BYTES", "is_metrics_text", "text_scrapes"]

MAX_TEXT_LINE_BYTES = 1 << 20
"""An exposition line is a series and a value; a longer line is something else."""
_HTTP = re.compile(r"^HTTP/\d(?:\.\d)? \d{3}\b")
_TIME = re.compile(r"^#?\s*(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d{1,6})?)\s*$")
_EXPOSITION = re.compile(
    r"^# (?:HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]*\s"  # a family's comment, or a sample:
    r"|^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?[ \t]+[-+]?(?:[0-9.]+(?:[eE][-+]?\d+)?|Inf|NaN)"
    r"(?:[ \t]+-?\d+)?$"
)
_SGLANG = re.compile(r"^(?:# (?:HELP|TYPE) )?(?:sglang[:_]|sgl_router_)[a-zA-Z0-9_:]*(?:\{|\s)")


def is_metrics_text(path: Path) -> bool:
    """True when the file starts like a saved ``/metrics`` answer (exposition lines, after an
    HTTP header block or a time line) and names an SGLang series in its first lines:
    ``sglang:``, a gateway's ``sglang_`` or sgl-router's ``sgl_router_``."""
    lines = [ln.strip() for ln in head_lines(path, n=400) if ln.strip()]
    if not lines:
        return False
    first = lines[0]
    starts = _HTTP.match(first) or _TIME.match(first) or _EXPOSITION.match(first)
    return bool(starts) and any(_SGLANG.match(ln) for ln in lines)


def text_scrapes(
    path: Path, skipped: Tally, *, strict: bool = False
) -> Iterator[tuple[int, datetime | None, str]]:
    """(first line, time or None, exposition text) of every scrape of the file.

    HTTP header lines and witness lines are no samples: they are counted in ``skipped``
    (``http header``, ``time line``), as is a line too long to be exposition (``bad line``;
    with ``strict`` a ``ParseError``).
    """
    path = check_input(path)
    block: list[str] = []
    seen: set[str] = set()
    ts: datetime | None = None
    start, headers = 1, False
    for lineno, line in _lines(path, skipped, strict):
        s = line.strip()
        if _HTTP.match(s):
            yield from _flush(start, ts, block)
            block, seen, ts, start, headers = [], set(), None, lineno + 1, True
            skipped.add("http header")
            continue
        if headers:
            skipped.add("http header", n=1 if s else 0)
            if not s:
                headers, start = False, lineno + 1
            elif s.lower().startswith("date:"):
                ts = _http_date(s[5:].strip())
            continue
        stamp = _TIME.match(s)
        if stamp:
            yield from _flush(start, ts, block)
            block, seen, start = [], set(), lineno + 1
            ts = _local(stamp.group(1))
            skipped.add("time line")
            continue
        if s and s[0] != "#":
            key = s[: s.rfind("}") + 1] if "}" in s else s.split(None, 1)[0]
            if key in seen:  # the next answer, saved without a witness
                yield from _flush(start, ts, block)
                block, seen, ts, start = [], set(), None, lineno
            seen.add(key)
        block.append(line)
    yield from _flush(start, ts, block)


def _flush(
    start: int, ts: datetime | None, block: list[str]
) -> Iterator[tuple[int, datetime | None, str]]:
    if any(ln.strip() and not ln.lstrip().startswith("#") for ln in block):
        yield start, ts, "\n".join(block)


def _lines(path: Path, skipped: Tally, strict: bool) -> Iterator[tuple[int, str]]:
    """Numbered lines, each read within ``MAX_TEXT_LINE_BYTES``."""
    with compression.Stream(path) as stream:
        lineno = 0
        for lineno, raw, whole in compression.bounded_lines(stream, MAX_TEXT_LINE_BYTES):
            if not whole:
                text = raw[:200].decode("utf-8", "replace")
                if strict:
                    raise ParseError(path, lineno, "line longer than 1 MiB", text)
                skipped.add("bad line", f"{path}:{lineno}: line longer than 1 MiB")
                continue
            yield lineno, raw.decode("utf-8", "replace").rstrip("\r\n")
        if stream.problem:
            skipped.add("compressed", f"{path}: after line {lineno}: {stream.problem}")


def _http_date(value: str) -> datetime | None:
    """UTC time of an HTTP ``Date`` value; None when it is none."""
    try:
        t = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if t is None:
        return None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def _local(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace(" ", "T"))
    except ValueError:
        return None
