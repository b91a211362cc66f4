"""PyTorch profiler traces of a run: one Kineto Chrome-trace JSON file per rank, as SGLang's
``/start_profile`` writes them, recognized by content wherever they lie in the run directory.

The folder a trace lies in names its phase (``profile/<phase>/…``, as ``ppscope capture
--profile`` writes them); traces directly in the run directory or in ``profile/`` have none.
A trace that cannot be read is listed in ``Profile.problems`` and the others are used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load import compression
from toolkit.load.profile.trace import (
    KEPT_CATEGORIES,
    LOOP_CATEGORIES,
    ProfileTrace,
    load_profile_trace,
    rank_tags,
    trace_problem,
)

__all__ = [
    "KEPT_CATEGORIES",
    "LOOP_CATEGORIES",
    "PROFILE_DIR",
    "TORCH_TRACE",
    "Profile",
    "ProfileTrace",
    "is_torch_trace",
    "load_profile",
    "load_profile_trace",
    "phase_of",
    "rank_tags",
    "summarize_trace",
]

TORCH_TRACE = "torch-profiler-trace"
"""The format name of a PyTorch profiler (Kineto) trace."""
PROFILE_DIR = "profile"
"""The folder of a run directory ``ppscope capture --profile`` writes traces into."""
_HEAD = 64 << 10


def is_torch_trace(path: Path) -> bool:
    """A JSON object that Kineto wrote: ``schemaVersion`` first, or a ``traceEvents`` array
    with ``deviceProperties`` or ``distributedInfo`` near the start."""
    try:
        head = compression.head_bytes(path, _HEAD).decode("utf-8", "replace").lstrip()
    except (OSError, ToolkitError):
        return False
    if not head.startswith("{"):
        return False
    if '"schemaVersion"' in head[:256]:
        return True
    return '"traceEvents"' in head and ('"deviceProperties"' in head or '"distributedInfo"' in head)


def phase_of(path: Path, root: Path) -> str | None:
    """The phase a trace belongs to: the folder it lies in, unless that is the run directory or
    its ``profile`` folder."""
    try:
        parts = path.relative_to(root).parts[:-1]
    except ValueError:
        return None
    if not parts or parts == (PROFILE_DIR,):
        return None
    return parts[-1]


@dataclass
class Profile:
    """The run's traces (each with its ``phase``) and the files that could not be read."""

    traces: list[ProfileTrace] = field(default_factory=list)
    phases: list[str | None] = field(default_factory=list)  # one per trace
    problems: list[tuple[str, str]] = field(default_factory=list)  # (file, why)

    @property
    def cut(self) -> list[tuple[str, str]]:
        """(file, why) of traces that end early (read up to the cut)."""
        return [(t.path.name, t.cut) for t in self.traces if t.cut]

    def notes(self) -> list[dict[str, str]]:
        """The traces left out (unreadable) or read up to a cut, as a run lists its
        mismatched inputs: ``input``, ``files``, ``detail``."""
        out = []
        for name, why in self.problems:
            out.append({"input": "profiler trace", "files": name, "detail": f"not used: {why}"})
        for name, why in self.cut:
            detail = f"read up to the cut: {why}"
            out.append({"input": "profiler trace", "files": name, "detail": detail})
        return out

    def index(self) -> pl.DataFrame:
        """One row per trace: ``source``, ``phase``, ``pp``, ``tp``, ``rank``, ``events``."""
        return pl.DataFrame(
            {
                "source": [str(t.path) for t in self.traces],
                "phase": self.phases,
                "pp": [t.pp for t in self.traces],
                "tp": [t.tp for t in self.traces],
                "rank": [t.rank for t in self.traces],
                "events": [t.events.height for t in self.traces],
            },
            schema={
                "source": pl.String,
                "phase": pl.String,
                "pp": pl.Int64,
                "tp": pl.Int64,
                "rank": pl.Int64,
                "events": pl.Int64,
            },
        )


def load_profile(
    paths: list[Path], root: Path, categories: frozenset[str] = KEPT_CATEGORIES
) -> Profile:
    """Every trace of ``paths`` (its events of ``categories``: ``load_profile_trace``); those
    that fail to read go to ``problems``."""
    profile = Profile()
    for path in sorted(paths):
        try:
            trace = load_profile_trace(path, categories)
        except ToolkitError as e:
            profile.problems.append((path.name, trace_problem(e)))
            continue
        profile.traces.append(trace)
        profile.phases.append(phase_of(path, root))
    return profile


def summarize_trace(path: Path) -> dict[str, object]:
    """One trace's ``ppscope parse --json`` entry: its ranks, events read and kept, and a cut.

    Raises
    ------
    ParseError
        A damaged trace (``load_profile_trace``).
    """
    trace = load_profile_trace(path)
    return {
        "path": str(path),
        "format": TORCH_TRACE,
        "rank": trace.rank,
        "pp": trace.pp,
        "tp": trace.tp,
        "events": trace.events_read,
        "kept": trace.events.height,
        "kernels": int((trace.events["cat"] == "kernel").sum()),
        "devices": trace.devices,
        "cut": trace.cut,
    }
