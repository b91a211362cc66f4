"""GPU monitoring files: the formats ppscope reads, in the order they are recognized.

A file's format comes from its first lines, never from its name (compressed files too). Each
format lives in its own module and exports a ``Format`` (``format.py``); adding a format is one
module and one line below. Formats with a distinctive first line come first; the generic
nvidia-smi CSV is asked last, after the compute-apps CSV whose header is also a query header
and after the same CSV re-printed in padded columns.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.load.gpu.aiperf import AIPERF_TELEMETRY
from toolkit.load.gpu.dcgmi import DCGMI_DMON
from toolkit.load.gpu.dmon import NVIDIA_SMI_DMON
from toolkit.load.gpu.exporter import DCGM_EXPORTER
from toolkit.load.gpu.format import TRACE, Format, Peek
from toolkit.load.gpu.inventory import NVIDIA_SMI_APPS, NVIDIA_SMI_LIST
from toolkit.load.gpu.reprint import NVIDIA_SMI_CSV_REPRINTED
from toolkit.load.gpu.smi import NVIDIA_SMI_CSV
from toolkit.load.gpu.smitable import NVIDIA_SMI_TABLE
from toolkit.load.gpu.topology import NVIDIA_SMI_TOPO
from toolkit.load.inputs import check_input
from toolkit.load.registry import first_match

__all__ = ["FORMATS", "Format", "sniff_gpu_format", "trace_formats"]

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        NVIDIA_SMI_DMON,
        DCGMI_DMON,
        DCGM_EXPORTER,
        AIPERF_TELEMETRY,
        NVIDIA_SMI_LIST,
        NVIDIA_SMI_TOPO,
        NVIDIA_SMI_TABLE,
        NVIDIA_SMI_APPS,
        NVIDIA_SMI_CSV_REPRINTED,
        NVIDIA_SMI_CSV,
    )
}
"""Format name → ``Format``, in sniffing order."""


def sniff_gpu_format(path: str | Path) -> str | None:
    """The GPU format of a file from its first lines (``nvidia-smi-csv``, ...), else None.

    Raises ``ToolkitError`` for a path that is no regular readable file.
    """
    peek = Peek(check_input(path))
    if not peek.body:
        return None
    return first_match(FORMATS, peek)


def trace_formats() -> tuple[str, ...]:
    """Names of the formats that are time series (what ``load_gpu_trace`` reads)."""
    return tuple(f.name for f in FORMATS.values() if f.kind == TRACE)
