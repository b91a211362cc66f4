"""A Prometheus HTTP API answer saved to a file: ``/api/v1/query_range`` (or ``/query``).

``{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {"__name__":
…, labels…}, "values": [[1716672021.123, "3"], …]}, …]}}``; an instant query's ``vector``
holds one ``"value"`` pair per series. Times are Unix seconds, read as UTC without a zone
(set ``clock_offset_s`` in ``run.toml`` when the log prints another zone). Values are strings
(``"NaN"``, ``"+Inf"`` included). Without ``# TYPE`` lines a series' kind comes from its name
(``exposition.resolve``); a series without ``__name__`` (a ``rate(…)``) is a gauge named
``(unnamed)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError, UnknownFormat, UnsupportedCompression
from toolkit.load import compression
from toolkit.load.inputs import check_input, head_lines
from toolkit.load.jsonl import check_text
from toolkit.load.prometheus.exposition import Sample, resolve
from toolkit.load.prometheus.tally import Tally

__all__ = ["MAX_BYTES", "UNNAMED", "is_query_result", "query_samples"]

MAX_BYTES = 512 << 20
"""An API answer larger than this is refused (it is read whole)."""
UNNAMED = "(unnamed)"
_KINDS = ("matrix", "vector")
_HEAD = re.compile(r'"resultType"\s*:\s*"(?:matrix|vector)"')


def is_query_result(path: Path) -> bool:
    """True when the file begins like a Prometheus API answer with a matrix or vector."""
    head = head_lines(path, n=50, max_bytes=64 << 10)
    if not head or not head[0].lstrip().startswith("{"):
        return False
    text = "\n".join(head)
    return bool(_HEAD.search(text)) and '"status"' in text


def query_samples(
    path: Path, skipped: Tally, *, strict: bool = False
) -> Iterator[tuple[datetime, Sample]]:
    """(time, sample) of every value of every series of the answer.

    Raises
    ------
    ParseError
        The file is no successful matrix or vector answer; with ``strict`` also for one bad
        series or value (else counted in ``skipped``).
    """
    path = check_input(path)
    if path.stat().st_size > MAX_BYTES:
        raise ParseError(path, None, "too large for a Prometheus API answer (over 512 MiB)")
    try:
        text = compression.head_bytes(path, MAX_BYTES + 1).decode("utf-8", "replace")
        data = json.loads(text)
    except UnsupportedCompression:
        raise
    except (UnknownFormat, ValueError, RecursionError) as e:
        raise ParseError(path, None, f"not a JSON document ({str(e)[:80]})") from None
    if not isinstance(data, dict):
        raise ParseError(path, None, "not a JSON object")
    check_text(text, data, path)
    body = data.get("data")
    kind = body.get("resultType") if isinstance(body, dict) else None
    if data.get("status") != "success" or not isinstance(body, dict) or kind not in _KINDS:
        why = str(data.get("error") or "")[:120]
        raise ParseError(
            path, None, f"not a successful matrix or vector answer{f': {why}' if why else ''}"
        )
    result = body.get("result")
    if not isinstance(result, list):
        raise ParseError(path, None, 'no "result" list in "data"')
    for i, series in enumerate(result):
        where = f"{path}: result {i}"
        labels, pairs = _series(series, kind)
        if labels is None or pairs is None:
            if strict:
                raise ParseError(path, None, f"result {i}: no series of [time, value] pairs")
            skipped.add("bad result", where)
            continue
        name = labels.pop("__name__", UNNAMED)
        found = resolve(name, {})
        if found is None:  # a histogram's bucket or a _created series: no measurement here
            skipped.add("created" if name.endswith("_created") else "bucket", n=len(pairs))
            continue
        metric, kind_of, part = found
        for j, pair in enumerate(pairs):
            point = _point(pair)
            if point is None:
                if strict:
                    raise ParseError(path, None, f"result {i}, value {j}: no [time, number]")
                skipped.add("bad value", f"{where}, value {j}")
                continue
            ts, value = point
            if value != value or value in (float("inf"), float("-inf")):
                skipped.add("non-finite")
                continue
            yield ts, Sample(metric, kind_of, part, labels, value)


def _series(series: Any, kind: str) -> tuple[dict[str, str] | None, list[Any] | None]:
    if not isinstance(series, dict):
        return None, None
    labels = series.get("metric")
    if not isinstance(labels, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
    ):
        return None, None
    pairs = series.get("values") if kind == "matrix" else [series.get("value")]
    return (dict(labels), pairs) if isinstance(pairs, list) else (None, None)


def _point(pair: Any) -> tuple[datetime, float] | None:
    if not isinstance(pair, list) or len(pair) != 2:
        return None
    stamp, text = pair
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not isinstance(text, str):
        return None
    try:
        value = float(text)
        ts = datetime.fromtimestamp(stamp, UTC).replace(tzinfo=None)
    except (ValueError, OverflowError, OSError):
        return None
    return ts, value
