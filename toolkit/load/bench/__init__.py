"""Benchmark results: the formats ppscope reads, in the order they are recognized.

A file's format comes from its content, never from its name (compressed files are read as is). Each
format lives in a reader module and exports a ``Format`` (``format.py``); adding a format is
one module and one line below. JSON formats come first, the more specific before the more
general (AIPerf's summary before GenAI-Perf's, both before the ``bench_serving`` result
dicts); the printed result block, which any text log may hold, is asked last.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.load.bench.aiperf import AIPERF_JSON
from toolkit.load.bench.format import Format, Peek
from toolkit.load.bench.nvidia import GENAI_PERF_CSV, GENAI_PERF_JSON
from toolkit.load.bench.sglang import SGLANG_BENCH_JSONL, SGLANG_BENCH_TEXT
from toolkit.load.bench.sweep_csv import BENCH_CSV
from toolkit.load.bench.vllm import VLLM_BENCH_JSON
from toolkit.load.inputs import check_input
from toolkit.load.registry import first_match

__all__ = ["FORMATS", "Format", "sniff_bench_format"]

FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        AIPERF_JSON,
        GENAI_PERF_JSON,
        SGLANG_BENCH_JSONL,
        VLLM_BENCH_JSON,
        GENAI_PERF_CSV,
        BENCH_CSV,
        SGLANG_BENCH_TEXT,
    )
}
"""Format name → ``Format``, in sniffing order."""


def sniff_bench_format(path: str | Path) -> str | None:
    """The benchmark format of a file (a name of ``FORMATS``), or None.

    Recognized from the content only: JSON keys, the CSV header, or the printed
    ``Serving Benchmark Result`` block anywhere in a text file (compressed files are read as is).
    None for a directory or a missing path; ``ToolkitError`` for a pipe, a device or a file
    that cannot be read.
    """
    path = Path(path)
    if path.is_dir() or not path.exists():
        return None
    peek = Peek(check_input(path))
    return first_match(FORMATS, peek)
