"""``dcgmi dmon -e …`` text: one row per GPU (or MIG instance) per polling round.

dcgmi prints no time of its own. ``sample`` numbers the polling rounds (a block of ``GPU n``
rows); ``load_gpu_trace(interval_s=…, start=…)`` turns it into time. Columns come from the
``#Entity`` names line (DCGM short names such as ``SMACT``, ``GRACT``); DCGM's blank sentinels
become null and are counted in ``unavailable``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.gpu.cells import check_cells, missing_cells, unavailable_table
from toolkit.load.gpu.dcgm import cell_kind, not_blank
from toolkit.load.gpu.fields import DCGM_BY_SHORT, column_name, unique_column
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.load.text import scan_lines
from toolkit.schema.gpu import SKIPPED, UNAVAILABLE

FORMAT = "dcgmi-dmon"


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
        check_cells(unavailable, source)
    notes: tuple[str, ...] = ()
    if "entity" in samples.columns:
        unplaced = samples.filter(pl.col("gpu").is_null() & pl.col("entity").is_not_null())
        if unplaced.height:
            notes += (
                f"{unplaced.height} rows of MIG instances ({', '.join(_kinds(unplaced))}) name no "
                "GPU (dcgmi dmon does not print which GPU an instance is part of): kept with "
                "their entity, counted as no GPU",
            )
    if interval_s is None and samples.height:
        notes += (
            "no timestamps: set [gpu_trace] interval_s in run.toml (or --gpu-interval with "
            "ppscope parse) to the dmon -d delay to place samples in time",
        )
    return Part(source, FORMAT, lines.height, samples, skipped_df, unavailable, notes)


def _kinds(rows: pl.DataFrame) -> list[str]:
    """The entity kinds of ``rows`` (``GPU-I``, ``GPU-CI``), in first-seen order."""
    kinds = rows.get_column("entity").str.extract(r"^(\S+)")
    return kinds.unique(maintain_order=True).to_list()


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
    used: set[str] = {"lineno", "sample", "gpu", "mig_instance", "entity", "source"}
    for i, name in enumerate(names):
        field = DCGM_BY_SHORT.get(name)
        column = field.column if field else column_name(name)
        if column in used:
            column = column_name(name)
        column = unique_column(column, used)
        raw = token(i + 2)
        value = raw.cast(pl.Float64, strict=False)
        value = pl.when(not_blank(value)).then(value)
        if column == "pstate":
            exprs.append(pl.format("P{}", value.cast(pl.Int64)).alias(column))
        else:
            scale = field.scale if field else 1.0
            exprs.append((value * scale if scale != 1.0 else value).alias(column))
        checks.append(missing_cells(lf, value, raw, name))
    typed = rows.select(exprs).with_columns(source=pl.lit(source))
    if typed.get_column("entity").null_count() == typed.height:
        typed = typed.drop("entity")
    return typed, unavailable_table(checks, source, cell_kind)


# ---------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    return is_dcgmi_header(peek.first)


def _load(path: Path, options: Options) -> Part:
    return load_dcgmi(
        path,
        options.source,
        interval_s=options.interval_s,
        strict=options.strict,
        workdir=options.workdir,
    )


DCGMI_DMON = Format(
    FORMAT,
    "dcgmi dmon -e … (no timestamps: give interval_s, and start)",
    _detect,
    _load,
    trace_summarizer(_load),
    TRACE,
)
