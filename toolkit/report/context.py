"""What a notebook kernel learns from ``toolkit.report.render.render`` that started it.

``render`` runs the notebook in a separate kernel; it passes the few facts the views need
through environment variables (the kernel inherits them), so notebooks take no hidden
parameters:

- ``PPSCOPE_REPORT=1``: a batch render. Widgets fall back to static views; views emit their
  sidecar records.
- ``PPSCOPE_REDACT=0``: ``--no-redact`` was given.
- ``PPSCOPE_PROVENANCE=path``: the provenance record ``render`` computed (hashes once).
- ``PPSCOPE_PROGRESS=1``: show loading progress on the terminal that runs ``render``.
- ``PPSCOPE_FULL_PATHS=1``: ``--full-paths`` was given: show absolute paths.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import IO, Any

__all__ = [
    "ENV_FULL_PATHS",
    "ENV_PROGRESS",
    "ENV_PROVENANCE",
    "ENV_REDACT",
    "ENV_REPORT",
    "RECORD_MIME",
    "full_paths",
    "in_report",
    "progress_stream",
    "provenance_record",
    "redacting",
]

ENV_REPORT = "PPSCOPE_REPORT"
ENV_REDACT = "PPSCOPE_REDACT"
ENV_PROVENANCE = "PPSCOPE_PROVENANCE"
ENV_PROGRESS = "PPSCOPE_PROGRESS"
ENV_FULL_PATHS = "PPSCOPE_FULL_PATHS"
RECORD_MIME = "application/vnd.ppscope.record+json"
"""Output type of a sidecar record; ``render`` collects these and removes them from the HTML."""


def in_report() -> bool:
    """True inside a kernel started by ``render`` (a papermill batch run)."""
    return os.environ.get(ENV_REPORT) == "1"


def redacting() -> bool:
    """Secrets are redacted unless ``render`` was asked not to."""
    return os.environ.get(ENV_REDACT, "1") != "0"


def full_paths() -> bool:
    """Paths are shown absolute only when ``render`` was asked to (``--full-paths``)."""
    return os.environ.get(ENV_FULL_PATHS) == "1"


def provenance_record() -> dict[str, Any] | None:
    """The record ``render`` wrote for this run, or None outside a render."""
    path = os.environ.get(ENV_PROVENANCE)
    if not path or not in_report():
        return None
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def progress_stream() -> IO[str] | None:
    """The terminal of a batch render that asked for progress, else None.

    The kernel inherits ``render``'s stderr; ``sys.__stderr__`` still points there while
    ``sys.stderr`` is captured into the notebook.
    """
    if not in_report() or os.environ.get(ENV_PROGRESS) != "1":
        return None
    return sys.__stderr__
