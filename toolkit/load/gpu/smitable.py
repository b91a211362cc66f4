"""The default ``nvidia-smi`` table (no arguments), once or repeated by ``nvidia-smi -l N``.

Each print is a box per GPU: a first row ``|   0  NVIDIA H100 80GB HBM3   On  |
00000000:18:00.0 Off |   0 |`` (index, name, persistence, bus id, display, ECC), a second row
``| N/A   34C    P0   70W /  700W |   1MiB /  81559MiB |   0%   Default |`` (fan, temperature,
performance state, power draw / cap, memory used / total, utilization, compute mode), and on
current drivers a third (MIG mode). Older drivers print narrower boxes and cut long names
(``NVIDIA A100-SXM...``); on Windows the persistence column is the driver model (``WDDM``,
``TCC``). Above each print nvidia-smi writes the local time (``Mon Jan  5 10:00:00 2026``, 1 s
resolution); a table pasted without it has no time (``sample`` numbers the prints).

One sample per GPU per print, from its first two rows. Every other line (the frame, the
headers, the process list, the MIG rows) is skipped as ``table frame``, the time lines as
``print time``. The table is a page for people, read line by line; a file of it is small.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import polars as pl

from toolkit.errors import ParseError
from toolkit.load.gpu.cells import UNSUPPORTED, check_cells, value_kind
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.schema.gpu import SKIPPED, UNAVAILABLE

__all__ = ["FORMAT", "NVIDIA_SMI_TABLE", "is_print_time", "load_smi_table"]

FORMAT = "nvidia-smi-table"
FRAME = "table frame"
"""Skip reason of the table's borders, headers, process list and MIG rows."""
PRINT_TIME = "print time"
"""Skip reason of the time line nvidia-smi prints above each table."""

_TIME = re.compile(
    r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
    r" +\d{1,2} \d\d:\d\d:\d\d \d{4}$"
)
_HEADER = re.compile(r"^\| GPU  Name +(?:Persistence-M|TCC/WDDM|Driver-Model) *\|")
_FIRST = re.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?P<name>\S.*?)\s+(?P<persistence>On|Off|N/A|WDDM|TCC|MCDM)\s*"
    r"\|\s*(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+\S+\s*\|"
)
_SECOND = re.compile(
    r"^\|\s*(?P<fan>\S+)\s+(?P<temp>\S+)\s+(?P<pstate>\S+)\s+(?P<power>\S+)\s*/\s*(?P<cap>\S+)\s*"
    r"\|\s*(?P<used>\S+)\s*/\s*(?P<total>\S+)\s*\|\s*(?P<util>\S+)\s+\S"
)
_CUT = "gpu row without its second row (the print was cut?)"
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)(?:%|C|W|MiB)$")
# second-row cell → (column, field as the table's header names it)
_CELLS = {
    "fan": ("fan_pct", "Fan"),
    "temp": ("temp_c", "Temp"),
    "power": ("power_w", "Pwr:Usage"),
    "cap": ("power_limit_w", "Pwr:Cap"),
    "used": ("mem_used_mib", "Memory-Usage (used)"),
    "total": ("mem_total_mib", "Memory-Usage (total)"),
    "util": ("util_pct", "GPU-Util"),
}
_SCHEMA = {
    "source": pl.String,
    "lineno": pl.Int64,
    "ts": pl.Datetime("ms"),
    "sample": pl.Int64,
    "gpu": pl.Int32,
    "name": pl.String,
    "pci_bus_id": pl.String,
    "pstate": pl.String,
    **{column: pl.Float64 for column, _ in _CELLS.values()},
}


def is_print_time(line: str) -> bool:
    """The local time ``nvidia-smi -l`` prints above each table (``Mon Jan  5 10:00:00 2026``)."""
    return bool(_TIME.match(line.strip()))


def _print_time(line: str) -> datetime:
    return datetime.strptime(" ".join(line.split()), "%a %b %d %H:%M:%S %Y")


