"""``load_gpu_trace``: every common GPU monitoring format as one tidy, typed time series.

The time series formats (recognized from content, never from the file name; compressed files read
transparently) are the ``trace`` kind of ``toolkit.load.gpu.FORMATS``: ``nvidia-smi-csv``,
``nvidia-smi-dmon``, ``dcgmi-dmon`` (no timestamps: give ``interval_s``, and ``start``) and
``dcgm-exporter``. Companion files have their own loaders (``load_topology``,
``load_compute_apps``, ``load_gpu_list``) and format names ``nvidia-smi-topo``,
``nvidia-smi-apps``, ``nvidia-smi-list``; ``summarize_gpu_file`` summarizes any of them.

The result has one row per GPU per polling time (``GpuTrace.samples``, declared in
``toolkit.schema.gpu.SAMPLE_COLUMNS``), the lines that are no sample (``skipped``) and the
cells that are no value (``unavailable``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError, UnknownFormat
from toolkit.load import compression
from toolkit.load import text as lines_io
from toolkit.load.gpu import FORMATS, sniff_gpu_format
from toolkit.load.gpu.cached import cached_part
from toolkit.load.gpu.format import TRACE, Loader, Options, Part
from toolkit.load.gpu.inventory import load_compute_apps, load_gpu_list, processes_per_gpu
from toolkit.load.gpu.roles import gpu_roles
from toolkit.load.gpu.samples import GpuTrace, timed
from toolkit.load.gpu.topology import Topology, load_topology
from toolkit.load.inputs import check_input

__all__ = [
    "GpuTrace",
    "Topology",
    "gpu_roles",
    "load_compute_apps",
    "load_gpu_list",
    "load_gpu_trace",
    "load_topology",
    "processes_per_gpu",
    "sniff_gpu_format",
    "summarize_gpu_file",
]


def load_gpu_trace(
    paths: str | Path | Iterable[str | Path],
    *,
    fields: Sequence[str] | str | None = None,
    interval_s: float | None = None,
    start: datetime | None = None,
    clock_offset_s: float = 0.0,
    strict: bool = False,
    cache: bool = True,
) -> GpuTrace:
    """Read GPU monitoring traces into one tidy table on the server log's clock.

    Parameters
    ----------
    paths
        One file or several (any time series format, mixed freely); compressed files are fine.
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
    cache
        Keep each file's typed tables as Parquet in the cache the logs use (``.ppscope-cache``
        beside the input, or ``~/.cache/ppscope``), so the next load of the unchanged file
        reads them back instead of the CSV. Strict loads always read the file.

    Returns
    -------
    GpuTrace
        ``samples``, ``skipped``, ``unavailable``, ``sources`` and ``summary()``.
    """
    files = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    if not files:
        raise ToolkitError("no gpu trace files given")
    workdir = lines_io.workdir()
    parts: list[Part] = []
    try:
        for path in files:
            check_input(path)
            fmt = FORMATS.get(sniff_gpu_format(path) or "")
            if fmt is None:
                raise UnknownFormat(path, "not a gpu trace ppscope reads")
            if fmt.kind != TRACE:
                raise UnknownFormat(path, f"{fmt.name} is no time series: use its own loader")
            options = _options(fields, interval_s, strict, source=str(path), workdir=workdir)
            read = partial(_read_part, path, fmt.load, options, workdir)
            part = cached_part(path, fmt.name, options, read) if cache else read()
            parts.append(timed(part, options.interval_s, start, clock_offset_s))
    except BaseException:
        shutil.rmtree(workdir, True)
        raise
    return GpuTrace(parts, workdir)


def _read_part(path: Path, load: Loader, options: Options, workdir: Path) -> Part:
    """One trace file read by its format (a compressed one from a plain copy), untimed."""
    plain, problem = compression.plain_copy(path, workdir)
    part = load(plain, options)
    if problem:
        part.notes = (*part.notes, problem)
    return part


def summarize_gpu_file(
    path: str | Path,
    *,
    fields: Sequence[str] | str | None = None,
    interval_s: float | None = None,
    strict: bool = False,
) -> dict[str, Any]:
    """The ``ppscope parse --json`` entry of any GPU file, from its format's ``summarize``.

    Traces give ``gpus``, ``samples``, ``metrics``, ``skipped``; a topology gives ``gpus``
    and ``interconnect``; ``-L`` and compute-apps give ``gpus`` and their row counts.

    Raises
    ------
    UnknownFormat
        When the file is none of the GPU formats.
    """
    path = check_input(path)
    fmt = FORMATS.get(sniff_gpu_format(path) or "")
    if fmt is None:
        raise UnknownFormat(path, "not a gpu format ppscope reads")
    return fmt.summarize(path, _options(fields, interval_s, strict, source=str(path)))


def _options(
    fields: Sequence[str] | str | None,
    interval_s: float | None,
    strict: bool,
    source: str,
    workdir: Path | None = None,
) -> Options:
    """Reader options; ``fields`` may be ``"a,b,c"`` as in ``run.toml``."""
    if isinstance(fields, str):
        fields = [f.strip() for f in fields.split(",") if f.strip()]
    return Options(source, fields, interval_s, strict, workdir)
