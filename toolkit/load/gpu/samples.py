"""``GpuTrace``: the samples of one or more trace files on one clock, and their accounting.

Each trace format reads one file into a ``Part``; here parts get their time (``elapsed_s``, and
``ts`` on the server log's clock) and are merged into declared columns. ``util_pct`` is "a
kernel was running": a NCCL kernel waiting for its pipeline peer counts as busy; prefer
``sm_active`` where a DCGM source has it.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Collection
from dataclasses import replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load import compression
from toolkit.load import text as lines_io
from toolkit.load.gpu.caveats import part_caveats
from toolkit.load.gpu.format import Loader, Options, Part, Summarizer
from toolkit.schema.caveats import Caveat
from toolkit.schema.gpu import METRICS, SAMPLES, SKIPPED, UNAVAILABLE


class GpuTrace:
    """GPU samples of one or more files on one clock, and the accounting of every line.

    Attributes
    ----------
    samples
        One row per GPU per polling time; declared columns first (``toolkit.schema.gpu.SAMPLES``),
        then fields ppscope does not know, named from their source.
    skipped
        Every line that is not (part of) a sample, with its reason: headers, blank lines,
        cut rows, repeated headers, error messages. Per file, ``sample_lines`` plus its
        skipped lines are all its physical lines (``sources``).
    unavailable
        Cells printed instead of a number (``[N/A]``, ``[Unknown Error]``, ``-``), counted per
        source, field and text, with the first line where each appears.
    sources
        One dict per file: path, format, lines, sample_lines (lines read into samples), notes.
    caveats
        What each file's numbers should be read with (``toolkit.load.gpu.caveats``): sampling
        stalls with their length, a header given rather than read.
    """

    def __init__(self, parts: list[Part], workdir: Path | None = None) -> None:
        self.sources = [
            {
                "path": p.path,
                "format": p.format,
                "lines": p.lines,
                "sample_lines": p.sample_lines,
                "notes": list(p.notes),
            }
            for p in parts
        ]
        self._parts = parts
        self.samples = combine([p.samples for p in parts])
        self.skipped = pl.concat([p.skipped for p in parts]).cast(dict(SKIPPED))
        self.unavailable = pl.concat([p.unavailable for p in parts]).cast(dict(UNAVAILABLE))
        if workdir is not None:
            weakref.finalize(self, shutil.rmtree, workdir, True)

    def __repr__(self) -> str:
        return f"<GpuTrace {len(self.sources)} files: {self.samples.height} samples>"

    @cached_property
    def caveats(self) -> tuple[Caveat, ...]:
        """What each file's numbers should be read with (computed on first use)."""
        return tuple(c for p in self._parts for c in part_caveats(p))

    @property
    def metrics(self) -> list[str]:
        """Metric columns that hold at least one value, declared ones first."""
        return [
            c
            for c in self._metric_columns()
            if self.samples.get_column(c).null_count() < self.samples.height
        ]

    def _metric_columns(self) -> list[str]:
        extra = [c for c in self.samples.columns if c not in SAMPLES]
        return [*METRICS, *extra]

    def summary(self) -> list[dict[str, Any]]:
        """Per file: path, format, lines, sample_lines, gpus (physical GPUs; ``mig_instances``
        too when the trace has any), samples, metrics (measured columns), labels (text
        columns an exporter attached: driver version, pod...), skipped (all non-sample lines:
        ``sample_lines + skipped == lines``), problems (those that are not headers or blank),
        unavailable (cells), first_problems, notes and caveats — the shape of
        ``ppscope parse --json``."""
        out = []
        for part, meta in zip(self._parts, self.sources, strict=True):
            df = part.samples
            present = [c for c in df.columns if df.get_column(c).null_count() < df.height]
            metrics = [c for c in METRICS if c in present]
            extra = [c for c in present if c not in SAMPLES]
            # an exporter's labels (driver version, pod, ...) are text: they say where, not what
            labels = [c for c in extra if not df.schema[c].is_numeric()]
            metrics += [c for c in extra if c not in labels]
            problems = part.skipped.filter(~pl.col("reason").is_in(list(BENIGN)))
            out.append(
                {
                    **{k: meta[k] for k in ("path", "format", "lines", "sample_lines")},
                    "gpus": gpu_count(df),
                    **({"mig_instances": n} if (n := mig_count(df)) else {}),
                    "samples": df.height,
                    "metrics": metrics,
                    "labels": labels,
                    "skipped": part.skipped.height,
                    "problems": problems.height,
                    "unavailable": int(part.unavailable.get_column("count").sum() or 0),
                    "first_problems": problems.head(5)
                    .select("lineno", "reason", "line")
                    .to_dicts(),
                    "notes": meta["notes"],
                    "caveats": [c.to_dict() for c in self.caveats if c.file == part.path],
                }
            )
        return out


BENIGN = (
    "blank line",
    "header",
    "repeated header",
    "comment",
    "scrape time",
    "end of capture",
    "table frame",
    "print time",
)
"""Skip reasons that are part of a format, not a problem with the file."""


