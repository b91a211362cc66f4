"""AIPerf's GPU telemetry (``gpu_telemetry_export.jsonl``): one JSON record per GPU per poll.

AIPerf polls DCGM exporters during a benchmark and writes each GPU's reading as
``{"timestamp_ns", "gpu_index", "gpu_uuid", "gpu_model_name", "pci_bus_id", "hostname",
"dcgm_url", "telemetry_data": {"gpu_utilization", "gpu_power_usage", "sm_clock_frequency",
"gpu_memory_used", …}}``. Records of several hosts and GPUs interleave; each is one sample,
told apart by host and UUID. ``timestamp_ns`` is nanoseconds since the epoch, read as UTC.
AIPerf prints memory in GB and energy in MJ (its display units): they are turned back into the
declared MiB and mJ. Telemetry keys ppscope does not know are kept as ``aiperf_<key>`` columns;
a line that is no record is skipped with its reason.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import rows_frame, trace_summarizer
from toolkit.schema.gpu import SKIPPED, UNAVAILABLE

FORMAT = "aiperf-gpu-telemetry"

_MIB_PER_GB = 1e9 / 2**20
TELEMETRY: dict[str, tuple[str, float]] = {
    "gpu_utilization": ("util_pct", 1.0),
    "memory_copy_utilization": ("mem_util_pct", 1.0),
    "gpu_power_usage": ("power_w", 1.0),
    "gpu_power_limit": ("power_limit_w", 1.0),
    "energy_consumption": ("energy_mj", 1e9),  # MJ as AIPerf prints it
    "sm_clock_frequency": ("sm_clock_mhz", 1.0),
    "memory_clock_frequency": ("mem_clock_mhz", 1.0),
    "gpu_memory_used": ("mem_used_mib", _MIB_PER_GB),  # GB as AIPerf prints it
    "gpu_memory_free": ("mem_free_mib", _MIB_PER_GB),
    "total_gpu_memory": ("mem_total_mib", _MIB_PER_GB),
    "gpu_temperature": ("temp_c", 1.0),
    "memory_temperature": ("mem_temp_c", 1.0),
}
"""``telemetry_data`` key → (declared column, factor to its unit)."""
_IDENTITY = {
    "gpu_index": "gpu",
    "gpu_uuid": "uuid",
    "hostname": "host",
    "gpu_model_name": "name",
    "pci_bus_id": "pci_bus_id",
}
_STRINGS = {"uuid", "host", "name", "pci_bus_id"}


def is_telemetry(lines: list[str]) -> bool:
    """True when the first non-blank line is an AIPerf telemetry record."""
    first = next((ln for ln in lines if ln.strip()), "")
    if not first.lstrip().startswith("{"):
        return False
    return '"timestamp_ns"' in first and '"telemetry_data"' in first


def load_telemetry(path: Path, source: str, *, strict: bool = False) -> Part:
    """Read one ``gpu_telemetry_export.jsonl`` (``path`` uncompressed; ``source`` names it).

    Raises
    ------
    ParseError
        In strict mode, the first line that is no telemetry record.
    """
    rows: list[dict[str, Any]] = []
    cells: dict[str, tuple[int, int]] = {}  # telemetry key printed null → (count, first line)
    skipped: list[tuple[int, str, str]] = []
    lines = 0
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            lines = lineno
            text = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not text.strip():
                skipped.append((lineno, "blank line", text))
                continue
            row, reason = _record(text)
            if row is None:
                if strict:
                    raise ParseError(source, lineno, reason, text)
                skipped.append((lineno, reason, text[:200]))
                continue
            for key in row.pop("_null"):
                n, first = cells.get(key, (0, lineno))
                cells[key] = (n + 1, first)
            rows.append({"lineno": lineno, **row})
    samples = _frame(rows, source)
    skipped_df = pl.DataFrame(
        [(source, n, r, ln) for n, r, ln in skipped], schema=SKIPPED, orient="row"
    )
    unavailable = pl.DataFrame(
        [(source, k, "null", "unsupported", n, first) for k, (n, first) in cells.items()],
        schema=UNAVAILABLE,
        orient="row",
    )
    notes = ("timestamp_ns read as UTC",) if samples.height else ()
    return Part(source, FORMAT, lines, samples, skipped_df, unavailable, notes)


def _record(text: str) -> tuple[dict[str, Any] | None, str]:
    """One line's sample, or None and why it is none."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not json"
    if not isinstance(record, dict):
        return None, "not a json object"
    stamp, data = record.get("timestamp_ns"), record.get("telemetry_data")
    if not isinstance(stamp, int | float) or not isinstance(data, dict):
        return None, "no timestamp_ns or telemetry_data"
    try:
        ts = datetime.fromtimestamp(stamp / 1e9, UTC).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None, f"timestamp_ns {stamp} no clock reaches"
    row: dict[str, Any] = {"ts": ts, "_null": []}
    for key, column in _IDENTITY.items():
        value = record.get(key)
        if column == "gpu":
            row[column] = value if isinstance(value, int) and 0 <= value < 1 << 20 else None
        elif value is not None:
            row[column] = str(value)
    for key, value in data.items():
        column, factor = TELEMETRY.get(key, (f"aiperf_{key}", 1.0))
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if number is not None and math.isfinite(number):
            row[column] = float(number) * factor
        else:
            row.setdefault(column, None)
            row["_null"].append(key)
    return row, ""


def _frame(rows: list[dict[str, Any]], source: str) -> pl.DataFrame:
    if not rows:
        return rows_frame(rows, _STRINGS)  # no sample: the empty frame of no columns
    df = rows_frame(rows, _STRINGS)
    # a poll is one time of one host: number them per host and GPU, in file order
    poll = pl.col("ts").rank("dense").cast(pl.Int64) - 1
    keys = [c for c in ("host", "uuid", "gpu") if c in df.columns]
    df = df.with_columns(sample=poll.over(keys) if keys else poll)
    return df.with_columns(source=pl.lit(source))


def _detect(peek: Peek) -> bool:
    return is_telemetry(peek.body)


def _load(path: Path, options: Options) -> Part:
    return load_telemetry(path, options.source, strict=options.strict)


AIPERF_TELEMETRY = Format(
    FORMAT,
    "AIPerf's gpu_telemetry_export.jsonl: DCGM readings per host and GPU during a benchmark",
    _detect,
    _load,
    trace_summarizer(_load),
    TRACE,
)
