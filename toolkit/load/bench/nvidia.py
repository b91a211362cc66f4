"""NVIDIA GenAI-Perf and AIPerf exports: the summary CSV and the summary JSON.

* ``profile_export_genai_perf.csv`` / ``profile_export_aiperf.csv``: sections separated by blank
  lines; a ``Metric,avg,min,max,p99,...`` table of per-request metrics (units in the metric
  name, values ``f"{x:,.2f}"``, so ``"1,525.00"`` arrives quoted), then ``Metric,Value`` rows,
  then GPU telemetry, which is skipped. The CSV does not say the concurrency; GenAI-Perf puts
  it in the artifact directory name (``...-concurrency8``), which is used when present.
* ``profile_export_genai_perf.json``: ``{metric: {"unit", "avg", "p50", ...}, "input_config":
  {... "concurrency": 8 ...}}``. AIPerf's ``profile_export_aiperf.json`` is the same idea with
  the metrics at the top level (newer) or under ``records`` (older) and the concurrency under
  ``input_config.loadgen``.

GenAI-Perf and AIPerf "Inter Token Latency" is per request ``(latency - TTFT) / (tokens - 1)``,
which is what SGLang and vLLM call TPOT, so it is stored as ``tpot_*`` (see METRIC_GLOSSARY).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import ParseError
from toolkit.load.bench.collect import result_format
from toolkit.load.bench.common import (
    Parsed,
    csv_rows,
    find_key,
    num,
    parse_json,
    to_ms,
    whole,
)
from toolkit.load.bench.format import FILE, Options, Peek, file_text

# Metric (lower case, spaces) → (column or latency metric, kind).
_METRICS: dict[str, tuple[str, str]] = {
    "time to first token": ("ttft", "latency"),
    "request latency": ("e2e", "latency"),
    "inter token latency": ("tpot", "latency"),
    "output sequence length": ("output_len", "mean"),
    "input sequence length": ("input_len", "mean"),
    "num output token": ("output_len", "mean"),  # early GenAI-Perf names
    "num input token": ("input_len", "mean"),
    "output token throughput": ("output_tok_s", "value"),
    "total token throughput": ("total_tok_s", "value"),
    "request throughput": ("request_per_s", "value"),
    "request goodput": ("goodput_per_s", "value"),
    "goodput": ("goodput_per_s", "value"),
    "request count": ("completed", "value"),
    "error request count": ("failed", "value"),
    "benchmark duration": ("duration_s", "seconds"),
    "total isl": ("total_input_tokens", "value"),
    "total osl": ("total_output_tokens", "value"),
    "total input sequence length": ("total_input_tokens", "value"),  # AIPerf 0.8 display names
    "total output sequence length": ("total_output_tokens", "value"),
    "total output tokens": ("total_output_tokens", "value"),
    "total input tokens": ("total_input_tokens", "value"),
}
_STATS = {"avg": "mean", "p50": "median", "p90": "p90", "p95": "p95", "p99": "p99", "std": "std"}
_NOT_STATS = frozenset({"unit", "tag", "header", "count"})
_NAME_UNIT = re.compile(r"^(?P<name>.*?)\s*(?:\((?P<unit>[^()]*)\))?\s*$")
# Keys of the summary JSON that are not metrics.
_NOT_METRICS = frozenset(
    {"input_config", "records", "telemetry_data", "error_summary", "start_time", "end_time"}
)
ARTIFACT_CONCURRENCY = re.compile(r"concurrency[-_]?(\d+)", re.IGNORECASE)


# ----------------------------------------------------------------------------- CSV
def read_csv(path: Path, text: str) -> list[Parsed]:
    """The one run of a GenAI-Perf / AIPerf summary CSV."""
    out = Parsed()
    header: list[str] | None = None
    for _lineno, row in csv_rows(path, text):
        cells = [c.strip() for c in row]
        if not any(cells):
            header = None
            continue
        if cells[0].lower() == "metric":
            header = [c.lower() for c in cells]
            continue
        if header is None or "gpu" in header or "endpoint" in header:
            continue  # telemetry, or a "=== GPU Telemetry ===" title
        name, unit = _name_unit(cells[0])
        stats = {h: cells[i] for i, h in enumerate(header[1:], start=1) if i < len(cells)}
        if "value" in stats:
            stats = {"avg": stats["value"]}
        _store_metric(out, name, unit, stats)
    if not out.values and not out.extra:
        raise ParseError(path, None, "no metric rows found in the CSV")
    if ARTIFACT_CONCURRENCY.search(path.parent.name):
        out.hint, out.hint_from = path.parent.name, "path"
    out.export = "csv"
    return [out]


# ----------------------------------------------------------------------------- JSON
def read_json_text(path: Path, text: str) -> list[Parsed]:
    """The one run of a summary JSON file's text.

    Raises
    ------
    ParseError
        Text that is no JSON (with its line), or JSON that is no object.
    """
    obj = parse_json(text, path)
    if not isinstance(obj, dict):
        raise ParseError(path, None, "expected a JSON object")
    return read_json(path, obj)


def read_json(path: Path, obj: dict[str, Any]) -> list[Parsed]:
    """The one run of a GenAI-Perf or AIPerf summary JSON."""
    out = Parsed()
    for key, entry in _metric_entries(obj).items():
        if key in _NOT_METRICS or not isinstance(entry, dict):
            continue
        name, printed_unit = _name_unit(key)
        unit = entry.get("unit")
        _store_metric(out, name, unit if isinstance(unit, str) else printed_unit, entry)
    config = obj.get("input_config")
    config = config if isinstance(config, dict) else {}
    values = out.values
    values["max_concurrency"] = whole(find_key(config, "concurrency"))
    rate = find_key(config, "request_rate")
    values["request_rate"] = num(rate)
    if values["request_rate"] is None and isinstance(rate, str):
        values["request_rate_text"] = rate
    model = find_key(config, "model") or find_key(config, "model_names")
    if isinstance(model, list) and model:
        model = model[0]
    values["model"] = model if isinstance(model, str) else None
    endpoint = config.get("endpoint")
    kind = find_key(config, "endpoint_type") or (
        endpoint.get("type") if isinstance(endpoint, dict) else None
    )
    values["backend"] = kind if isinstance(kind, str) else None
    values["ts"] = _iso(obj.get("start_time"))
    for key in ("aiperf_version", "schema_version", "was_cancelled"):
        if key in obj:
            out.extra[key] = obj[key]
    if values["max_concurrency"] is None and ARTIFACT_CONCURRENCY.search(path.parent.name):
        out.hint, out.hint_from = path.parent.name, "path"
    if not any(v is not None for k, v in values.items() if k not in ("ts",)):
        raise ParseError(path, None, "no metrics found in the JSON")
    out.export = "json"
    return [out]


def _metric_entries(obj: dict[str, Any]) -> dict[str, Any]:
    """The metric dicts of a summary JSON by name: flat, under ``records`` as a dict (keyed by
    tag or, in early AIPerf, by display name), or as a list of dicts naming their ``tag``."""
    records = obj.get("records")
    if isinstance(records, dict):
        return records
    if isinstance(records, list):
        named = {}
        for entry in records:
            if isinstance(entry, dict):
                key = entry.get("tag") or entry.get("header")
                if isinstance(key, str):
                    named[key] = entry
        if named:
            return named
    return obj


def _name_unit(key: str) -> tuple[str, str | None]:
    """A metric key as ``_METRICS`` names it: ``request_throughput`` and ``Request Throughput
    (requests/sec)`` both read ``request throughput`` (the printed unit beside)."""
    m = _NAME_UNIT.match(key.replace("_", " "))
    if m is None:
        return key.replace("_", " ").lower(), None
    return " ".join(m.group("name").lower().split()), m.group("unit")


def _store_metric(out: Parsed, name: str, unit: str | None, stats: dict[str, Any]) -> None:
    """One metric: its mapped statistics into columns, every other one printed kept in
    ``extra`` by name (``output_sequence_length_p99``)."""
    known = _METRICS.get(name)
    key = name.replace(" ", "_")
    stored: set[str] = set()
    if known is None:
        avg = num(stats.get("avg", stats.get("value")))
        if avg is not None:
            out.extra[key] = avg
        stored = {"avg", "value"}
    elif known[1] == "latency":
        column = known[0]
        for stat, suffix in _STATS.items():
            if stat in stats and out.values.get(f"{column}_{suffix}_ms") is None:
                out.values[f"{column}_{suffix}_ms"] = to_ms(stats[stat], unit)
        stored = set(_STATS)
    else:
        column, kind = known
        value = num(stats.get("avg", stats.get("value")))
        if kind == "seconds" and value is not None and (unit or "").lower() in ("ms",):
            value /= 1e3
        out.values[column] = value
        stored = {"avg", "value"}
    for stat, raw in stats.items():
        if stat in stored or stat in _NOT_STATS:
            continue
        value = num(raw)
        if value is not None:
            out.extra.setdefault(f"{key}_{stat}", value)


def _iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp.replace(tzinfo=None)


def is_aiperf(obj: dict[str, Any]) -> bool:
    """True for AIPerf's summary JSON, False for GenAI-Perf's (both share metric dicts)."""
    if isinstance(obj.get("records"), dict):
        return True
    markers = ("aiperf_version", "schema_version", "benchmark_id", "was_cancelled", "error_summary")
    if any(k in obj for k in markers):
        return True
    config = obj.get("input_config")
    if isinstance(config, dict):
        command = config.get("cli_command")
        return "loadgen" in config or (isinstance(command, str) and "aiperf" in command)
    return False


def has_metric_dicts(obj: dict[str, Any]) -> bool:
    """True when the object holds GenAI-Perf/AIPerf-style ``{metric: {"avg": ...}}`` entries,
    keyed by tag (``request_throughput``) or display name (``Request Throughput``)."""
    wanted = {
        "request throughput",
        "output token throughput",
        "time to first token",
        "request latency",
        "inter token latency",
    }
    return any(
        isinstance(entry, dict)
        and ("avg" in entry or "p50" in entry)
        and _name_unit(key)[0] in wanted
        for key, entry in list(_metric_entries(obj).items())[:200]
    )


# ----------------------------------------------------------------------------- the formats
def _detect_csv(peek: Peek) -> bool:
    return peek.first.lower().startswith(("metric,", '"metric",'))


def _load_csv(path: Path, options: Options) -> list[Parsed]:
    return read_csv(path, file_text(path))


def _detect_json(peek: Peek) -> bool:
    # AIPerf's JSON holds metric dicts too: that format is asked first.
    obj = peek.json_object
    return obj is not None and has_metric_dicts(obj) and not is_aiperf(obj)


def _load_json(path: Path, options: Options) -> list[Parsed]:
    return read_json_text(path, file_text(path))


GENAI_PERF_CSV = result_format(
    "genai-perf-csv",
    "GenAI-Perf `profile_export_genai_perf.csv` (also AIPerf's CSV, same shape)",
    _detect_csv,
    _load_csv,
    FILE,
)
GENAI_PERF_JSON = result_format(
    "genai-perf-json",
    "GenAI-Perf `profile_export_genai_perf.json`: metric stats + input_config",
    _detect_json,
    _load_json,
    FILE,
)
