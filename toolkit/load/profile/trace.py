"""One PyTorch profiler trace (Kineto Chrome-trace JSON), as SGLang's ``/start_profile`` writes
it per rank: ``{profile_id}-TP-{tp}[-DP-{dp}][-PP-{pp}][-EP-{ep}][-{stage}].trace.json.gz``.

Kept: CPU ranges (``user_annotation``, ``cpu_op``, ``python_function``), graph launches and
synchronizations of the CUDA runtime, GPU activity (``kernel``, ``gpu_memcpy``,
``gpu_memset``, ``gpu_user_annotation``) with its stream, communication arguments (``In msg
nelems``, ``Collective name``, ``dtype``, ``Group size``) and ``ac2g`` flows; every other event
is counted by kind. The rank comes from the file name (SGLang's) and ``distributedInfo``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.profile.scan import Scanner
from toolkit.schema.profile import EVENTS

__all__ = ["KEPT_CATEGORIES", "LOOP_CATEGORIES", "ProfileTrace", "load_profile_trace", "rank_tags"]

KEPT_CATEGORIES: frozenset[str] = frozenset(
    {
        "user_annotation",
        "cpu_op",
        "python_function",
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "gpu_user_annotation",
    }
)
"""Categories of complete (``X``) events kept whole."""
LOOP_CATEGORIES: frozenset[str] = frozenset(
    {"user_annotation", "kernel", "gpu_memcpy", "gpu_memset"}
)
"""What a per-stage account of the scheduler loop reads (with the runtime calls kept): a
run's traces keep only these, so operators and Python frames (SGLang profiles ``with_stack``,
most of a trace's events) cost no memory."""
_RUNTIME = ("cudaGraphLaunch", "cudaStreamSynchronize", "cudaEventSynchronize")
"""CUDA runtime/driver calls kept (by name prefix): graph launches and host waits."""
_BATCH = 1 << 16
_INT_MAX = (1 << 63) - 1
_TAG = re.compile(r"-(TP|DP|PP|EP)-(\d+)")
_INT_ARGS = (
    ("stream", "stream"),
    ("device", "device"),
    ("correlation", "correlation"),
    ("external_id", "External id"),
    ("in_nelems", "In msg nelems"),
    ("out_nelems", "Out msg nelems"),
    ("group_size", "Group size"),
)
_TEXT_ARGS = (("dtype", "dtype"), ("collective", "Collective name"))


@dataclass
class ProfileTrace:
    """One rank's trace: what the file says about itself and its kept events (``EVENTS``).

    ``cut`` says why the file ended early (a capture killed while writing), if it did; the
    events before the cut are kept. ``skipped`` counts the events not kept, by ``ph/cat``.
    """

    path: Path
    events: pl.DataFrame
    tags: dict[str, int] = field(default_factory=dict)  # TP/DP/PP/EP ranks of the file name
    rank: int | None = None  # distributedInfo rank (global)
    world_size: int | None = None
    pp_size: int | None = None
    backend: str | None = None
    devices: list[str] = field(default_factory=list)
    base_ns: int | None = None
    schema_version: int | None = None
    trace_name: str | None = None
    events_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    cut: str | None = None

    @property
    def pp(self) -> int | None:
        """The pipeline stage: the file name's ``PP-k``; else ``distributedInfo`` when it
        states ``pp_size`` (ranks are stage-major: ``rank // (world_size // pp_size)``)."""
        if "PP" in self.tags:
            return self.tags["PP"]
        if self.rank is not None and self.world_size and self.pp_size:
            per_stage = self.world_size // self.pp_size
            return self.rank // per_stage if per_stage else None
        return None

    @property
    def tp(self) -> int | None:
        return self.tags.get("TP")


def rank_tags(name: str) -> dict[str, int]:
    """``{"TP": 0, "PP": 3}`` from SGLang's trace file name (empty when it has none)."""
    return {k: int(v) for k, v in _TAG.findall(name)}


