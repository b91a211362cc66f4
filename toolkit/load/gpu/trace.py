"""``load_gpu_trace``: every common GPU monitoring format as one tidy, typed time series.

Formats (recognized from content, never from the file name; ``.gz`` read transparently):

- ``nvidia-smi-csv``   ``nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits] [-l|-lms]``
- ``nvidia-smi-dmon``  ``nvidia-smi dmon [-s …] [-o D|T|DT]``
- ``dcgmi-dmon``       ``dcgmi dmon -e …`` (no timestamps: give ``interval_s``, and ``start``)
- ``dcgm-exporter``    Prometheus text from dcgm-exporter, one or many scrapes

Companion files have their own loaders (``load_topology``, ``load_compute_apps``,
``load_gpu_list``) and format names ``nvidia-smi-topo``, ``nvidia-smi-apps``,
``nvidia-smi-list``.

The result has one row per GPU per polling time (``GpuTrace.samples``, declared in
``gpu_schema.SAMPLE_COLUMNS``), the lines that are no sample (``skipped``) and the cells that
are no value (``unavailable``). ``util_pct`` is "a kernel was running" — a NCCL kernel waiting
for its pipeline peer counts as busy; prefer ``sm_active`` where a DCGM source has it.
"""

from __future__ import annotations

import shutil
import weakref
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError, UnknownFormat
from toolkit.load import text as lines_io
from toolkit.load.gpu import dcgm as gpu_dcgm
from toolkit.load.gpu import dmon as gpu_dmon
from toolkit.load.gpu import inventory as gpu_inventory
from toolkit.load.gpu import smi as gpu_smi
from toolkit.load.gpu import topology as gpu_topology
from toolkit.load.gpu.inventory import load_compute_apps, load_gpu_list
from toolkit.load.gpu.roles import gpu_roles
from toolkit.load.gpu.smi import Part
from toolkit.load.gpu.topology import Topology, load_topology
from toolkit.schema.gpu import METRICS, SAMPLES, SKIPPED, UNAVAILABLE

__all__ = [
    "GPU_FORMATS",
    "TRACE_FORMATS",
    "GpuTrace",
    "Topology",
    "gpu_roles",
    "load_compute_apps",
    "load_gpu_list",
    "load_gpu_trace",
    "load_topology",
    "sniff_gpu_format",
    "summarize_gpu_file",
]

TRACE_FORMATS = ("nvidia-smi-csv", "nvidia-smi-dmon", "dcgmi-dmon", "dcgm-exporter")
OTHER_FORMATS = ("nvidia-smi-topo", "nvidia-smi-apps", "nvidia-smi-list")
GPU_FORMATS = TRACE_FORMATS + OTHER_FORMATS
"""Every format name ``sniff_gpu_format`` can return."""


def sniff_gpu_format(path: str | Path) -> str | None:
    """The GPU format of a file from its first lines (``nvidia-smi-csv``, ...), else None."""
    lines = _unquoted(lines_io.head_lines(Path(path), n=200))
    body = [ln for ln in lines if ln.strip()]
    if not body:
        return None
    first = body[0].strip()
    if gpu_dmon.is_dmon_header(first):
        return "nvidia-smi-dmon"
    if gpu_dcgm.is_dcgmi_header(first):
        return "dcgmi-dmon"
    if gpu_dcgm.is_exporter_text(body):
        return "dcgm-exporter"
    if gpu_inventory.is_gpu_list(body):
        return "nvidia-smi-list"
    if gpu_topology.find_header(lines) is not None:
        return "nvidia-smi-topo"
    if gpu_smi.is_header(first):
        return "nvidia-smi-apps" if gpu_inventory.is_apps_header(first) else "nvidia-smi-csv"
    if gpu_smi.looks_like_values(first):
        return "nvidia-smi-csv"
    return None


def _unquoted(lines: list[str]) -> list[str]:
    """Lines pasted into markdown quotes (``> ``, ``\\#``) with the quoting taken off."""
    quoted = [ln for ln in lines if ln.strip()]
    if quoted and all(ln.startswith(">") for ln in quoted):
        lines = [ln[1:].removeprefix(" ") for ln in lines]
    return [ln.replace("\\#", "#", 1) if ln.lstrip().startswith("\\#") else ln for ln in lines]


