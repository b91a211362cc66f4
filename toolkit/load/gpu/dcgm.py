"""DCGM: ``dcgmi dmon -e …`` text and dcgm-exporter's Prometheus text, one row per GPU per sample.

Neither prints a time of its own. ``sample`` numbers the polling rounds (a block of ``GPU n``
rows, or one scrape); ``load_gpu_trace(interval_s=…, start=…)`` turns it into time. The
exporter text is read with ``prometheus_client``'s exposition parser, never a regex, so label
values with spaces, commas, dots or empty strings are read right; a line such as ``date``'s
output between scrapes gives that scrape its time.

DCGM's profiling fields (``DCGM_FI_PROF_*``, ``SMACT``…) are ratios 0–1 even where the help
text says "(in %)"; DCGM's "blank" sentinels become null and are counted in ``unavailable``.
"""

from __future__ import annotations

import math
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from prometheus_client.parser import text_string_to_metric_families

from toolkit.errors import ParseError
from toolkit.load.gpu.fields import (
    DCGM_BY_NAME,
    DCGM_BY_OLD_NAME,
    DCGM_BY_SHORT,
    column_name,
    dcgm_unknown_column,
)
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.load.gpu.smi import value_kind
from toolkit.load.text import scan_lines
from toolkit.schema.gpu import SAMPLES, SKIPPED, UNAVAILABLE

DCGMI_FORMAT = "dcgmi-dmon"
EXPORTER_FORMAT = "dcgm-exporter"
_METRIC_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{|\s)")
_TIME_LINE = re.compile(r"^#?\s*(\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?)")
# DCGM's blank values (dcgm_structs.h): the base and base+1..3 mean no value / not found /
# not supported / no permission.
_BLANKS = (0x7FFFFFF0, 0x7FFFFFFFFFFFFFF0, 140737488355328.0)
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


# ---------------------------------------------------------------------- dcgmi dmon
def is_dcgmi_header(line: str) -> bool:
    """True for ``#Entity  GRACT …`` (or the older ``# Entity  TENSO``)."""
    return bool(re.match(r"^#\s*Entity\b", line.strip()))


def load_dcgmi(
    path: Path,
    source: str,
    *,
    interval_s: float | None = None,
    strict: bool = False,
    workdir: Path | None = None,
) -> Part:
    """Read one ``dcgmi dmon`` capture (``path`` uncompressed; ``source`` names it).

    Lines are typed in polars (one token list per line), so a day of 100 ms samples is fine.
    """
    lines = scan_lines(path, workdir or Path(tempfile.gettempdir())).collect(engine="streaming")
    body = pl.col("line").fill_null("").str.strip_chars()
    lines = lines.with_columns(
        kind=pl.when(body == "")
        .then(pl.lit("blank"))
        .when(body.str.contains(r"^#\s*Entity\b"))
        .then(pl.lit("names"))
        .when(body.is_in(["ID", "Id"]))
        .then(pl.lit("id"))
        .otherwise(pl.lit("data"))
    )
    headers = lines.filter(pl.col("kind") == "names").select("lineno", "line")
    layouts: list[list[str]] = []
    starts: list[tuple[int, int]] = []
    for lineno, line in headers.iter_rows():
        tokens = line.split()
        names = tokens[2:] if tokens[0] == "#" else tokens[1:]
        if names not in layouts:
            layouts.append(names)
        starts.append((lineno, layouts.index(names)))
    data = lines.filter(pl.col("kind") == "data").with_columns(
        tokens=pl.col("line").str.extract_all(r"\S+")
    )
    if starts:
        marks = pl.DataFrame(starts, schema={"lineno": pl.Int64, "layout": pl.Int32}, orient="row")
        data = data.join_asof(marks, on="lineno", strategy="backward")
    else:
        data = data.with_columns(layout=pl.lit(None, pl.Int32))
    token = pl.col("tokens").list.get
    fits = pl.lit(False)
    for index, names in enumerate(layouts):
        fits = fits | (
            (pl.col("layout") == index) & (pl.col("tokens").list.len() == len(names) + 2)
        )
    data = data.with_columns(
        fits=fits & token(1, null_on_oob=True).str.contains(r"^\d+$"),
        label=pl.concat_str(
            [token(0, null_on_oob=True), token(1, null_on_oob=True)], separator=" "
        ),
    )
    bad = data.filter(~pl.col("fits"))
    message = pl.col("line").str.strip_chars().str.contains(r"^[A-Za-z^]")
    # Ctrl-C and dcgmi's own goodbye end every interactive capture: not a problem.
    stopped = (
        pl.col("line").str.strip_chars().str.contains(r"^\^C$|stopped due to receiving a signal")
    )
    skipped_df = (
        pl.concat(
            [
                lines.filter(pl.col("kind") == "blank").select(
                    "lineno", "line", reason=pl.lit("blank line")
                ),
                lines.filter(pl.col("kind").is_in(["names", "id"])).select(
                    "lineno", "line", reason=pl.lit("header")
                ),
                bad.select(
                    "lineno",
                    "line",
                    reason=pl.when(pl.col("layout").is_null())
                    .then(pl.lit("text before the #Entity header"))
                    .when(stopped)
                    .then(pl.lit("end of capture"))
                    .when(message)
                    .then(pl.lit("dcgmi message"))
                    .otherwise(pl.lit("row does not fit the header")),
                ),
            ]
        )
        .with_columns(source=pl.lit(source), line=pl.col("line").fill_null(""))
        .select(SKIPPED.names())
        .cast(dict(SKIPPED))
        .sort("lineno")
    )
    if strict:
        benign = ["blank line", "header", "end of capture"]
        problems = skipped_df.filter(~pl.col("reason").is_in(benign))
        if problems.height:
            r = problems.row(0, named=True)
            raise ParseError(source, r["lineno"], r["reason"], r["line"])
    rows = data.filter(pl.col("fits"))
    frames, cells = [], []
    if rows.height:
        first_label = rows.get_column("label")[0]
        rows = rows.with_columns(
            sample=(pl.col("label") == first_label).cast(pl.Int64).cum_sum() - 1
        )
    for index, names in enumerate(layouts):
        part = rows.filter(pl.col("layout") == index)
        if part.height:
            typed, missing = _dcgmi_typed(part, names, source)
            frames.append(typed)
            cells.append(missing)
    samples = (
        pl.concat(frames, how="diagonal_relaxed").sort("lineno")
        if frames
        else pl.DataFrame(schema={"source": pl.String, "lineno": pl.Int64})
    )
    unavailable = pl.concat(cells) if cells else pl.DataFrame(schema=UNAVAILABLE)
    if strict:
        _strict_cells(unavailable, source)
    notes: tuple[str, ...] = ()
    if interval_s is None and samples.height:
        notes = ("no timestamps: pass interval_s (the dmon -d delay) to place samples in time",)
    return Part(source, DCGMI_FORMAT, lines.height, samples, skipped_df, unavailable, notes)


