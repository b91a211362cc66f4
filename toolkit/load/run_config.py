"""``run.toml``: the optional description a user puts in a run directory.

A run is one server launch plus what was measured against it; every key is optional and an
unknown key is an error naming it, so a typo never passes silently.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.errors import ParseError

_KEYS: dict[str, type | tuple[type, ...]] = {
    "label": str,
    "model": str,
    "command": str,
    "hardware": str,
    "interconnect": str,
    "clock_offset_s": (int, float),
    "synthetic": bool,
    "notes": str,
    "gpu_trace": dict,
}
_GPU_TRACE_KEYS: dict[str, type | tuple[type, ...]] = {"fields": str, "interval_s": (int, float)}
INTERCONNECTS = ("pcie", "nvlink")


@dataclass(frozen=True)
class RunConfig:
    """What ``run.toml`` says about a run; defaults when the file is absent."""

    label: str | None = None
    model: str | None = None  # the served model's id, when the log does not name it
    command: str | None = None
    hardware: str | None = None
    interconnect: str | None = None  # "pcie" or "nvlink"
    clock_offset_s: float = 0.0  # added to GPU-trace timestamps to align them with the log
    synthetic: bool = False  # reports carry a banner saying the data is generated
    notes: str | None = None
    gpu_trace_fields: tuple[str, ...] | None = None  # for nvidia-smi CSV without a header
    gpu_trace_interval_s: float | None = None  # sampling period of traces that print no time
    path: Path | None = field(default=None, compare=False)


def read_run_config(directory: str | Path) -> RunConfig:
    """The ``run.toml`` of a run directory (defaults when there is none).

    Raises
    ------
    ParseError
        When the file is not valid TOML, has an unknown key, or a value of the wrong type.
    """
    path = Path(directory) / "run.toml"
    if not path.is_file():
        return RunConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ParseError(path, _line_of(e), f"invalid toml: {e}") from e
    for key, value in data.items():
        if key not in _KEYS:
            raise ParseError(path, None, f"unknown key {key!r} (known: {', '.join(_KEYS)})")
        if not isinstance(value, _KEYS[key]) or (key == "clock_offset_s" and value is True):
            raise ParseError(path, None, f"key {key!r} has the wrong type: {value!r}")
    trace = data.get("gpu_trace", {})
    for key, value in trace.items():
        if key not in _GPU_TRACE_KEYS:
            raise ParseError(path, None, f"unknown key 'gpu_trace.{key}'")
        wanted = _GPU_TRACE_KEYS[key]
        if not isinstance(value, wanted) or isinstance(value, bool):
            raise ParseError(path, None, f"key 'gpu_trace.{key}' has the wrong type: {value!r}")
        if key == "interval_s" and not 0 < value < 3600:
            raise ParseError(path, None, f"gpu_trace.interval_s must be in (0, 3600) s: {value!r}")
    interconnect = data.get("interconnect")
    if interconnect is not None and interconnect.lower() not in INTERCONNECTS:
        raise ParseError(path, None, f"interconnect must be pcie or nvlink, not {interconnect!r}")
    fields = trace.get("fields")
    return RunConfig(
        label=data.get("label"),
        model=data.get("model"),
        command=data.get("command"),
        hardware=data.get("hardware"),
        interconnect=interconnect.lower() if interconnect else None,
        clock_offset_s=float(data.get("clock_offset_s", 0.0)),
        synthetic=bool(data.get("synthetic", False)),
        notes=data.get("notes"),
        gpu_trace_fields=tuple(f.strip() for f in fields.split(",")) if fields else None,
        gpu_trace_interval_s=float(trace["interval_s"]) if "interval_s" in trace else None,
        path=path,
    )


def _line_of(error: Exception) -> int | None:
    return getattr(error, "lineno", None)
