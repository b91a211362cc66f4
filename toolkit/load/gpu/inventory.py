"""Which GPU is which: ``nvidia-smi -L`` listings and ``--query-compute-apps`` CSV.

Compute-app rows name their GPU by UUID (or bus id), not by index, so a ``-L`` listing of the
same host is what turns them into indices. MIG children of a GPU are listed under it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.gpu.cells import UNSUPPORTED
from toolkit.load.gpu.fields import column_name, unique_column
from toolkit.load.gpu.format import COMPANION, Format, Options, Peek
from toolkit.load.gpu.smi import is_header
from toolkit.load.inputs import check_input, head_lines
from toolkit.schema.gpu import APPS, GPU_LIST

LIST_FORMAT = "nvidia-smi-list"
APPS_FORMAT = "nvidia-smi-apps"
_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: ([^)\s]+)\)\s*$")
_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)\s]+)\)\s*$")
_APPS_FIELDS = {
    "timestamp": "ts",
    "pid": "pid",
    "process_name": "process_name",
    "name": "process_name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci_bus_id",
    "used_memory": "used_memory_mib",
    "used_gpu_memory": "used_memory_mib",
}


def is_gpu_list(lines: list[str]) -> bool:
    """True when the first non-empty line is ``GPU 0: <name> (UUID: GPU-…)``."""
    body = [ln for ln in lines if ln.strip()]
    return bool(body) and _GPU.match(body[0].strip()) is not None


def is_apps_header(line: str) -> bool:
    """True for a ``--query-compute-apps`` header (``pid``, ``process_name``, ``used_…``)."""
    names = {re.sub(r"\s*\[.*\]$", "", c.strip()) for c in line.split(",")}
    return bool(names & {"pid", "process_name", "used_gpu_memory", "used_memory"})


def load_gpu_list(path: str | Path) -> pl.DataFrame:
    """``nvidia-smi -L`` → one row per GPU and per MIG device (``toolkit.schema.gpu.GPU_LIST``).

    Raises
    ------
    ParseError
        At a line that is neither a GPU nor a MIG device line.
    """
    path = check_input(path)
    rows = []
    parent: dict[str, object] | None = None
    for lineno, line in enumerate(head_lines(path, n=1_000_000), 1):
        if not line.strip():
            continue
        g = _GPU.match(line.strip())
        m = _MIG.match(line)
        if g:
            parent = {"gpu": int(g.group(1)), "name": g.group(2), "uuid": g.group(3)}
            rows.append(
                (str(path), lineno, parent["gpu"], g.group(2), g.group(3), None, None, None)
            )
        elif m and parent is not None:
            rows.append(
                (
                    str(path),
                    lineno,
                    parent["gpu"],
                    parent["name"],
                    m.group(3),
                    m.group(1),
                    int(m.group(2)),
                    parent["uuid"],
                )
            )
        else:
            raise ParseError(path, lineno, "not an nvidia-smi -L line", line)
    return pl.DataFrame(rows, schema=GPU_LIST, orient="row")


def load_compute_apps(path: str | Path, gpu_list: pl.DataFrame | None = None) -> pl.DataFrame:
    """``nvidia-smi --query-compute-apps=… --format=csv`` → one row per process.

    ``gpu_list`` (from ``load_gpu_list``) fills ``gpu`` from each row's UUID. Fields ppscope
    does not know are kept as text columns named from the header.

    Raises
    ------
    ParseError
        When the file has no header or a row has another number of fields than the header.
    """
    path = check_input(path)
    text = head_lines(path, n=10_000_000, max_bytes=1 << 30)
    body = [(n, ln) for n, ln in enumerate(text, 1) if ln.strip()]
    if not body or not is_apps_header(body[0][1]):
        raise ParseError(path, body[0][0] if body else None, "no --query-compute-apps header")
    header = [c.strip() for c in body[0][1].split(",")]
    names: list[str] = []
    taken = {"source", "lineno", "gpu"}
    for cell in header:
        m = re.match(r"^(.*?)\s*\[([^\]]*)\]$", cell)
        name, unit = (m.group(1), m.group(2)) if m else (cell, None)
        names.append(unique_column(_APPS_FIELDS.get(name) or column_name(name, unit), taken))
    rows = []
    for lineno, line in body[1:]:
        cells = [c.strip() for c in line.split(",")]
        if cells == header:
            continue
        if len(cells) != len(names):
            raise ParseError(
                path, lineno, f"row has {len(cells)} fields, header {len(names)}", line
            )
        row: dict[str, object] = {"source": str(path), "lineno": lineno}
        for name, cell in zip(names, cells, strict=True):
            row[name] = None if cell in UNSUPPORTED or cell.startswith("[") else cell
        rows.append(row)
    extra = [n for n in names if n not in APPS]
    df = (
        pl.DataFrame(
            rows,
            schema={
                **{n: pl.String for n in APPS if n not in ("source", "lineno")},
                **dict.fromkeys(extra, pl.String),
                "source": pl.String,
                "lineno": pl.Int64,
            },
            orient="row",
        )
        if rows
        else pl.DataFrame(
            schema={**{n: pl.String for n in APPS}, **dict.fromkeys(extra, pl.String)}
        )
    )
    df = df.with_columns(
        ts=pl.col("ts").str.strptime(pl.Datetime("ms"), "%Y/%m/%d %H:%M:%S%.f", strict=False),
        pid=pl.col("pid").cast(pl.Int64, strict=False),
        used_memory_mib=pl.col("used_memory_mib")
        .str.strip_chars(" MiB")
        .cast(pl.Float64, strict=False),
        gpu=pl.lit(None, pl.Int32),
        lineno=pl.col("lineno").cast(pl.Int64),
    )
    if gpu_list is not None and df.height:
        index = dict(gpu_list.select("uuid", "gpu").iter_rows())
        df = df.with_columns(
            gpu=pl.col("uuid").replace_strict(index, default=None, return_dtype=pl.Int32)
        )
    return df.select([*APPS.names(), *extra]).cast(dict(APPS))


# ---------------------------------------------------------------------- the formats
def _detect_list(peek: Peek) -> bool:
    return is_gpu_list(peek.body)


def _summarize_list(path: Path, options: Options) -> dict[str, Any]:
    listing = load_gpu_list(path)
    gpus = listing.filter(pl.col("mig_profile").is_null()).height
    return {
        "path": str(path),
        "format": LIST_FORMAT,
        "gpus": gpus,
        "mig_devices": listing.height - gpus,
    }


def _detect_apps(peek: Peek) -> bool:
    return is_header(peek.first) and is_apps_header(peek.first)


def _summarize_apps(path: Path, options: Options) -> dict[str, Any]:
    apps = load_compute_apps(path)
    keys = [c for c in ("uuid", "pci_bus_id") if apps.get_column(c).null_count() < apps.height]
    return {
        "path": str(path),
        "format": APPS_FORMAT,
        "gpus": apps.select(keys).n_unique() if keys and apps.height else 0,
        "processes": apps.height,
    }


NVIDIA_SMI_LIST = Format(
    LIST_FORMAT,
    "nvidia-smi -L: GPUs and their MIG devices with UUIDs",
    _detect_list,
    lambda path, options: load_gpu_list(path),
    _summarize_list,
    COMPANION,
)
NVIDIA_SMI_APPS = Format(
    APPS_FORMAT,
    "nvidia-smi --query-compute-apps=… --format=csv: processes per GPU",
    _detect_apps,
    lambda path, options: load_compute_apps(path),
    _summarize_apps,
    COMPANION,
)
