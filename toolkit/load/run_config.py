"""``run.toml``: the optional description a user puts in a run directory.

A run is one server launch plus what was measured against it; every key is optional and an
unknown key is an error naming it, so a typo never passes silently. Every error is a
``ConfigError`` reading ``path:line: reason``, the line being the key's.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import ConfigError
from toolkit.load.inputs import check_input, split_lines

_KEYS: dict[str, str] = {
    "label": "a string",
    "model": "a string",
    "command": "a string",
    "hardware": "a string",
    "interconnect": "a string",
    "clock_offset_s": "a number",
    "synthetic": "true or false",
    "notes": "a string",
    "gpu_trace": "a table",
}
_GPU_TRACE_KEYS = {
    "fields": "a string",
    "interval_s": "a number of seconds",
    "start": "a local date-time",
    "nodes": "a table of trace file → node rank",
}
MAX_INTERVAL_S = 3600.0
"""Longest sampling period accepted for a trace that prints no time."""
INTERCONNECTS = ("pcie", "nvlink")
MAX_CLOCK_OFFSET_S = 10 * 86_400.0
"""Largest clock offset accepted (ten days): beyond, the value is a typo, not a clock skew."""
MAX_NODES = 4096
"""Node ranks ``[gpu_trace.nodes]`` accepts: 0 up to this, exclusive."""
MAX_BYTES = 1 << 20
"""A ``run.toml`` is a few lines; a larger file is no description of a run."""
_TOML_POSITION = re.compile(r"\(at line (\d+), column \d+\)")


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
    gpu_trace_start: datetime | None = None  # local time of the first sample of such a trace
    gpu_trace_nodes: tuple[tuple[str, int], ...] = ()  # (trace file, node rank) pairs
    path: Path | None = field(default=None, compare=False)


def read_run_config(directory: str | Path) -> RunConfig:
    """The ``run.toml`` of a run directory (defaults when there is none).

    Raises
    ------
    ConfigError
        When the file is not valid TOML, has an unknown key, or a value of the wrong type or
        out of range (``clock_offset_s`` must be finite and within ten days); with the line.
    ToolkitError
        When ``run.toml`` is no regular readable file (a pipe, a device, no permission).
    """
    path = Path(directory) / "run.toml"
    if not path.exists() and not path.is_symlink():
        return RunConfig()
    check_input(path)
    if path.stat().st_size > MAX_BYTES:
        raise ConfigError(path, None, f"{path.stat().st_size} bytes: too large for a run.toml")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        lineno = raw[: e.start].count(b"\n") + 1
        raise ConfigError(path, lineno, "invalid toml: not utf-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        m = _TOML_POSITION.search(str(e))
        reason = _TOML_POSITION.sub("", str(e)).strip()
        raise ConfigError(path, int(m.group(1)) if m else None, f"invalid toml: {reason}") from None
    except RecursionError:
        raise ConfigError(path, None, "invalid toml: values nested too deep") from None
    except ValueError as e:  # an integer of thousands of digits
        raise ConfigError(path, None, f"invalid toml: {e}") from None
    return _config(path, data, split_lines(text))


def _config(path: Path, data: dict[str, Any], lines: list[str]) -> RunConfig:
    def fail(key: str, reason: str, table: str | None = None) -> ConfigError:
        return ConfigError(path, _key_line(lines, key, table), reason)

    for key, value in data.items():
        if key not in _KEYS:
            known = ", ".join(_KEYS)
            raise fail(key, f"unknown key {key!r} (known: {known})")
        if not _has_type(key, value):
            raise fail(key, f"key {key!r} must be {_KEYS[key]}, not {_shown(value)}")
    trace = data.get("gpu_trace", {})
    for key, value in trace.items():
        if key not in _GPU_TRACE_KEYS:
            known = ", ".join(_GPU_TRACE_KEYS)
            raise fail(key, f"unknown key 'gpu_trace.{key}' (known: {known})", "gpu_trace")
        if key == "interval_s":
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not 0 < value < MAX_INTERVAL_S:
                raise fail(
                    key,
                    f"gpu_trace.interval_s must be a number of seconds in (0, 3600), "
                    f"not {_shown(value)}",
                    "gpu_trace",
                )
        elif key == "start":
            if not isinstance(value, datetime) or value.tzinfo is not None:
                raise fail(
                    key,
                    "gpu_trace.start must be a local date-time (2025-05-25T21:40:21.5), "
                    f"not {_shown(value)}",
                    "gpu_trace",
                )
        elif key == "nodes":
            _check_nodes(value, fail)
        elif not isinstance(value, str):
            raise fail(
                key, f"key 'gpu_trace.{key}' must be a string, not {_shown(value)}", "gpu_trace"
            )
    interconnect = data.get("interconnect")
    if interconnect is not None and interconnect.lower() not in INTERCONNECTS:
        raise fail("interconnect", f"interconnect must be pcie or nvlink, not {interconnect!r}")
    offset = data.get("clock_offset_s", 0.0)
    if not (isinstance(offset, int) or math.isfinite(offset)) or abs(offset) > MAX_CLOCK_OFFSET_S:
        raise fail(
            "clock_offset_s",
            f"clock_offset_s must be a finite number of seconds within ±{MAX_CLOCK_OFFSET_S:.0f}"
            f" (ten days), not {offset!r}",
        )
    fields = trace.get("fields")
    names = tuple(f.strip() for f in fields.split(",")) if fields else None
    if names is not None and not all(names):
        raise fail("fields", f"gpu_trace.fields has an empty field name: {fields!r}", "gpu_trace")
    return RunConfig(
        label=data.get("label"),
        model=data.get("model"),
        command=data.get("command"),
        hardware=data.get("hardware"),
        interconnect=interconnect.lower() if interconnect else None,
        clock_offset_s=float(offset),
        synthetic=bool(data.get("synthetic", False)),
        notes=data.get("notes"),
        gpu_trace_fields=names,
        gpu_trace_interval_s=float(trace["interval_s"]) if "interval_s" in trace else None,
        gpu_trace_start=trace.get("start"),
        gpu_trace_nodes=tuple(trace.get("nodes", {}).items()),
        path=path,
    )


def _check_nodes(value: Any, fail: Callable[..., ConfigError]) -> None:
    """``[gpu_trace.nodes]``: each key a trace file (name or path under the run directory),
    each value a node rank (an integer from 0)."""
    if not isinstance(value, dict):
        raise fail(
            "nodes",
            "gpu_trace.nodes must be a table of trace file = node rank "
            f'("gpu-node1.csv" = 1), not {_shown(value)}',
            "gpu_trace",
        )
    for name, node in value.items():
        if isinstance(node, bool) or not isinstance(node, int) or not 0 <= node < MAX_NODES:
            raise fail(
                name,
                f"gpu_trace.nodes.{name} must be a node rank from 0 to {MAX_NODES - 1}, "
                f"not {_shown(node)}",
                "gpu_trace.nodes",
            )
        if not name.strip():
            raise fail(name, "gpu_trace.nodes has an empty file name", "gpu_trace.nodes")


def _has_type(key: str, value: Any) -> bool:
    if key == "clock_offset_s":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if key == "synthetic":
        return isinstance(value, bool)
    if key == "gpu_trace":
        return isinstance(value, dict)
    return isinstance(value, str)


def _shown(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    name = kind.get(type(value))
    if name is None:
        name = "a table" if isinstance(value, dict) else f"a {type(value).__name__}"
    text = repr(value)
    return f"{name} ({text if len(text) <= 40 else text[:39] + '…'})"


def _key_line(lines: list[str], key: str, table: str | None = None) -> int | None:
    """The 1-based line where ``key`` is set (in ``[table]`` when given), else None.

    Found in the text because ``tomllib`` keeps no positions: a ``key =`` line in the right
    table, a dotted ``table.key =``, or a ``[key]`` table header.
    """
    name = r"(?:{0}|\"{0}\"|'{0}')".format(re.escape(key))
    assign = re.compile(rf"^\s*{name}\s*[=.]")  # "key =", or "key.sub =" (a dotted key)
    header = re.compile(rf"^\s*\[\[?\s*{name}\s*[\].]")  # "[key]", "[key.sub]", "[[key]]"
    dotted = (
        re.compile(r"^\s*(?:{0}|\"{0}\"|'{0}')\s*\.\s*{1}\s*=".format(re.escape(table), name))
        if table
        else None
    )
    current: str | None = None
    for lineno, line in enumerate(lines, 1):
        m = re.match(r"^\s*\[\[?\s*([^\]]*?)\s*\]", line)
        if m:
            current = m.group(1).strip("\"'")
            if table is None and header.match(line):
                return lineno
            continue
        if current == table and assign.match(line):
            return lineno
        if dotted is not None and current is None and dotted.match(line):
            return lineno
    if table is not None:  # an inline table: gpu_trace = {fields = ...}
        inline = re.compile(rf"\b{re.escape(key)}[\"']?\s*=")
        return next((n for n, line in enumerate(lines, 1) if inline.search(line)), None)
    return None
