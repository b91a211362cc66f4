"""dcgm-exporter's Prometheus text, one scrape or many: one row per GPU per scrape.

The text is read with ``prometheus_client``'s exposition parser, never a regex, so label values
with spaces, commas, dots or empty strings are read right. The exporter prints no time of its
own: ``sample`` numbers the scrapes, a line such as ``date``'s output between scrapes gives
that scrape its time, else ``load_gpu_trace(interval_s=…, start=…)`` places them. Metric names
of every exporter generation (``DCGM_FI_*``, the old ``dcgm_*``) land on the same columns.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from prometheus_client.parser import text_string_to_metric_families

from toolkit.errors import ParseError
from toolkit.load.gpu.cells import check_cells
from toolkit.load.gpu.dcgm import cell_kind, is_blank
from toolkit.load.gpu.fields import DCGM_BY_NAME, DCGM_BY_OLD_NAME, dcgm_unknown_column
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import rows_frame, trace_summarizer
from toolkit.load.inputs import split_lines
from toolkit.schema.gpu import SAMPLES, SKIPPED, UNAVAILABLE

FORMAT = "dcgm-exporter"
_METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{|\s)")
_TIME_LINE = re.compile(r"^#?\s*(\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?)")
_LABEL_COLUMNS = {
    "gpu": "gpu",
    "UUID": "uuid",
    "uuid": "uuid",
    "modelName": "name",
    "Hostname": "host",
    "hostname": "host",
    "pci_bus_id": "pci_bus_id",
    "GPU_I_PROFILE": "mig_profile",
    "GPU_I_ID": "mig_instance",
    "DCGM_FI_DRIVER_VERSION": "driver_version",
    "container": "container",
    "namespace": "namespace",
    "pod": "pod",
}
_KEY = ("host", "gpu", "uuid", "mig_instance")


def is_exporter_text(lines: list[str]) -> bool:
    """True when the first lines are Prometheus text with DCGM metrics."""
    for line in lines[:50]:
        s = line.strip()
        if not s:
            continue
        m = re.match(r"^# (?:HELP|TYPE) (\S+)", s) or _METRIC_LINE.match(s)
        if m and (m.group(1).startswith("DCGM_") or m.group(1).startswith("dcgm_")):
            return True
    return False


def load_exporter(
    path: Path, source: str, *, interval_s: float | None = None, strict: bool = False
) -> Part:
    """Read one file of dcgm-exporter scrapes (``curl :9400/metrics`` once or in a loop)."""
    text = split_lines(path.read_bytes().decode("utf-8", "replace"))
    skipped: list[tuple[int, str, str]] = []
    metric_lines = 0
    cells: list[tuple[str, str, str, int]] = []
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    order: list[tuple[Any, ...]] = []
    for scrape, ts, block in _scrapes(text, skipped):
        for lineno, name, labels, value, stamp in _parse_block(block, skipped):
            metric_lines += 1
            info = {col: labels[k] for k, col in _LABEL_COLUMNS.items() if k in labels}
            for k in ("gpu", "mig_instance"):
                if k in info:
                    info[k] = int(info[k]) if re.fullmatch(r"\d{1,9}", info[k]) else None
            key = (scrape, *(info.get(k) for k in _KEY))
            row = groups.get(key)
            if row is None:
                row = {"lineno": lineno, "sample": scrape, "ts": ts, **info}
                groups[key] = row
                order.append(key)
            if stamp is not None and row.get("ts") is None:
                row["ts"] = _from_epoch_s(stamp)
            column, number = _exporter_value(name, value)
            if number is None:
                cells.append((name, _printed(value), "", lineno))
            if column not in row or row[column] is None:
                row[column] = number
    if strict:
        for lineno, reason, line in skipped:
            if reason not in ("blank line", "comment", "scrape time"):
                raise ParseError(source, lineno, reason, line)
    samples = _frame([groups[k] for k in order], source)
    unavailable = _cells(cells, source)
    if strict:
        check_cells(unavailable, source)
    skipped_df = pl.DataFrame(
        [(source, n, r, ln) for n, r, ln in sorted(skipped)], schema=SKIPPED, orient="row"
    )
    notes = ()
    if interval_s is None and samples.height and samples.get_column("ts").null_count():
        notes = (
            "no timestamps: set [gpu_trace] interval_s in run.toml (or --gpu-interval with "
            "ppscope parse) to the scrape period to place scrapes in time",
        )
    return Part(source, FORMAT, len(text), samples, skipped_df, unavailable, notes, metric_lines)


def _from_epoch_s(stamp: float) -> datetime | None:
    """UTC time of a sample's Prometheus timestamp; None for one no clock reaches."""
    try:
        return datetime.fromtimestamp(stamp, UTC).replace(tzinfo=None)
    except (OverflowError, OSError, ValueError):
        return None


