"""The compiled passes (numba): the common log lines and nvidia-smi rows typed from their bytes.

Each pass takes only the lines it can type exactly and leaves every other line to the general
reader, which gives the same rows, only slower. ``PPSCOPE_COMPILED=0`` turns every pass off
(the tests compare both ways); ``uses`` counts the blocks each pass typed in this process.
This package's root imports no numba: the log loader imports the passes on a thread of its own.
"""

from __future__ import annotations

import os
import threading
from collections import Counter

__all__ = ["SWITCH", "enabled", "note_use", "uses"]

SWITCH = "PPSCOPE_COMPILED"
"""The environment variable that turns the compiled passes off when it is ``0``."""

_USES: Counter[str] = Counter()
_LOCK = threading.Lock()


def enabled() -> bool:
    """Whether the compiled passes may run: ``PPSCOPE_COMPILED`` is not ``0`` (read per call,
    so a test or a user can switch them for one command)."""
    return os.environ.get(SWITCH, "1").strip() != "0"


def note_use(name: str) -> None:
    """Count one block typed by the pass ``name`` (``log-line``, ``nvidia-smi row``)."""
    with _LOCK:
        _USES[name] += 1


def uses() -> dict[str, int]:
    """Blocks typed by each pass in this process so far."""
    with _LOCK:
        return dict(_USES)