class GpuTrace:
    """GPU samples of one or more files on one clock, and the accounting of every line.

    Attributes
    ----------
    samples
        One row per GPU per polling time; declared columns first (``gpu_schema.SAMPLES``),
        then fields ppscope does not know, named from their source.
    skipped
        Every line that is not (part of) a sample, with its reason: headers, blank lines,
        cut rows, repeated headers, error messages.
    unavailable
        Cells printed instead of a number (``[N/A]``, ``[Unknown Error]``, ``-``), counted per
        source, field and text, with the first line where each appears.
    sources
        One dict per file: path, format, lines, notes.
    """

    def __init__(self, parts: list[Part], workdir: Path | None = None) -> None:
        self.sources = [
            {"path": p.path, "format": p.format, "lines": p.lines, "notes": list(p.notes)}
            for p in parts
        ]
        self._parts = parts
        self.samples = _combine([p.samples for p in parts])
        self.skipped = pl.concat([p.skipped for p in parts]).cast(dict(SKIPPED))
        self.unavailable = pl.concat([p.unavailable for p in parts]).cast(dict(UNAVAILABLE))
        if workdir is not None:
            weakref.finalize(self, shutil.rmtree, workdir, True)

    def __repr__(self) -> str:
        return f"<GpuTrace {len(self.sources)} files: {self.samples.height} samples>"

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
        """Per file: path, format, lines, gpus, samples, metrics, skipped (all non-sample
        lines), problems (those that are not headers or blank), unavailable (cells),
        first_problems and notes — the shape of ``ppscope parse --json``."""
        out = []
        for part, meta in zip(self._parts, self.sources, strict=True):
            df = part.samples
            present = [c for c in df.columns if df.get_column(c).null_count() < df.height]
            metrics = [c for c in METRICS if c in present]
            metrics += [c for c in present if c not in SAMPLES]
            problems = part.skipped.filter(~pl.col("reason").is_in(list(BENIGN)))
            out.append(
                {
                    **{k: meta[k] for k in ("path", "format", "lines")},
                    "gpus": gpu_count(df),
                    "samples": df.height,
                    "metrics": metrics,
                    "skipped": part.skipped.height,
                    "problems": problems.height,
                    "unavailable": int(part.unavailable.get_column("count").sum() or 0),
                    "first_problems": problems.head(5)
                    .select("lineno", "reason", "line")
                    .to_dicts(),
                    "notes": meta["notes"],
                }
            )
        return out


BENIGN = ("blank line", "header", "repeated header", "comment", "scrape time", "end of capture")
"""Skip reasons that are part of a format, not a problem with the file."""


def gpu_count(df: pl.DataFrame) -> int:
    """Distinct GPUs (and MIG instances) in a samples frame, by the best identity it has:
    index (with host), else UUID or bus id, else product name (a lower bound)."""
    if not df.height:
        return 0
    for keys in (("host", "gpu", "mig_instance"), ("uuid",), ("pci_bus_id",), ("name",)):
        cols = [c for c in keys if c in df.columns and df.get_column(c).null_count() < df.height]
        if cols and (keys[0] != "host" or "gpu" in cols):
            return df.select(pl.struct(cols)).n_unique()
    return 1


def _combine(frames: list[pl.DataFrame]) -> pl.DataFrame:
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