def load_smi_table(path: Path, options: Options) -> Part:
    """Read the default nvidia-smi tables of one file: one sample per GPU per print.

    Raises
    ------
    ParseError
        In strict mode, at the first GPU row that cannot be read, or the first cell that holds
        an error instead of a value.
    """
    source = options.source or str(path)
    rows: list[dict[str, object]] = []
    skipped: list[dict[str, object]] = []
    missing: dict[tuple[str, str], list[int]] = {}  # (field, text) → [count, first line]
    when: datetime | None = None  # the time of the current print
    printed_at: datetime | None = None  # a time line not yet followed by its table
    sample = -1  # the print a GPU row belongs to: each header line starts one
    held: tuple[int, str, re.Match[str]] | None = None  # a first row awaiting its second

    def skip(lineno: int, line: str, reason: str) -> None:
        if options.strict and reason not in (FRAME, PRINT_TIME, "blank line"):
            raise ParseError(source, lineno, reason, line)
        skipped.append({"source": source, "lineno": lineno, "reason": reason, "line": line})

    lines = 0
    with path.open(encoding="utf-8", errors="replace", newline="\n") as f:
        for lines, raw in enumerate(f, 1):  # streamed: a day of -l 1 prints is millions of lines
            line = raw.removesuffix("\n").removesuffix("\r")
            if held is not None:
                second = _SECOND.match(line)
                if second:
                    rows.append(_row(held[2], second, source, held[0], when, sample, missing))
                    held = None
                    continue
                skip(held[0], held[1], _CUT)
                held = None
            first = _FIRST.match(line)
            if first:
                held = (lines, line, first)
                continue
            if is_print_time(line):
                printed_at = _print_time(line)
                reason = PRINT_TIME
            elif not line.strip():
                reason = "blank line"
            elif _HEADER.match(line):
                sample += 1
                when, printed_at = printed_at, None
                reason = FRAME
            elif line.startswith(("|", "+")):
                reason = FRAME
            else:
                reason = "not part of an nvidia-smi table"
            skip(lines, line, reason)
    if held is not None:
        skip(held[0], held[1], _CUT)
    samples = pl.DataFrame(rows, schema=_SCHEMA, orient="row")
    unavailable = _unavailable(missing, source)
    if options.strict:
        check_cells(unavailable, source)
    notes: tuple[str, ...] = ()
    if not samples.height:
        notes = ("no samples: no gpu rows in the tables",)
    elif samples["ts"].null_count():
        notes = (
            "no time line above the tables (nvidia-smi prints one above each): the samples "
            "are untimed; set [gpu_trace] interval_s in run.toml (the -l period) to place them",
        )
    return Part(
        source,
        FORMAT,
        lines,
        samples,
        pl.DataFrame(skipped, schema=SKIPPED, orient="row"),
        unavailable,
        notes,
        metric_lines=2 * samples.height,
    )


def _row(
    first: re.Match[str],
    second: re.Match[str],
    source: str,
    lineno: int,
    when: datetime | None,
    sample: int,
    missing: dict[tuple[str, str], list[int]],
) -> dict[str, object]:
    row: dict[str, object] = {
        "source": source,
        "lineno": lineno,
        "ts": when,
        "sample": max(sample, 0),  # rows before any header belong to the first print
        "gpu": int(first["gpu"]),
        "name": first["name"],
        "pci_bus_id": first["bus"],
        "pstate": None if second["pstate"] in UNSUPPORTED else second["pstate"],
    }
    for cell, (column, field) in _CELLS.items():
        text = second[cell]
        m = _NUMBER.match(text)
        row[column] = float(m.group(1)) if m else None
        if m is None:
            seen = missing.setdefault((field, text), [0, lineno + 1])
            seen[0] += 1
    return row


def _unavailable(missing: dict[tuple[str, str], list[int]], source: str) -> pl.DataFrame:
    if not missing:
        return pl.DataFrame(schema=UNAVAILABLE)
    df = pl.DataFrame(
        [
            {"field": f, "value": v, "count": c, "first_lineno": ln}
            for (f, v), (c, ln) in missing.items()
        ]
    )
    return (
        df.with_columns(source=pl.lit(source), kind=value_kind(pl.col("value")))
        .select(UNAVAILABLE.names())
        .cast(dict(UNAVAILABLE))
        .sort("first_lineno", "field")
    )


def _detect(peek: Peek) -> bool:
    lines = [ln.rstrip() for ln in peek.body[:12]]
    return any(_HEADER.match(ln) for ln in lines) and any(
        "NVIDIA-SMI" in ln and "Driver Version" in ln for ln in lines
    )


NVIDIA_SMI_TABLE = Format(
    FORMAT,
    "nvidia-smi (the default table), once or repeated by nvidia-smi -l N",
    _detect,
    load_smi_table,
    trace_summarizer(load_smi_table),
    TRACE,
)
