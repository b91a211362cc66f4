"""``nvidia-smi dmon`` output: any ``-s`` selection, with or without ``-o D|T|DT``.

Columns come from the ``#`` names line that precedes the data (they differ by driver: ``temp``
vs ``gtemp mtemp``, ``jpg ofa``, ``ccpm``), units from the line after it. Every ``#`` line and
blank line is skipped (headers are re-printed in long runs), ``-`` is a missing value, and a
row whose token count does not match its header is kept in ``skipped``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.gpu.cells import check_cells, missing_cells, unavailable_table
from toolkit.load.gpu.fields import DMON_FIELDS, column_name, unique_column
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.load.text import scan_lines
from toolkit.schema.gpu import SKIPPED, UNAVAILABLE

FORMAT = "nvidia-smi-dmon"
_TIME_NAMES = {"date", "time"}


def is_dmon_header(line: str) -> bool:
    """True for a dmon names line (``# gpu  pwr …`` or ``#Date Time gpu …``), not pmon's."""
    if not line.startswith("#"):
        return False
    tokens = line[1:].split()
    lowered = [t.lower() for t in tokens]
    if "gpu" not in lowered or "pid" in lowered:
        return False
    before = lowered[: lowered.index("gpu")]
    return all(t in _TIME_NAMES for t in before) and len(tokens) > lowered.index("gpu")


@dataclass(frozen=True)
class Layout:
    """One names line: the token names and units of the rows under it."""

    names: tuple[str, ...]
    units: tuple[str, ...]


def load_dmon(
    path: Path, source: str, *, strict: bool = False, workdir: Path | None = None
) -> Part:
    """Read one ``nvidia-smi dmon`` capture (``path`` uncompressed; ``source`` names it).

    ``workdir`` holds the line store of a file so full of control bytes that it must be split
    in Python (the caller removes it); the system temp directory by default.
    """
    lines = scan_lines(path, workdir or Path(tempfile.gettempdir())).collect(engine="streaming")
    text = pl.col("line").fill_null("")
    stripped = text.str.strip_chars()
    lines = lines.with_columns(
        kind=pl.when(stripped == "")
        .then(pl.lit("blank"))
        .when(stripped.str.starts_with("#"))
        .then(pl.lit("comment"))
        .otherwise(pl.lit("data"))
    )
    layouts, segment_of = _layouts(lines.filter(pl.col("kind") == "comment"))
    # A names line that repeats a column cannot say which value is which.
    repeats = {i: r for i, layout in enumerate(layouts) if (r := _repeated(layout.names))}
    bad_headers = {n: repeats[i] for n, i in segment_of.items() if i in repeats}
    data = lines.filter(pl.col("kind") == "data")
    if layouts:
        starts = pl.DataFrame(
            {"lineno": list(segment_of), "layout": list(segment_of.values())},
            schema={"lineno": pl.Int64, "layout": pl.Int32},
        )
        data = data.join_asof(starts, on="lineno", strategy="backward")
    else:
        data = data.with_columns(layout=pl.lit(None, pl.Int32))
    data = data.with_columns(tokens=pl.col("line").str.extract_all(r"\S+"))

    skipped = [
        lines.filter(pl.col("kind") == "blank").select(
            "lineno", "line", reason=pl.lit("blank line")
        ),
        lines.filter(pl.col("kind") == "comment").select(
            "lineno",
            "line",
            reason=pl.col("lineno").replace_strict(
                {n: f"header repeats column {name!r}" for n, name in bad_headers.items()},
                default="header",
                return_dtype=pl.String,
            ),
        ),
        data.filter(pl.col("layout").is_null()).select(
            "lineno", "line", reason=pl.lit("data before any dmon header")
        ),
    ]
    frames: list[pl.DataFrame] = []
    unavailable: list[pl.DataFrame] = []
    for index, layout in enumerate(layouts):
        rows = data.filter(pl.col("layout") == index)
        if index in repeats:
            reason = f"under a header that repeats column {repeats[index]!r}"
            skipped.append(rows.select("lineno", "line", reason=pl.lit(reason)))
            continue
        n = len(layout.names)
        bad = rows.filter(pl.col("tokens").list.len() != n)
        skipped.append(
            bad.select(
                "lineno",
                "line",
                reason=pl.format("row has {} of {} fields", pl.col("tokens").list.len(), pl.lit(n)),
            )
        )
        rows = rows.filter(pl.col("tokens").list.len() == n)
        typed, missing, unreadable = _typed(rows, layout, source)
        skipped.append(unreadable.select("lineno", "line", "reason"))
        frames.append(typed)
        unavailable.append(missing)

    skipped_df = (
        pl.concat(skipped)
        .with_columns(source=pl.lit(source), line=pl.col("line").fill_null(""))
        .select(SKIPPED.names())
        .cast(dict(SKIPPED))
        .sort("lineno")
    )
    # Header lines are how dmon prints; other skipped lines are problems in strict mode.
    if strict:
        problems = skipped_df.filter(~pl.col("reason").is_in(["blank line", "header"]))
        if problems.height:
            r = problems.row(0, named=True)
            raise ParseError(source, r["lineno"], r["reason"], r["line"])
    samples = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    if samples.height:
        samples = _rounds(samples.sort("lineno"))
    unavailable_df = pl.concat(unavailable) if unavailable else pl.DataFrame(schema=UNAVAILABLE)
    if strict:
        check_cells(unavailable_df, source)
    return Part(source, FORMAT, lines.height, samples, skipped_df, unavailable_df)


def _layouts(comments: pl.DataFrame) -> tuple[list[Layout], dict[int, int]]:
    """Distinct names lines, and for each names line (by line number) its layout index."""
    layouts: list[Layout] = []
    segment_of: dict[int, int] = {}
    pending: tuple[int, tuple[str, ...]] | None = None
    for lineno, line in comments.select("lineno", "line").iter_rows():
        body = line.strip()[1:]
        tokens = tuple(body.split())
        if is_dmon_header("#" + body):
            pending = (lineno, tokens)
            segment_of[lineno] = _index(layouts, Layout(tokens, ("",) * len(tokens)))
            continue
        if pending is not None and len(tokens) == len(pending[1]):
            # The units line: replace the placeholder layout of its names line.
            layout = Layout(pending[1], tokens)
            segment_of[pending[0]] = _index(layouts, layout)
        pending = None
    used = sorted(set(segment_of.values()))
    renumber = {old: new for new, old in enumerate(used)}
    return [layouts[i] for i in used], {k: renumber[v] for k, v in segment_of.items()}


def _repeated(names: tuple[str, ...]) -> str | None:
    """The first column name a names line prints twice (case aside), else None."""
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            return name
        seen.add(name.lower())
    return None


def _index(layouts: list[Layout], layout: Layout) -> int:
    if layout not in layouts:
        layouts.append(layout)
    return layouts.index(layout)


def _typed(
    rows: pl.DataFrame, layout: Layout, source: str
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(samples, unavailable cells, rows whose date or time does not parse)."""
    names = [n.lower() for n in layout.names]
    token = pl.col("tokens").list.get
    exprs: list[pl.Expr] = [pl.col("lineno")]
    cells: list[tuple[pl.Expr, pl.Expr, str]] = []  # (typed, printed, field) per value column
    date_i = names.index("date") if "date" in names else None
    time_i = names.index("time") if "time" in names else None
    if date_i is not None and time_i is not None:
        text = pl.concat_str([token(date_i), token(time_i)], separator=" ")
        exprs.append(
            text.str.strptime(pl.Datetime("ms"), "%Y%m%d %H:%M:%S", strict=False).alias("ts")
        )
    elif time_i is not None:
        exprs.append(token(time_i).str.strptime(pl.Time, "%H:%M:%S", strict=False).alias("_tod"))
    used: set[str] = {"lineno", "source", "ts", "_tod", "gpu", "sample", "elapsed_s"}
    for i, (name, unit) in enumerate(zip(names, layout.units, strict=True)):
        if name in _TIME_NAMES:
            continue
        raw = token(i)
        if name == "gpu":
            exprs.append(raw.cast(pl.Int32, strict=False).alias("gpu"))
            continue
        column, scale = DMON_FIELDS.get(name, (None, 1.0))
        if column is None:
            column = column_name(name, unit)
        if column in used:  # e.g. both temp and gtemp: keep the second under its own name
            column = column_name(name, unit)
        column = unique_column(column, used)
        value = raw.cast(pl.Float64, strict=False)
        exprs.append((value * scale if scale != 1.0 else value).alias(column))
        printed = layout.names[i]
        cells.append((value, raw, printed))
    typed = rows.select(exprs).with_columns(source=pl.lit(source))
    clock = next((c for c in ("ts", "_tod") if c in typed.columns), None)
    no_time = typed.get_column(clock).is_null() if clock else pl.Series([False] * typed.height)
    no_gpu = typed.get_column("gpu").is_null() if "gpu" in typed.columns else no_time.not_()
    problem = pl.Series(
        [
            "date or time does not parse" if t else "gpu index does not parse" if g else None
            for t, g in zip(no_time, no_gpu, strict=True)
        ],
        dtype=pl.String,
    )
    ok = problem.is_null()
    kept = rows.filter(ok)
    checks = [missing_cells(kept.lazy(), *cell) for cell in cells]
    unreadable = rows.filter(~ok).with_columns(reason=problem.filter(~ok))
    return typed.filter(ok), unavailable_table(checks, source), unreadable


def _rounds(df: pl.DataFrame) -> pl.DataFrame:
    """``sample``: the polling round, which starts again whenever the GPU index does not grow."""
    gpu = pl.col("gpu")
    new_round = (gpu <= gpu.shift(1)).fill_null(False)
    df = df.with_columns(sample=new_round.cast(pl.Int64).cum_sum())
    if "_tod" in df.columns:
        # Time only (-o T): seconds since the first row, across midnight.
        secs = pl.col("_tod").cast(pl.Int64) / 1e9
        step = secs.diff().fill_null(0)
        wrapped = pl.when(step < -43200).then(step + 86400).otherwise(step)
        df = df.with_columns(elapsed_s=wrapped.cum_sum().cast(pl.Float64)).drop("_tod")
    return df


# ---------------------------------------------------------------------- the format
def _detect(peek: Peek) -> bool:
    return is_dmon_header(peek.first)


def _load(path: Path, options: Options) -> Part:
    return load_dmon(path, options.source, strict=options.strict, workdir=options.workdir)


NVIDIA_SMI_DMON = Format(
    FORMAT,
    "nvidia-smi dmon [-s …] [-o D|T|DT]",
    _detect,
    _load,
    trace_summarizer(_load),
    TRACE,
)
