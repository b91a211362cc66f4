"""AIPerf ``profile_export.jsonl``: one record per request, with absolute start times.

Each line is ``{"metadata": {"request_start_ns", "request_end_ns", "benchmark_phase", ...},
"metrics": {name: {"value", "unit"}}, "error": null | {...}}``. The records become the requests
table (``ts`` is the epoch start, as local time like AIPerf's own ``start_time``), and one run
row summarizes them: counts, tokens over the span from the first start to the last end, and
latency statistics (numpy's default linear percentiles). AIPerf's own summary JSON in the same
directory is preferred for the run row; ``load_bench`` then attaches these requests to it.
Warm-up records (``benchmark_phase`` other than ``profiling``) are left out.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError
from toolkit.load.bench.common import Parsed, from_epoch_ns, json_lines, num, to_ms, whole
from toolkit.load.bench.nvidia import ARTIFACT_CONCURRENCY
from toolkit.load.damage import damaged

COMPUTED = "per-request records"  # extra["computed_from"] of a run summarized here
_LATENCIES = {
    "time_to_first_token": "ttft",
    "request_latency": "e2e",
    "inter_token_latency": "tpot",  # per-request TPOT, see METRIC_GLOSSARY
}


def is_record(obj: Any) -> bool:
    """True for one line of an AIPerf per-request export."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    return isinstance(meta, dict) and "request_start_ns" in meta and "metrics" in obj


def read_records(path: Path, text: str) -> list[Parsed]:
    """The one run of a per-request export, with its requests.

    A line that is no request record, or whose parts have the wrong types, is ``damaged``
    (named with its line while damage is collected, else raised) and the others are read.
    """
    records = []
    for lineno, obj in json_lines(path, text):
        try:
            if not is_record(obj):
                raise ParseError(path, lineno, "not an AIPerf request record", json.dumps(obj))
            _check(path, lineno, obj)
        except ParseError as e:
            damaged(e)
            continue
        if obj["metadata"].get("benchmark_phase", "profiling") == "profiling":
            records.append(obj)
    if not records:
        raise ParseError(path, None, "no profiling records")
    out = Parsed(lineno=1)
    starts = [_ns(r["metadata"].get("request_start_ns")) for r in records]
    first = min((s for s in starts if s is not None), default=None)
    samples: dict[str, list[float]] = {name: [] for name in (*_LATENCIES.values(), "itl")}
    for i, (record, start) in enumerate(zip(records, starts, strict=True)):
        metrics = record.get("metrics") or {}
        row = _request(i, record, metrics, start, first)
        out.requests.append(row)
        if not row["ok"]:
            continue
        for key, name in _LATENCIES.items():
            value = _value(metrics, key)
            if value is not None:
                samples[name].append(value)
        gaps = (metrics.get("inter_chunk_latency") or {}).get("value")
        if isinstance(gaps, list):
            unit = metrics["inter_chunk_latency"].get("unit")
            samples["itl"].extend(x for x in (to_ms(g, unit) for g in gaps) if x is not None)
    _summarize(out, records, samples)
    if ARTIFACT_CONCURRENCY.search(path.parent.name):
        out.hint, out.hint_from = path.parent.name, "path"
    out.export = "records"
    return [out]


def _check(path: Path, lineno: int, record: dict[str, Any]) -> None:
    """A record's parts have the types the reader relies on, else a ``ParseError`` naming the
    field: ``metrics`` an object of ``{"value", "unit"}`` objects, units text."""
    metrics = record.get("metrics")
    if metrics is None:
        return
    if not isinstance(metrics, dict):
        raise ParseError(path, lineno, f"'metrics' must be an object, not {_kind(metrics)}")
    for name, entry in metrics.items():
        if entry is None:
            continue
        if not isinstance(entry, dict):
            raise ParseError(path, lineno, f"metric {name!r} must be an object, not {_kind(entry)}")
        unit = entry.get("unit")
        if unit is not None and not isinstance(unit, str):
            raise ParseError(
                path, lineno, f"unit of metric {name!r} must be text, not {_kind(unit)}"
            )


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


def _ns(value: Any) -> int | None:
    """An epoch time in ns, or None (also for a number no clock reaches)."""
    return whole(value) if from_epoch_ns(value) is not None else None


def _value(metrics: dict[str, Any], key: str) -> float | None:
    entry = metrics.get(key)
    if not isinstance(entry, dict):
        return None
    unit = entry.get("unit")
    if unit in ("tokens", "count", "requests"):
        return num(entry.get("value"))
    return to_ms(entry.get("value"), unit)


def _request(
    i: int, record: dict[str, Any], metrics: dict[str, Any], start: int | None, first: int | None
) -> dict[str, Any]:
    meta = record["metadata"]
    error = record.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    gaps = (metrics.get("inter_chunk_latency") or {}).get("value")
    unit = (metrics.get("inter_chunk_latency") or {}).get("unit")
    itl = [x for x in (to_ms(g, unit) for g in gaps) if x is not None] if gaps else []
    return {
        "request": i,
        "ts": from_epoch_ns(start),
        "start_s": None if start is None or first is None else (start - first) / 1e9,
        "ttft_ms": _value(metrics, "time_to_first_token"),
        "e2e_ms": _value(metrics, "request_latency"),
        "itl_mean_ms": sum(itl) / len(itl) if itl else None,
        "input_len": whole(_value(metrics, "input_sequence_length")),
        "output_len": whole(_value(metrics, "output_sequence_length")),
        "ok": error is None and not meta.get("was_cancelled"),
        "error": None if error is None else str(message or error),
    }


def _summarize(out: Parsed, records: list[dict[str, Any]], samples: dict[str, list]) -> None:
    values = out.values
    ok = [r for r in out.requests if r["ok"]]
    values["completed"] = len(ok)
    values["failed"] = len(out.requests) - len(ok)
    starts = [_ns(r["metadata"].get("request_start_ns")) for r in records]
    ends = [_ns(r["metadata"].get("request_end_ns")) for r in records]
    starts = [s for s in starts if s is not None]
    ends = [e for e in ends if e is not None]
    duration = (max(ends) - min(starts)) / 1e9 if starts and ends else None
    values["duration_s"] = duration if duration and duration > 0 else None
    values["total_input_tokens"] = sum(r["input_len"] or 0 for r in ok)
    values["total_output_tokens"] = sum(r["output_len"] or 0 for r in ok)
    if values["duration_s"]:
        values["output_tok_s"] = values["total_output_tokens"] / values["duration_s"]
        values["request_per_s"] = len(ok) / values["duration_s"]
    values["ts"] = from_epoch_ns(min(starts)) if starts else None
    for name, xs in samples.items():
        if xs:
            values.update({f"{name}_{stat}_ms": v for stat, v in _stats(xs).items()})
    out.extra["computed_from"] = COMPUTED


def _stats(xs: list[float]) -> dict[str, float]:
    ordered = sorted(x for x in xs if abs(x) < 1e15)  # ms: beyond 30 years no clock measured it
    if not ordered:
        return {}
    return {
        "mean": statistics.fmean(ordered),
        "median": _percentile(ordered, 50),
        "p90": _percentile(ordered, 90),
        "p95": _percentile(ordered, 95),
        "p99": _percentile(ordered, 99),
        "std": statistics.pstdev(ordered),
    }


def _percentile(ordered: list[float], q: float) -> float:
    """numpy's default ("linear") percentile of sorted values."""
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