def load_profile_trace(
    path: str | Path, categories: frozenset[str] = KEPT_CATEGORIES
) -> ProfileTrace:
    """Read one trace in bounded memory: typed events kept in polars batches; complete events
    of ``categories`` (and graph launches and host waits of the CUDA runtime) and flows.

    Raises
    ------
    ParseError
        A damaged file (no trace object, invalid JSON, an event that is no object); the
        message gives the line and the event index. A cut file is read up to the cut.
    """
    path = Path(path)
    scanner = Scanner(path)
    trace = ProfileTrace(path, pl.DataFrame(schema=EVENTS), tags=rank_tags(path.name))
    rows = _Rows(categories)
    frames: list[pl.DataFrame] = []
    seen_events = False
    for kind, key, value in scanner.items():
        if kind == "meta":
            _meta(trace, key, value)
            continue
        seen_events = True
        if not isinstance(value, dict):
            raise ParseError(path, None, f"event {key} is no JSON object: {str(value)[:80]!r}")
        label = rows.add(key, value)
        if label is not None:
            trace.skipped[label] = trace.skipped.get(label, 0) + 1
        if rows.size >= _BATCH:
            frames.append(rows.frame())
    frames.append(rows.frame())
    if not seen_events and scanner.cut is None:
        raise ParseError(path, None, "no traceEvents array: not a PyTorch profiler trace")
    trace.events = pl.concat(frames) if len(frames) > 1 else frames[0]
    trace.events_read, trace.cut = scanner.events, scanner.cut
    return trace


def _meta(trace: ProfileTrace, key: str, value: Any) -> None:
    if key == "distributedInfo" and isinstance(value, dict):
        trace.rank = _int(value.get("rank"))
        trace.world_size = _int(value.get("world_size"))
        trace.pp_size = _int(value.get("pp_size"))
        backend = value.get("backend")
        trace.backend = backend if isinstance(backend, str) else None
    elif key == "deviceProperties" and isinstance(value, list):
        trace.devices = [str(d.get("name")) for d in value if isinstance(d, dict)]
    elif key == "baseTimeNanoseconds":
        trace.base_ns = _int(value)
    elif key == "schemaVersion":
        trace.schema_version = _int(value)
    elif key == "traceName" and isinstance(value, str):
        trace.trace_name = value


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    return value if isinstance(value, int) and -_INT_MAX <= value <= _INT_MAX else None


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        v = float(value)
    elif isinstance(value, str):
        try:
            v = float(value)
        except ValueError:
            return None
    else:
        return None
    return v if math.isfinite(v) else None


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


class _Rows:
    """Column lists of kept events, turned into a typed frame every ``_BATCH`` rows."""

    def __init__(self, categories: frozenset[str]) -> None:
        self.categories = categories
        self.cols: dict[str, list[Any]] = {name: [] for name in EVENTS}

    @property
    def size(self) -> int:
        return len(self.cols["event"])

    def add(self, index: int, e: dict[str, Any]) -> str | None:
        """Keep event ``e``; else the ``ph/cat`` it is counted under."""
        ph, cat, name = e.get("ph"), e.get("cat"), e.get("name")
        if ph == "X":
            kept = cat in self.categories or (
                cat in ("cuda_runtime", "cuda_driver")
                and isinstance(name, str)
                and name.startswith(_RUNTIME)
            )
        else:
            kept = ph in ("s", "f") and cat == "ac2g"
        if not kept:
            return f"{ph}/{cat}"
        args = e.get("args")
        args = args if type(args) is dict else {}
        c = self.cols
        c["event"].append(index)
        c["ph"].append(ph)
        c["cat"].append(cat if type(cat) is str else _text(cat))
        c["name"].append(name if type(name) is str else _text(name))
        ts, dur = e.get("ts"), e.get("dur")
        c["ts_us"].append(ts if type(ts) is float else _float(ts))
        c["dur_us"].append(dur if type(dur) is float else _float(dur))
        pid, tid = e.get("pid"), e.get("tid")
        c["pid"].append(pid if type(pid) is str else _text(pid))
        c["tid"].append(tid if type(tid) is str else _text(tid))
        for column, key in _INT_ARGS:
            v = args.get(key)
            c[column].append(
                v if v is None or (type(v) is int and -_INT_MAX <= v <= _INT_MAX) else _int(v)
            )
        c["flow_id"].append(_int(e.get("id")) if ph != "X" else None)
        for column, key in _TEXT_ARGS:
            v = args.get(key)
            c[column].append(v if v is None or type(v) is str else _text(v))
        return None

    def frame(self) -> pl.DataFrame:
        frame = pl.DataFrame(self.cols, schema=EVENTS)
        for values in self.cols.values():
            values.clear()
        return frame


def trace_problem(error: ToolkitError) -> str:
    """One line for a trace that could not be read, as runs list their problems."""
    return str(error).split("\n", 1)[0]