def _dcgmi_typed(
    rows: pl.DataFrame, names: list[str], source: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    token = pl.col("tokens").list.get
    kind, number = token(0), token(1).cast(pl.Int32, strict=False)
    exprs: list[pl.Expr] = [
        pl.col("lineno"),
        pl.col("sample"),
        pl.when(kind == "GPU").then(number).alias("gpu"),
        pl.when(kind == "GPU-I").then(number).alias("mig_instance"),
        pl.when(kind != "GPU").then(pl.col("label")).alias("entity"),
    ]
    checks = []
    lf = rows.lazy()
    used: set[str] = set()
    for i, name in enumerate(names):
        field = DCGM_BY_SHORT.get(name)
        column = field.column if field else column_name(name)
        if column in used:
            column = column_name(name)
        used.add(column)
        raw = token(i + 2)
        value = raw.cast(pl.Float64, strict=False)
        value = pl.when(_not_blank(value)).then(value)
        if column == "pstate":
            exprs.append(pl.format("P{}", value.cast(pl.Int64)).alias(column))
        else:
            scale = field.scale if field else 1.0
            exprs.append((value * scale if scale != 1.0 else value).alias(column))
        checks.append(
            lf.filter(value.is_null())
            .group_by(raw.alias("value"))
            .agg(pl.len().alias("count"), pl.col("lineno").min().alias("first_lineno"))
            .with_columns(field=pl.lit(name))
        )
    typed = rows.select(exprs).with_columns(source=pl.lit(source))
    if typed.get_column("entity").null_count() == typed.height:
        typed = typed.drop("entity")
    missing = pl.concat(pl.collect_all(checks)) if checks else pl.DataFrame()
    if not missing.height:
        return typed, pl.DataFrame(schema=UNAVAILABLE)
    missing = (
        missing.with_columns(
            source=pl.lit(source),
            kind=_kind(pl.col("value")),
            count=pl.col("count").cast(pl.Int64),
        )
        .select(UNAVAILABLE.names())
        .cast(dict(UNAVAILABLE))
        .sort("first_lineno", "field")
    )
    return typed, missing


def _not_blank(value: pl.Expr) -> pl.Expr:
    ok = value.is_not_null() & value.is_finite()
    for base in _BLANKS:
        ok = ok & ~value.is_between(base, base + 3)
    return ok


# ---------------------------------------------------------------------- dcgm-exporter
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
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    skipped: list[tuple[int, str, str]] = []
    cells: list[tuple[str, str, str, int]] = []
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    order: list[tuple[Any, ...]] = []
    for scrape, ts, block in _scrapes(text, skipped):
        for lineno, name, labels, value, stamp in _parse_block(block, skipped):
            info = {col: labels[k] for k, col in _LABEL_COLUMNS.items() if k in labels}
            for k in ("gpu", "mig_instance"):
                if k in info:
                    info[k] = int(info[k]) if re.fullmatch(r"\d+", info[k]) else None
            key = (scrape, *(info.get(k) for k in _KEY))
            row = groups.get(key)
            if row is None:
                row = {"lineno": lineno, "sample": scrape, "ts": ts, **info}
                groups[key] = row
                order.append(key)
            if stamp is not None and row.get("ts") is None:
                row["ts"] = datetime.fromtimestamp(stamp, UTC).replace(tzinfo=None)
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
        _strict_cells(unavailable, source)
    skipped_df = pl.DataFrame(
        [(source, n, r, ln) for n, r, ln in sorted(skipped)], schema=SKIPPED, orient="row"
    )
    notes = ()
    if interval_s is None and samples.height and samples.get_column("ts").null_count():
        notes = ("no timestamps: pass interval_s (the scrape period) to place scrapes in time",)
    return Part(source, EXPORTER_FORMAT, len(text), samples, skipped_df, unavailable, notes)


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
    if value is None or not math.isfinite(value) or _is_blank(value):
        return column, None
    if column == "pstate":
        return column, f"P{int(value)}"
    return column, value * (field.scale if field else 1.0)


def _printed(value: float) -> str:
    if value is None:
        return "?"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if _is_blank(value):
        return f"DCGM blank ({value:.0f})"
    return repr(value)


def _is_blank(value: float) -> bool:
    return any(base <= value <= base + 3 for base in _BLANKS)


# ---------------------------------------------------------------------- shared
def _frame(rows: list[dict[str, Any]], source: str) -> pl.DataFrame:
    if not rows:
        return pl.DataFrame(schema={"source": pl.String, "lineno": pl.Int64})
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    strings = {"name", "uuid", "host", "pci_bus_id", "mig_profile", "pstate", "entity"}
    strings |= {"driver_version", "container", "namespace", "pod"}
    schema: dict[str, pl.DataType] = {}
    for c in columns:
        if c in ("lineno", "sample"):
            schema[c] = pl.Int64()
        elif c in ("gpu", "mig_instance"):
            schema[c] = pl.Int32()
        elif c == "ts":
            schema[c] = pl.Datetime("ms")
        elif c in strings:
            schema[c] = pl.String()
        else:
            schema[c] = pl.Float64()
    df = pl.DataFrame([{c: r.get(c) for c in columns} for r in rows], schema=schema, orient="row")
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
        .with_columns(source=pl.lit(source), kind=_kind(pl.col("value")))
        .select(UNAVAILABLE.names())
        .cast(dict(UNAVAILABLE))
        .sort("first_lineno", "field")
    )