def rows_frame(
    rows: list[dict[str, Any]],
    strings: Collection[str],
    *,
    integers: Collection[str] = ("lineno",),
    gpu_ids: Collection[str] = ("gpu",),
) -> pl.DataFrame:
    """Sample rows read record by record (exporter scrapes, telemetry JSONL) as a frame: every
    key any row has is a column, ``ts`` a time, ``integers`` Int64, ``gpu_ids`` Int32,
    ``strings`` text and every other column a float."""
    if not rows:
        return pl.DataFrame(schema={"source": pl.String, "lineno": pl.Int64})
    columns: dict[str, None] = {}
    for r in rows:
        columns.update(dict.fromkeys(r))
    schema: dict[str, pl.DataType] = {}
    for c in columns:
        if c in integers:
            schema[c] = pl.Int64()
        elif c in gpu_ids:
            schema[c] = pl.Int32()
        elif c == "ts":
            schema[c] = pl.Datetime("ms")
        elif c in strings:
            schema[c] = pl.String()
        else:
            schema[c] = pl.Float64()
    return pl.DataFrame([{c: r.get(c) for c in columns} for r in rows], schema=schema, orient="row")


def gpu_count(df: pl.DataFrame) -> int:
    """Distinct physical GPUs in a samples frame, by the best identity it has: index (with
    host), else UUID or bus id, else product name (a lower bound). A MIG instance is a part of
    its GPU, never another GPU; an instance row that names no GPU (dcgmi ``GPU-I``) adds none."""
    if not df.height:
        return 0
    for keys in (("host", "gpu"), ("uuid",), ("pci_bus_id",), ("name",)):
        cols = [c for c in keys if c in df.columns and df.get_column(c).null_count() < df.height]
        if cols and (keys[0] != "host" or "gpu" in cols):
            named = df.filter(pl.col(keys[-1]).is_not_null())
            return named.select(pl.struct(cols)).n_unique()
    return 1


def mig_count(df: pl.DataFrame) -> int:
    """Distinct MIG GPU instances in a samples frame (per host and GPU where known)."""
    if "mig_instance" not in df.columns:
        return 0
    keys = [c for c in ("host", "gpu", "uuid", "mig_instance") if c in df.columns]
    return df.filter(pl.col("mig_instance").is_not_null()).select(pl.struct(keys)).n_unique()


def combine(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Declared columns in declared order (absent ones null), then the others by first use."""
    extra: dict[str, pl.DataType] = {}
    for df in frames:
        for name, dtype in df.schema.items():
            if name not in SAMPLES and name not in extra:
                extra[name] = dtype
    full = []
    for df in frames:
        missing = [
            pl.lit(None, t).alias(n)
            for n, t in (*SAMPLES.items(), *extra.items())
            if n not in df.columns
        ]
        df = df.with_columns(missing) if missing else df
        full.append(df.select([*SAMPLES.names(), *extra]).cast(dict(SAMPLES)))
    if not full:
        return pl.DataFrame(schema=SAMPLES)
    if len(full) == 1:
        return full[0]
    out = pl.concat(full, how="vertical_relaxed")
    return out.sort(["ts", "source", "lineno"], nulls_last=True, maintain_order=True)


def timed(part: Part, interval_s: float | None, start: datetime | None, offset_s: float) -> Part:
    """``elapsed_s``, and ``ts`` on the log's clock: shifted by the offset, or built from
    ``start`` + elapsed for sources that print no time."""
    df = part.samples
    if not df.height:
        return part
    if "ts" in df.columns and df.get_column("ts").null_count() < df.height:
        first = df.get_column("ts").min()
        df = df.with_columns(
            elapsed_s=(pl.col("ts") - pl.lit(first)).dt.total_milliseconds() / 1000.0
        )
    else:
        has_elapsed = "elapsed_s" in df.columns and df.get_column("elapsed_s").null_count() == 0
        if not has_elapsed and "sample" in df.columns and interval_s is not None:
            df = df.with_columns(elapsed_s=pl.col("sample").cast(pl.Float64) * interval_s)
            has_elapsed = True
        if has_elapsed and start is not None:
            millis = (pl.col("elapsed_s") * 1000).round().cast(pl.Int64)
            base = pl.lit(start).cast(pl.Datetime("ms"))
            df = df.with_columns(ts=base + pl.duration(milliseconds=millis))
    if offset_s and "ts" in df.columns:
        df = df.with_columns(pl.col("ts") + pl.duration(milliseconds=round(offset_s * 1000)))
    part.samples = df
    return part


def trace_part(
    load: Loader,
    plain: Path,
    options: Options,
    problem: str | None = None,
    start: datetime | None = None,
    offset_s: float = 0.0,
) -> Part:
    """One trace file read by its format's ``load``, with its time columns.

    ``plain`` is the uncompressed file, ``problem`` what went wrong decompressing it (kept as
    a note); ``start`` and ``offset_s`` as in ``load_gpu_trace``.
    """
    part = load(plain, options)
    if problem:
        part.notes = (*part.notes, problem)
    return timed(part, options.interval_s, start, offset_s)


def trace_summarizer(load: Loader) -> Summarizer:
    """The ``ppscope parse --json`` entry of a trace format: the file read alone as a trace."""

    def summarize(path: Path, options: Options) -> dict[str, Any]:
        workdir = lines_io.workdir()
        try:
            plain, problem = compression.plain_copy(path, workdir)
            read = replace(options, source=str(path), workdir=workdir)
            part = trace_part(load, plain, read, problem)
        except BaseException:
            shutil.rmtree(workdir, True)
            raise
        return GpuTrace([part], workdir).summary()[0]

    return summarize