def _scrapes(
    text: list[str], skipped: list[tuple[int, str, str]]
) -> list[tuple[int, datetime | None, list[tuple[int, str]]]]:
    """Cut the file into scrapes: a new one starts where a metric family seen in the current
    scrape begins again, or after a timestamp line."""
    out: list[tuple[int, datetime | None, list[tuple[int, str]]]] = []
    block: list[tuple[int, str]] = []
    done: set[str] = set()
    current: str | None = None
    pending_ts: datetime | None = None
    block_ts: datetime | None = None

    def close() -> None:
        nonlocal block, done, current, block_ts
        if any(not ln.startswith("#") and ln.strip() for _, ln in block):
            out.append((len(out), block_ts, block))
        else:  # HELP and TYPE lines of metrics that printed no sample
            skipped.extend((n, "comment", ln) for n, ln in block)
        block, done, current, block_ts = [], set(), None, None

    for lineno, line in enumerate(text, 1):
        s = line.strip()
        if not s:
            skipped.append((lineno, "blank line", line))
            continue
        t = _TIME_LINE.match(s)
        if t:
            close()
            pending_ts = _parse_time(t.group(1))
            skipped.append((lineno, "scrape time", line))
            continue
        m = re.match(r"^# (?:HELP|TYPE) (\S+)", s)
        name = m.group(1) if m else None
        if name is None and not s.startswith("#"):
            mm = _METRIC_LINE.match(s)
            name = mm.group(1) if mm else None
            if name is None:
                skipped.append((lineno, "not prometheus text", line))
                continue
        if name is None:
            skipped.append((lineno, "comment", line))
            continue
        if name != current:
            if name in done:
                close()
            if current is not None:
                done.add(current)
            current = name
        if block_ts is None and pending_ts is not None:
            block_ts, pending_ts = pending_ts, None
        block.append((lineno, s))
    close()
    return out


def _parse_time(text: str) -> datetime | None:
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text.split(".")[0], fmt)
        except ValueError:
            continue
    return None


def _parse_block(
    block: list[tuple[int, str]], skipped: list[tuple[int, str, str]]
) -> list[tuple[int, str, dict[str, str], float, float | None]]:
    """(lineno, metric name as printed, labels, value, timestamp) per sample line."""
    sample_lines = [(n, s) for n, s in block if not s.startswith("#")]
    for n, s in block:
        if s.startswith("#"):
            skipped.append((n, "comment", s))
    try:
        parsed = [s for fam in text_string_to_metric_families(_join(block)) for s in fam.samples]
        if len(parsed) == len(sample_lines):
            return [
                (n, _METRIC_LINE.match(s).group(1), sm.labels, sm.value, sm.timestamp)  # type: ignore[union-attr]
                for (n, s), sm in zip(sample_lines, parsed, strict=True)
            ]
    except (ValueError, TypeError, IndexError):
        pass
    # Something in the block does not parse: read line by line to keep the rest.
    out = []
    for n, s in sample_lines:
        try:
            fams = list(text_string_to_metric_families(s + "\n"))
            sm = fams[0].samples[0]
            out.append((n, _METRIC_LINE.match(s).group(1), sm.labels, sm.value, sm.timestamp))  # type: ignore[union-attr]
        except (ValueError, TypeError, IndexError, AttributeError):
            skipped.append((n, "not prometheus text", s))
    return out


def _join(block: list[tuple[int, str]]) -> str:
    return "\n".join(s for _, s in block) + "\n"


def _exporter_value(name: str, value: float) -> tuple[str, float | str | None]:
    field = DCGM_BY_NAME.get(name) or DCGM_BY_OLD_NAME.get(name)
    column = field.column if field else dcgm_unknown_column(name)
    if field is None and (column in SAMPLES or column in _LABEL_COLUMNS.values()):
        column = "dcgm_" + column  # an unknown metric must not land on a declared column
    if value is None or not _finite(value) or is_blank(value):
        return column, None  # kept as text in the unreadable cells, counted
    if column == "pstate":
        return column, f"P{int(value)}"
    return column, value * (field.scale if field else 1.0)


def _finite(value: float) -> bool:
    """A finite number a float holds (an exporter may print a 400-digit integer)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _printed(value: float) -> str:
    if value is None:
        return "?"
    if isinstance(value, int) and not _finite(value):
        text = str(value)
        return f"{text[:20]}… ({len(text)} digits)"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if is_blank(value):
        return f"DCGM blank ({value:.0f})"
    return repr(value)


def _frame(rows: list[dict[str, Any]], source: str) -> pl.DataFrame:
    if not rows:
        return rows_frame(rows, ())  # no sample: the empty frame of no columns
    strings = {"name", "uuid", "host", "pci_bus_id", "mig_profile", "pstate", "entity"}
    strings |= {"driver_version", "container", "namespace", "pod"}
    df = rows_frame(rows, strings, integers=("lineno", "sample"), gpu_ids=("gpu", "mig_instance"))
    return df.with_columns(source=pl.lit(source))


def _cells(cells: list[tuple[str, str, str, int]], source: str) -> pl.DataFrame:
    if not cells:
        return pl.DataFrame(schema=UNAVAILABLE)
    df = pl.DataFrame(
        [(f, v, n) for f, v, _, n in cells],
        schema={"field": pl.String, "value": pl.String, "lineno": pl.Int64},
        orient="row",
    )
    return (
        df.group_by("field", "value")
        .agg(pl.len().cast(pl.Int64).alias("count"), pl.col("lineno").min().alias("first_lineno"))
        .with_columns(source=pl.lit(source), kind=cell_kind(pl.col("value")))
        .select(UNAVAILABLE.names())
        .cast(dict(UNAVAILABLE))
        .sort("first_lineno", "field")
    )


# ---------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    return is_exporter_text(peek.body)


def _load(path: Path, options: Options) -> Part:
    return load_exporter(path, options.source, interval_s=options.interval_s, strict=options.strict)


DCGM_EXPORTER = Format(
    FORMAT,
    "Prometheus text from dcgm-exporter, one or many scrapes",
    _detect,
    _load,
    trace_summarizer(_load),
    TRACE,
)
