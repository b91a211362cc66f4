"""Recognize an input file's format from its first lines, never from its name."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from toolkit.load.lines import head_lines
from toolkit.load.sglang_lines import BRACKET

_SGLANG_HINTS = re.compile(
    BRACKET
    + r"|(?:Decode|Prefill) batch[.,( \[]|server_args=|max_total_num_tokens=|sglang"
    + r"|The server is fired up"
)


def sniff(path: Path) -> str | None:
    """The format name of a file (``sglang-log``), or None when nothing matches."""
    head = head_lines(path, n=2000)
    if any(_SGLANG_HINTS.search(line) for line in head):
        return "sglang-log"
    return None


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
