"""``run.toml`` of a captured run: what the server, the GPU list and the topology told.

``label`` is the one given, else the layout ``/server_info`` states (``PP8``, ``PP4xTP2``);
``model`` the served model; ``command`` only when ``/server_info`` states a launch command;
``hardware`` from ``nvidia-smi -L`` (``8x NVIDIA H100 80GB HBM3``); ``interconnect`` from
``nvidia-smi topo -m``; ``clock_offset_s`` when the server log's clock is off the capture's
(the GPU trace and the phase times are on the capture's clock); ``[gpu_trace]`` the start and
period of a ``dcgmi dmon`` trace, which prints no time of its own.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.load.bench.common import layout_label
from toolkit.load.gpu.inventory import load_gpu_list
from toolkit.load.gpu.trace import load_topology
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.server_info import args_of_info

__all__ = [
    "command_of",
    "hardware_of",
    "interconnect_of",
    "label_of",
    "model_of",
    "run_toml",
    "write_run_toml",
]

_COMMAND_KEYS = ("launch_command", "command", "cmdline")


def label_of(info: dict[str, Any] | None) -> str | None:
    """``PP8``, ``TP8``, ``PP4xTP2`` from ``/server_info``'s parallel sizes; None without.

    >>> label_of({"tp_size": 2, "pp_size": 4, "dp_size": 1})
    'PP4xTP2'
    """
    if not info:
        return None
    args = args_of_info(info)
    sizes = {k: args.get(f"{k}_size") for k in ("tp", "pp", "dp")}
    whole = {k: v for k, v in sizes.items() if isinstance(v, int) and not isinstance(v, bool)}
    return layout_label(whole)


def model_of(info: dict[str, Any] | None) -> str | None:
    """The served model's id: ``served_model_name``, else ``model_path``."""
    if not info:
        return None
    args = args_of_info(info)
    for key in ("served_model_name", "model_path"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def command_of(info: dict[str, Any] | None) -> str | None:
    """The launch command, when ``/server_info`` states one (SGLang's does not by default)."""
    for key in _COMMAND_KEYS:
        value = (info or {}).get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def hardware_of(gpus: Path | None) -> str | None:
    """``8x NVIDIA H100 80GB HBM3`` from an ``nvidia-smi -L`` listing (kinds in order)."""
    if gpus is None:
        return None
    try:
        table = load_gpu_list(gpus)
    except ToolkitError:
        return None
    names = table.filter(table["mig_profile"].is_null())["name"].to_list()
    counts = Counter(n for n in names if n)
    return ", ".join(f"{n}x {name}" for name, n in counts.items()) or None


def interconnect_of(topology: Path | None) -> str | None:
    """``nvlink`` or ``pcie`` from an ``nvidia-smi topo -m`` matrix."""
    if topology is None:
        return None
    try:
        return load_topology(topology).interconnect
    except ToolkitError:
        return None


def run_toml(values: dict[str, Any]) -> str:
    """TOML text of ``values`` (strings, numbers, booleans, local datetimes; one level of
    tables); keys with a None value are left out.

    >>> print(run_toml({"label": "PP8", "gpu_trace": {"interval_s": 0.1}}))
    label = "PP8"
    <BLANKLINE>
    [gpu_trace]
    interval_s = 0.1
    <BLANKLINE>
    """
    plain = [(k, v) for k, v in values.items() if v is not None and not isinstance(v, dict)]
    tables = [(k, v) for k, v in values.items() if isinstance(v, dict) and v]
    lines = [f"{k} = {_value(v)}" for k, v in plain]
    for name, table in tables:
        lines += ["", f"[{name}]"]
        lines += [f"{k} = {_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


def write_run_toml(directory: Path, values: dict[str, Any]) -> RunConfig:
    """Write ``run.toml`` (atomically) and read it back as every loader will."""
    path = directory / "run.toml"
    part = path.with_name(".run.toml.part")
    part.write_text(run_toml(values), encoding="utf-8")
    part.replace(path)
    return read_run_config(directory)


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"not a finite number: {v}")
        return repr(v)
    if isinstance(v, datetime):
        return v.replace(tzinfo=None).isoformat(timespec="milliseconds")
    text = json.dumps(str(v))  # a TOML basic string, but for DEL which TOML wants escaped
    return text.replace("\x7f", "\\u007f")