def _kind(value: pl.Expr) -> pl.Expr:
    blank = value.str.starts_with("DCGM blank") | (value == "NaN")
    return pl.when(blank).then(pl.lit("unsupported")).otherwise(value_kind(value))


def _strict_cells(unavailable: pl.DataFrame, source: str) -> None:
    bad = unavailable.filter(pl.col("kind") != "unsupported")
    if bad.height:
        r = bad.row(0, named=True)
        raise ParseError(source, r["first_lineno"], f"field {r['field']!r} holds {r['value']!r}")


# ---------------------------------------------------------------------- the formats
def _detect_dcgmi(peek: Peek) -> bool:
    return is_dcgmi_header(peek.first)


def _load_dcgmi(path: Path, options: Options) -> Part:
    return load_dcgmi(
        path,
        options.source,
        interval_s=options.interval_s,
        strict=options.strict,
        workdir=options.workdir,
    )


def _detect_exporter(peek: Peek) -> bool:
    return is_exporter_text(peek.body)


def _load_exporter(path: Path, options: Options) -> Part:
    return load_exporter(path, options.source, interval_s=options.interval_s, strict=options.strict)


DCGMI_DMON = Format(
    DCGMI_FORMAT,
    "dcgmi dmon -e … (no timestamps: give interval_s, and start)",
    _detect_dcgmi,
    _load_dcgmi,
    trace_summarizer(_load_dcgmi),
    TRACE,
)
DCGM_EXPORTER = Format(
    EXPORTER_FORMAT,
    "Prometheus text from dcgm-exporter, one or many scrapes",
    _detect_exporter,
    _load_exporter,
    trace_summarizer(_load_exporter),
    TRACE,
)
