"""Recognize an input file's format from its first lines, never from its name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench import sniff_bench_format
from toolkit.load.bench.format import EMBEDDED
from toolkit.load.gpu import sniff_gpu_format
from toolkit.load.inputs import check_input
from toolkit.load.sglang.plan import BRACKET
from toolkit.load.text import head_lines

_SERVER_HINTS = re.compile(
    BRACKET
    + r"|(?:Decode|Prefill) batch(?:[.,] #| \[\d+\], #|\(mixed )"
    + r"|server_args=(?:ServerArgs\(|\{)|max_total_num_tokens=\d|The server is fired up"
)


def sniff(path: Path) -> str | None:
    """The format name of a file (``sglang-log``, a GPU or benchmark format), or None.

    Raises
    ------
    ToolkitError
        When ``path`` is no regular readable file (a pipe, a device, no permission).
    """
    check_input(path)
    gpu = sniff_gpu_format(path)
    if gpu is not None:
        return gpu  # first: a process list may name "sglang::scheduler"
    bench = sniff_bench_format(path)
    if bench is not None and BENCH_FORMATS[bench].kind != EMBEDDED:
        return bench  # JSON/CSV results: "sglang" in them names a backend, not a server log
    if any(_SERVER_HINTS.search(line) for line in head_lines(path, n=2000)):
        return "sglang-log"  # may also hold printed benchmark blocks: both are read
    return bench


def expand(paths: list[Path]) -> Iterator[Path]:
    """Files named, and the files inside directories named (sorted, hidden ones skipped)."""
    for path in paths:
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                hidden = any(part.startswith(".") for part in child.relative_to(path).parts)
                if child.is_file() and not hidden:
                    yield child
        else:
            yield path
