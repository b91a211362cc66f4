"""Progress of a render: bars only on a terminal, and never in the notebook that is kept.

A progress bar redrawn with carriage returns is a live display: in a CI log or a file it
becomes a pile of partial lines, and in a kept notebook a frozen ``0%|`` that says nothing
about the run. Bars are drawn only when stderr is a terminal (elsewhere ``render`` prints a
plain line per step), and ``drop_progress`` takes any bar a cell printed out of its outputs.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["bars_wanted", "drop_progress", "hash_bar"]

_BAR = re.compile(r"\d+%\|")
"""What a tqdm bar looks like in text: ``  0%|      | 0/10 [00:00<?, ?it/s]``."""
_WIDGET = "application/vnd.jupyter.widget-view+json"


def bars_wanted(progress: bool) -> bool:
    """Whether a render that shows ``progress`` may draw bars: only on a terminal."""
    return progress and sys.stderr.isatty()


def hash_bar(progress: bool, files: Sequence[Path]) -> Any:
    """A bar for hashing the inputs, when they are large enough to take a while."""
    total = sum(p.stat().st_size for p in files)
    if not bars_wanted(progress) or total < 64 << 20:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, desc="hashing inputs", file=sys.stderr)


def _bar_text(text: str) -> str:
    """``text`` without its progress-bar lines (each ``\\r`` segment of a line is a redraw)."""
    kept = []
    for line in text.split("\n"):
        parts = [p for p in line.split("\r") if p and not _BAR.search(p)]
        if parts or not line:
            kept.append(parts[-1] if parts else line)
    return "\n".join(kept)


def drop_progress(nb: Any) -> int:
    """Take every progress bar out of an executed notebook's outputs: bar lines of the
    stderr stream, and tqdm's notebook widgets. Returns how many outputs went."""
    dropped = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kept = []
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and out.get("name") == "stderr":
                text = out.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                rest = _bar_text(text)
                if not rest.strip():
                    dropped += 1
                    continue
                out["text"] = rest
            elif _WIDGET in out.get("data", {}) and _BAR.search(
                str(out["data"].get("text/plain", ""))
            ):
                dropped += 1
                continue
            kept.append(out)
        cell.outputs = kept
    return dropped
