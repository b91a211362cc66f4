"""``nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits]`` traces, typed at CSV speed.

The file is read once by polars' CSV reader (``", "`` separated, no quoting). Unit-less numbers
are parsed by the reader itself; cells with units (``45 %``, ``312.45 W``) are cut from their
unit and cast; the timestamp's seconds are parsed with a fixed format and its milliseconds
added. Every row also gets a cheap "suspect" flag (too many or too few fields, no time, no
index); only suspect rows, and only columns that came out null, are looked at again, so a clean
trace pays for nothing else. Everything that is not a sample lands in ``skipped`` with its line
number, and every cell that is not a number (``[N/A]``, ``[Unknown Error]``) is counted in
``unavailable``.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from toolkit.errors import ParseError
from toolkit.load import compiled
from toolkit.load.compiled import smi_rows
from toolkit.load.gpu.cells import check_cells, missing_cells, unavailable_table
from toolkit.load.gpu.fields import SMI_FIELDS, column_name, smi_canonical
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.load.inputs import head_lines
from toolkit.load.text import scan_lines
from toolkit.schema.gpu import SKIPPED, UNAVAILABLE

FORMAT = "nvidia-smi-csv"
_UNIT = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]*)\]$")
_TS = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?$")
_NUMBER = re.compile(r"^-?\d+(?:\.\d+)?$")
# Cells nvidia-smi prints for a value it does not have: documented, not a fault.
_TS_FORMAT = "%Y/%m/%d %H:%M:%S"
_OTHER_HEADER = "a different header (another query appended)"


@dataclass(frozen=True)
class CsvField:
    """One column of the CSV: as printed, its canonical name, unit, target column and kind."""

    printed: str
    canonical: str
    unit: str | None
    column: str
    kind: str  # ts, gpu, float, str


def parse_fields(cells: Sequence[str]) -> list[CsvField]:
    """Header cells (or a ``--query-gpu`` list) → fields; unknown ones named from the header."""
    out: list[CsvField] = []
    seen: set[str] = set()
    for cell in cells:
        text = cell.strip()
        m = _UNIT.match(text)
        name, unit = (m.group("name"), m.group("unit")) if m else (text, None)
        canonical = smi_canonical(name)
        column, kind = SMI_FIELDS.get(canonical, (None, ""))
        if column is None:
            column = column_name(canonical, unit)
            kind = "float" if unit else "str"
        while column in seen:  # the same field asked twice: keep both
            column += "_2"
        seen.add(column)
        out.append(CsvField(text, canonical, unit, column, kind))
    return out


def is_header(line: str) -> bool:
    """True for a ``--query-gpu`` / ``--query-compute-apps`` header line."""
    cells = [c.strip() for c in line.split(",")]
    if not cells or not all(cells):
        return False
    if any(_TS.match(c) or _NUMBER.match(c) or c.startswith("[") for c in cells):
        return False
    known = sum(1 for f in parse_fields(cells) if f.canonical in SMI_FIELDS or f.unit)
    return known > 0 and all(re.match(r"^[A-Za-z_][\w.]*(?: \[[^\]]+\])?$", c) for c in cells)


def looks_like_values(line: str) -> bool:
    """True for a data row of a ``noheader`` query: ``, ``-separated nvidia-smi values."""
    cells = [c.strip() for c in line.split(", ")]
    if len(cells) < 2:
        return False
    value = re.compile(
        r"^(?:\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?|-?\d+(?:\.\d+)?(?: (?:%|MiB|W|MHz|us))?"
        r"|\[[^\]]*\]|N/A|P\d{1,2}|Enabled|Disabled|Active|Not Active|0x[0-9A-Fa-f]+"
        r"|GPU-[0-9a-f-]+|[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d"
        r"|(?:NVIDIA|Tesla|GeForce|Quadro|TITAN|RTX|A\d+|H\d+|L\d+)[\w .()-]*)$"
    )
    return all(value.match(c) for c in cells) and any(
        _TS.match(c) or re.match(r"^-?\d", c) for c in cells
    )


def load_smi_csv(
    path: Path,
    source: str,
    *,
    fields: Sequence[str] | None = None,
    strict: bool = False,
    workdir: Path | None = None,
) -> Part:
    """Read one ``--query-gpu`` CSV trace (``path`` uncompressed; ``source`` names it).

    Raises
    ------
    ParseError
        A ``noheader`` file without ``fields``; in strict mode, the first line that is not a
        sample (except blank lines and headers) or the first cell that is not a value.
    """
    head = head_lines(path, n=200)
    first = next((i for i, line in enumerate(head) if line.strip()), None)
    if first is None:
        return _no_header(path, source, strict, workdir)
    header_lineno = 0
    if is_header(head[first]):
        header_lineno = first + 1
        specs = parse_fields(head[first].split(","))
    elif fields:
        specs = parse_fields(fields)
    else:
        raise ParseError(
            source,
            first + 1,
            "nvidia-smi csv without a header: give the query's field list "
            "([gpu_trace] fields in run.toml, or --gpu-fields with ppscope parse)",
            head[first],
        )
    rows: list[dict[str, object]] = [
        {"source": source, "lineno": n, "reason": "blank line", "line": head[n - 1]}
        for n in range(1, header_lineno)
    ]
    if header_lineno:
        rows.append(
            {"source": source, "lineno": header_lineno, "reason": "header", "line": head[first]}
        )
    frames, missing = [], []
    lines = 0
    sample_rows = head[header_lineno:]
    while True:  # once per header; more only when another query was appended to the file
        suffixes = _value_units(specs, sample_rows)
        df = _read(path, specs, suffixes, header_lineno)
        lines = header_lineno + df.height
        suspect = df.get_column("_suspect")
        segment: list[dict[str, object]] = []
        if suspect.any():
            segment = _classify_lines(path, source, specs, df.filter(suspect), workdir)
            df = df.filter(~suspect)
        other = next((r for r in segment if r["reason"] == _OTHER_HEADER), None)
        if other is not None:
            df = df.filter(pl.col("lineno") < other["lineno"])
            segment = [r for r in segment if int(r["lineno"]) < int(other["lineno"])]
            segment.append({**other, "reason": "header"})
        rows += segment
        df = df.drop("_suspect").with_columns(source=pl.lit(source, pl.String))
        if strict:
            for row in segment:
                if row["reason"] not in ("blank line", "header", "repeated header"):
                    raise ParseError(
                        source, int(row["lineno"]), str(row["reason"]), str(row["line"])
                    )
        unavailable = _unavailable(path, source, specs, suffixes, df, header_lineno)
        if strict:
            check_cells(unavailable, source)
        frames.append(df)
        missing.append(unavailable)
        if other is None:
            break
        header_lineno = int(other["lineno"])
        specs = parse_fields(str(other["line"]).split(","))
        after = raw_lines(path, range(header_lineno + 1, header_lineno + 51), workdir)
        sample_rows = [after[n] for n in sorted(after)]
    samples = frames[0] if len(frames) == 1 else pl.concat(frames, how="diagonal_relaxed")
    skipped = pl.DataFrame(rows, schema=SKIPPED, orient="row").sort("lineno")
    only_headers = set(skipped.get_column("reason")) <= {"header", "blank line", "repeated header"}
    notes: tuple[str, ...] = ()
    if not samples.height:
        notes = (
            "no samples: the file holds only a header"
            if only_headers
            else "no samples: every row was skipped (see the problems)",
        )
    return Part(source, FORMAT, lines, samples, skipped, pl.concat(missing), notes + _mig(samples))


def _mig(samples: pl.DataFrame) -> tuple[str, ...]:
    """A note when MIG is on and ``utilization.gpu`` therefore reads ``[N/A]``."""
    if "mig_mode_current" not in samples.columns or "util_pct" not in samples.columns:
        return ()
    on = samples.filter(pl.col("mig_mode_current") == "Enabled")
    if not on.height or on.get_column("util_pct").null_count() < on.height:
        return ()
    gpus = ", ".join(str(g) for g in on.get_column("gpu").drop_nulls().unique().sort())
    return (
        f"MIG is enabled (GPU {gpus or '?'}): nvidia-smi reports no utilization under MIG; "
        "DCGM's GR_ENGINE_ACTIVE (dcgmi dmon -e 1001, dcgm-exporter) measures a MIG GPU's load",
    )


# ---------------------------------------------------------------------- reading
def _value_units(specs: list[CsvField], rows: list[str]) -> dict[int, str | None]:
    """Per float column: the unit its values carry (``%``), or None when they are bare.

    A ``nounits`` query keeps the ``[unit]`` in the header but prints bare numbers, so the
    first rows decide.
    """
    out: dict[int, str | None] = {}
    sample = [[c.strip() for c in r.split(",")] for r in rows[:50] if r.strip()]
    for i, spec in enumerate(specs):
        if spec.kind not in ("float", "gpu"):
            continue
        unit = None
        for cells in sample:
            if i < len(cells) and cells[i] and not cells[i].startswith("[") and cells[i] != "N/A":
                parts = cells[i].rsplit(" ", 1)
                if len(parts) == 2 and not _NUMBER.match(parts[1]):
                    unit = parts[1]
                break
        out[i] = unit
    return out


def _scan(
    source: Path | bytes,
    schema: dict[str, pl.DataType],
    header_lineno: int,
    encoding: str = "utf8-lossy",
) -> pl.LazyFrame:
    return pl.scan_csv(
        source,
        has_header=False,
        separator=",",
        quote_char=None,
        schema=schema,
        ignore_errors=True,
        missing_columns="insert",
        extra_columns="ignore",  # a row longer than the header: ``_over`` flags it
        truncate_ragged_lines=True,
        skip_rows=header_lineno,
        row_index_name="lineno",
        row_index_offset=header_lineno + 1,
        raise_if_empty=False,
        encoding=encoding,
    )


def _read(
    path: Path, specs: list[CsvField], suffixes: dict[int, str | None], header_lineno: int
) -> pl.DataFrame:
    last = len(specs) - 1
    schema: dict[str, pl.DataType] = {}
    for i, spec in enumerate(specs):
        # Bare numbers are parsed by the reader itself (it accepts the leading space); the
        # last column stays text so that a short (cut) row can be told from a [N/A] cell.
        native = spec.kind in ("gpu", "float") and suffixes.get(i) is None and i != last
        schema[f"c{i}"] = (
            (pl.Int32() if spec.kind == "gpu" else pl.Float64()) if native else pl.String()
        )
    schema["_over"] = pl.String()
    typed = {
        spec.column: _typed(pl.col(f"c{i}"), spec, schema[f"c{i}"], suffixes.get(i), first=i == 0)
        for i, spec in enumerate(specs)
    }
    # Computed on the typed columns so the timestamp is parsed once per row.
    keys = [pl.col(s.column).is_null() for s in specs if s.kind in ("ts", "gpu")]
    check = pl.col("_over").is_not_null() | pl.col("_last").is_null()
    if keys:
        check = check | pl.any_horizontal(keys)

    def typed_rows(source: Path | bytes, encoding: str, skip: int) -> pl.DataFrame:
        lf = _scan(source, schema, skip, encoding).select(
            pl.col("lineno").cast(pl.Int64),
            *(expr.alias(name) for name, expr in typed.items()),
            pl.col("_over"),
            pl.col(f"c{last}").alias("_last"),
        )
        return lf.with_columns(_suspect=check).drop("_over", "_last").collect(engine="streaming")

    lane = smi_rows.layout([s.kind for s in specs], [suffixes.get(i) for i in range(len(specs))])
    if compiled.enabled() and lane is not None and smi_rows.ready():
        # the rows the pass leaves are typed by the reader (lossy UTF-8 is the same text when
        # they are valid, and what the whole file would be read as when they are not)
        return smi_rows.read(
            path, header_lineno, lane, list(typed), lambda left: typed_rows(left, "utf8-lossy", 0)
        )
    # Valid UTF-8 is read a fifth faster without the lossy decoder; a file holding an invalid
    # byte is read again with it replaced (U+FFFD), so no row is lost.
    try:
        return typed_rows(path, "utf8", header_lineno)
    except pl.exceptions.ComputeError as e:
        if "utf-8" not in str(e).lower():
            raise
        return typed_rows(path, "utf8-lossy", header_lineno)


def _typed(
    col: pl.Expr, spec: CsvField, dtype: pl.DataType, unit: str | None, *, first: bool
) -> pl.Expr:
    if spec.kind == "ts":
        text = col if first else col.str.strip_chars_start(" ")
        seconds = text.str.head(19).str.strptime(pl.Datetime("ms"), _TS_FORMAT, strict=False)
        millis = text.str.slice(20, 3).cast(pl.Int64, strict=False).fill_null(0)
        return seconds + pl.duration(milliseconds=millis)
    if dtype != pl.String():
        return col
    if spec.kind in ("gpu", "float"):
        target = pl.Int32() if spec.kind == "gpu" else pl.Float64()
        if unit:
            # `` 45 %``: cut the leading space and `` unit`` by position, one slice per cell
            # (cheaper than stripping characters); a cell of another shape comes out null and
            # is counted with its text in ``unavailable``.
            lead = 0 if first else 1
            body = col.str.slice(lead, col.str.len_bytes() - len(unit) - 1 - lead)
            return body.cast(target, strict=False)
        return col.str.strip_chars().cast(target, strict=False)
    text = col.str.strip_chars()
    return pl.when(text.str.starts_with("[") | (text == "N/A")).then(None).otherwise(text)


# ---------------------------------------------------------------------- accounting
def raw_lines(path: Path, linenos: Sequence[int], workdir: Path | None) -> dict[int, str]:
    """The text of a few lines, by number, read in one streaming pass."""
    lf = scan_lines(path, workdir or Path(tempfile.gettempdir())).filter(
        pl.col("lineno").is_in(list(linenos))
    )
    df = lf.collect(engine="streaming")
    return {int(n): (line or "") for n, line in df.iter_rows()}


def _classify_lines(
    path: Path,
    source: str,
    specs: list[CsvField],
    suspects: pl.DataFrame,
    workdir: Path | None,
) -> list[dict[str, object]]:
    linenos = suspects.get_column("lineno").to_list()
    text = raw_lines(path, linenos, workdir)
    header = [s.printed for s in specs]
    rows = []
    for n in linenos:
        line = text.get(n, "")
        rows.append(
            {
                "source": source,
                "lineno": n,
                "reason": _reason(line, header),
                "line": line,
            }
        )
    return rows


def _reason(line: str, header: list[str]) -> str:
    cells = [c.strip() for c in line.split(",")]
    if not line.strip():
        return "blank line"
    if cells == header:
        return "repeated header"
    if is_header(line):
        return _OTHER_HEADER
    if len(cells) < len(header):
        return f"cut row: {len(cells)} of {len(header)} fields (the trace was killed?)"
    if len(cells) > len(header):
        return f"row has {len(cells)} fields, the header {len(header)}"
    return "no readable timestamp or GPU index"


def _unavailable(
    path: Path,
    source: str,
    specs: list[CsvField],
    suffixes: dict[int, str | None],
    samples: pl.DataFrame,
    header_lineno: int,
) -> pl.DataFrame:
    """Count the cells that are not values, per field and printed text (second pass)."""
    null_cols = [
        i
        for i, s in enumerate(specs)
        if s.kind in ("float", "str") and samples.get_column(s.column).null_count()
    ]
    if not null_cols or not samples.height:
        return pl.DataFrame(schema=UNAVAILABLE)
    schema: dict[str, pl.DataType] = {f"c{i}": pl.String() for i in range(len(specs))}
    lf = _scan(path, schema, header_lineno).with_columns(pl.col("lineno").cast(pl.Int64))
    kept = samples.select("lineno").lazy()
    lf = lf.join(kept, on="lineno", how="semi")
    frames = []
    for i in null_cols:
        spec = specs[i]
        raw = pl.col(f"c{i}").str.strip_chars()
        typed = _typed(pl.col(f"c{i}"), spec, pl.String(), suffixes.get(i), first=i == 0)
        frames.append(missing_cells(lf, typed, raw, spec.printed))
    return unavailable_table(frames, source)


def _no_header(path: Path, source: str, strict: bool, workdir: Path | None) -> Part:
    """A file whose first lines are all blank: every line skipped, with its reason."""
    lines = scan_lines(path, workdir or Path(tempfile.gettempdir())).collect(engine="streaming")
    skipped = lines.select(
        source=pl.lit(source),
        lineno=pl.col("lineno"),
        reason=pl.when(pl.col("line").fill_null("").str.strip_chars() == "")
        .then(pl.lit("blank line"))
        .otherwise(pl.lit("no header in the first 200 lines")),
        line=pl.col("line").fill_null(""),
    )
    problems = skipped.filter(pl.col("reason") != "blank line")
    if strict and problems.height:
        r = problems.row(0, named=True)
        raise ParseError(source, r["lineno"], r["reason"], r["line"])
    return Part(
        source,
        FORMAT,
        lines.height,
        pl.DataFrame(
            {"source": [], "lineno": []}, schema={"source": pl.String, "lineno": pl.Int64}
        ),
        skipped.cast(dict(SKIPPED)),
        pl.DataFrame(schema=UNAVAILABLE),
        ("no samples: no header or value row in the first 200 lines",),
    )


# ---------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    # A compute-apps header is a query header too: that format is asked first.
    return is_header(peek.first) or looks_like_values(peek.first)


def _load(path: Path, options: Options) -> Part:
    return load_smi_csv(
        path, options.source, fields=options.fields, strict=options.strict, workdir=options.workdir
    )


NVIDIA_SMI_CSV = Format(
    FORMAT,
    "nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits] [-l|-lms]",
    _detect,
    _load,
    trace_summarizer(_load),
    TRACE,
)
