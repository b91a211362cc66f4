"""Which GPU is which: ``nvidia-smi -L`` listings and ``--query-compute-apps`` CSV.

Compute-app rows name their GPU by UUID (or bus id), not by index, so an inventory of the same
host (a ``-L`` listing, or a GPU trace that prints ``uuid``/``pci.bus_id`` beside ``index``) is
what turns them into indices; a MIG device's UUID maps to its GPU. A listing looped with ``-l``
prints its header once: a new listing starts where the query time jumps (``SNAPSHOT_GAP``).
Process names are the workload's own text and may hold commas: a row with more fields than the
header gives the surplus to ``process_name``.
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
from toolkit.schema.gpu import APP_COUNTS, APPS, GPU_LIST

LIST_FORMAT = "nvidia-smi-list"
APPS_FORMAT = "nvidia-smi-apps"
_GPU = re.compile(r"^GPU (\d+): (.*?) \(UUID: ([^)\s]+)\)\s*$")
_MIG = re.compile(r"^\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)\s]+)\)\s*$")
_DOMAIN = r"^[0-9A-F]+:([0-9A-F]+:[0-9A-F]+\.[0-9A-F]+)$"  # a bus id with its domain
SNAPSHOT_GAP_S = 0.05
"""Rows of one listing carry their own milliseconds; a larger step starts the next listing."""
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

    ``gpu_list`` (``load_gpu_list``, or any frame with ``gpu`` and ``uuid`` and/or
    ``pci_bus_id``, such as GPU trace samples) fills ``gpu`` from each row's UUID, else its bus
    id. Fields ppscope does not know are kept as text columns named from the header.

    Raises
    ------
    ParseError
        When the file has no header, or a row has fewer fields than the header (or more, and
        no ``process_name`` to hold them).
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
        if len(cells) > len(names) and "process_name" in names:
            at = names.index("process_name")
            extra = len(cells) - len(names)
            name = ",".join(line.split(",")[at : at + extra + 1]).strip()
            cells = [*cells[:at], name, *cells[at + extra + 1 :]]
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
        df = df.with_columns(gpu=_gpu_index(gpu_list))
    return df.select([*APPS.names(), *extra]).cast(dict(APPS))


def _gpu_index(inventory: pl.DataFrame) -> pl.Expr:
    """Each row's GPU index from ``inventory``: by UUID, else by PCI bus id."""
    found = pl.lit(None, pl.Int32)
    for key in ("pci_bus_id", "uuid"):  # the UUID, asked last, decides first
        if key not in inventory.columns:
            continue
        pairs = inventory.select(key, "gpu").drop_nulls().unique(key, keep="first")
        index = dict(pairs.iter_rows())
        if key == "pci_bus_id":  # 00000000:18:00.0 and 0000:18:00.0 name one device
            index = {_bus(k): v for k, v in index.items()}
            lookup = pl.col(key).str.to_uppercase().str.replace(_DOMAIN, "${1}")
        else:
            lookup = pl.col(key)
        found = lookup.replace_strict(index, default=None, return_dtype=pl.Int32).fill_null(found)
    return found


def _bus(bus_id: str) -> str:
    """A PCI bus id without its domain, upper case (``18:00.0``)."""
    return re.sub(_DOMAIN, r"\1", bus_id.upper())


def with_listing(apps: pl.DataFrame) -> pl.DataFrame:
    """``apps`` with ``snapshot``: the listing of its file each row belongs to (0-based; a new
    one where the query time jumps by more than ``SNAPSHOT_GAP_S``, one per file untimed)."""
    step = pl.col("ts").diff().over("source").dt.total_milliseconds().abs()
    jump = step.fill_null(0) > SNAPSHOT_GAP_S * 1000
    return apps.with_columns(snapshot=jump.cum_sum().over("source").cast(pl.Int64))


def processes_per_gpu(apps: pl.DataFrame) -> pl.DataFrame:
    """How many compute processes each GPU ran in each listing, and the memory they held
    (``toolkit.schema.gpu.APP_COUNTS``); one listing per file when rows carry no time.

    A GPU without a process is not listed by nvidia-smi, so it has no row (not a zero).
    """
    if not apps.height:
        return pl.DataFrame(schema=APP_COUNTS)
    keyed = with_listing(apps).with_columns(_known=pl.col("used_memory_mib").is_not_null())
    counts = keyed.group_by(
        "source", "snapshot", "gpu", "uuid", "pci_bus_id", maintain_order=True
    ).agg(
        ts=pl.col("ts").first(),
        processes=pl.len().cast(pl.Int64),
        used_memory_mib=pl.when(pl.col("_known").any()).then(pl.col("used_memory_mib").sum()),
    )
    return counts.select(APP_COUNTS.names()).cast(dict(APP_COUNTS))


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
    counts = processes_per_gpu(apps)
    return {
        "path": str(path),
        "format": APPS_FORMAT,
        "gpus": apps.select(keys).n_unique() if keys and apps.height else 0,
        "processes": apps.height,
        "listings": counts.get_column("snapshot").n_unique(),
        "most_per_gpu": int(counts.get_column("processes").max() or 0),
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