def load_gpu_trace(
    paths: str | Path | Iterable[str | Path],
    *,
    fields: Sequence[str] | str | None = None,
    interval_s: float | None = None,
    start: datetime | None = None,
    clock_offset_s: float = 0.0,
    strict: bool = False,
) -> GpuTrace:
    """Read GPU monitoring traces into one tidy table on the server log's clock.

    Parameters
    ----------
    paths
        One file or several (any of ``TRACE_FORMATS``, mixed freely); ``.gz`` is fine.
    fields
        The ``--query-gpu`` field list of a ``noheader`` CSV (a list, or ``"a,b,c"`` as in
        ``run.toml``'s ``[gpu_trace] fields``). Ignored when the file has a header.
    interval_s
        Sampling interval of formats without timestamps (``dcgmi dmon -d``, exporter
        scrapes): sample *k* is ``k × interval_s`` after the first. Without it ``elapsed_s``
        and ``ts`` stay null for those formats.
    start
        Local time of the first sample of a timestamp-less source; with ``interval_s`` it
        fills ``ts``.
    clock_offset_s
        Seconds added to every trace timestamp (``run.toml``'s ``clock_offset_s``), so the
        trace sits on the server log's clock.
    strict
        Raise ``ParseError`` at the first line that is not a sample for a reason other than a
        header or a blank line, and at the first cell that holds an error instead of a value.

    Returns
    -------
    GpuTrace
        ``samples``, ``skipped``, ``unavailable``, ``sources`` and ``summary()``.
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not files:
        raise ToolkitError("no gpu trace files given")
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    workdir = lines_io.workdir()
    parts: list[Part] = []
    try:
        for path in files:
            if not path.is_file():
                raise ToolkitError(f"{path}: no such file")
            plain, problem = lines_io.plain_copy(path, workdir)
            fmt = sniff_gpu_format(plain)
            source = str(path)
            if fmt == "nvidia-smi-csv":
                part = gpu_smi.load_smi_csv(
                    plain, source, fields=fields, strict=strict, workdir=workdir
                )
            elif fmt == "nvidia-smi-dmon":
                part = gpu_dmon.load_dmon(plain, source, strict=strict, workdir=workdir)
            elif fmt == "dcgmi-dmon":
                part = gpu_dcgm.load_dcgmi(
                    plain, source, interval_s=interval_s, strict=strict, workdir=workdir
                )
            elif fmt == "dcgm-exporter":
                part = gpu_dcgm.load_exporter(plain, source, interval_s=interval_s, strict=strict)
            elif fmt in OTHER_FORMATS:
                raise UnknownFormat(path, f"{fmt} is no time series: use its own loader")
            else:
                raise UnknownFormat(path, "not a gpu trace ppscope reads")
            if problem:
                part.notes = (*part.notes, problem)
            parts.append(_timed(part, interval_s, start, clock_offset_s))
    except BaseException:
        shutil.rmtree(workdir, True)
        raise
    return GpuTrace(parts, workdir)


def _timed(part: Part, interval_s: float | None, start: datetime | None, offset_s: float) -> Part:
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


def summarize_gpu_file(
    path: str | Path,
    *,
    fields: Sequence[str] | str | None = None,
    interval_s: float | None = None,
    strict: bool = False,
) -> dict[str, Any]:
    """The ``ppscope parse --json`` entry of any GPU file (all seven formats).

    Traces give ``gpus``, ``samples``, ``metrics``, ``skipped``; a topology gives ``gpus``
    and ``interconnect``; ``-L`` and compute-apps give ``gpus`` and their row counts.

    Raises
    ------
    UnknownFormat
        When the file is none of the GPU formats.
    """
    path = Path(path)
    fmt = sniff_gpu_format(path)
    if fmt in TRACE_FORMATS:
        trace = load_gpu_trace(path, fields=fields, interval_s=interval_s, strict=strict)
        return trace.summary()[0]
    if fmt == "nvidia-smi-topo":
        return load_topology(path).summary()
    if fmt == "nvidia-smi-list":
        listing = load_gpu_list(path)
        gpus = listing.filter(pl.col("mig_profile").is_null()).height
        return {
            "path": str(path),
            "format": fmt,
            "gpus": gpus,
            "mig_devices": listing.height - gpus,
        }
    if fmt == "nvidia-smi-apps":
        apps = load_compute_apps(path)
        keys = [c for c in ("uuid", "pci_bus_id") if apps.get_column(c).null_count() < apps.height]
        return {
            "path": str(path),
            "format": fmt,
            "gpus": apps.select(keys).n_unique() if keys and apps.height else 0,
            "processes": apps.height,
        }
    raise UnknownFormat(path, "not a gpu format ppscope reads")
