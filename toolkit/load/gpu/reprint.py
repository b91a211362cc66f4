"""``--query-gpu`` CSV re-printed by ``column -t`` (or ``column -t -s,``), read as the CSV.

``column -t -s,`` drops the commas and pads each field, so fields are separated by runs of two
or more spaces while a value keeps its single spaces (``NVIDIA H100 80GB HBM3``, ``50 %``,
``2026/01/05 10:00:00.000``). Plain ``column -t`` splits at every space and keeps the commas,
so collapsing its padding gives the CSV back. Either way the file is rewritten line for line as
``, ``-separated CSV and read by the CSV loader; skipped lines keep the text as printed. The
split is a reconstruction (a value that held two spaces would be cut in two), hence the
``reprinted-table`` caveat.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import polars as pl

from toolkit.load.gpu.fields import SMI_FIELDS
from toolkit.load.gpu.format import TRACE, Format, Options, Part, Peek
from toolkit.load.gpu.inventory import is_apps_header
from toolkit.load.gpu.samples import trace_summarizer
from toolkit.load.gpu.smi import is_header, load_smi_csv, parse_fields, raw_lines

__all__ = ["FORMAT", "NVIDIA_SMI_CSV_REPRINTED", "as_csv_line", "is_reprinted_header"]

FORMAT = "nvidia-smi-csv-reprinted"
_PAD = re.compile(r" {2,}|\t+")
_SPACES = re.compile(r"[ \t]+")


def as_csv_line(line: str) -> str:
    """One re-printed line as nvidia-smi printed it: ``a  b c   d`` → ``a, b c, d``."""
    text = line.strip()
    if not text:
        return ""
    if "," in text:  # plain ``column -t``: the commas are still there, only padding was added
        return ", ".join(c.strip() for c in _SPACES.sub(" ", text).split(","))
    return ", ".join(_PAD.split(text))


def is_reprinted_header(line: str) -> bool:
    """A ``--query-gpu`` header padded into columns (not the CSV's own ``, `` form), naming at
    least two query fields (a padded table of any other kind may have a ``name`` column)."""
    if not _PAD.search(line.strip()):
        return False
    csv = as_csv_line(line)
    if not is_header(csv) or is_apps_header(csv):
        return False
    known = [f for f in parse_fields(csv.split(",")) if f.canonical in SMI_FIELDS or f.unit]
    return len(known) >= 2


def _is_reprint(lines: list[str]) -> bool:
    """A padded query header, then (when there is a row) a row of as many fields with a
    number or a time in it."""
    if not lines or not is_reprinted_header(lines[0]):
        return False
    if len(lines) < 2:
        return True
    cells = as_csv_line(lines[1]).split(", ")
    return len(cells) == len(as_csv_line(lines[0]).split(", ")) and any(
        c[:1].isdigit() for c in cells
    )


def load_reprinted(path: Path, options: Options) -> Part:
    """Read a re-printed query table: rewritten as CSV, read by ``load_smi_csv``."""
    source = options.source or str(path)
    with (
        path.open(encoding="utf-8", errors="replace", newline="\n") as src,
        tempfile.NamedTemporaryFile(
            "w", suffix=".csv", dir=options.workdir, delete=False, encoding="utf-8"
        ) as out,
    ):
        for line in src:  # line for line, so line numbers stay the user's
            out.write(as_csv_line(line.removesuffix("\n").removesuffix("\r")) + "\n")
        csv = Path(out.name)
    try:
        part = load_smi_csv(
            csv, source, fields=None, strict=options.strict, workdir=options.workdir
        )
    finally:
        csv.unlink(missing_ok=True)
    if part.skipped.height:  # skipped lines as the user's file has them, not as rewritten
        linenos = part.skipped["lineno"].to_list()
        printed = raw_lines(path, linenos, options.workdir)
        original = pl.Series("line", [printed.get(n, "") for n in linenos], pl.String)
        part.skipped = part.skipped.with_columns(original)
    part.format = FORMAT
    return part


def _detect(peek: Peek) -> bool:
    return _is_reprint(peek.body[:2])


NVIDIA_SMI_CSV_REPRINTED = Format(
    FORMAT,
    "nvidia-smi --query-gpu=… --format=csv re-printed by column -t (padded columns)",
    _detect,
    load_reprinted,
    trace_summarizer(load_reprinted),
    TRACE,
)
