"""GPU telemetry for a capture: a sampler in the background, the GPU list and topology once.

``nvidia-smi --query-gpu`` writes CSV with its own timestamps (local time, the capture's
clock). Where only DCGM is installed, ``dcgmi dmon`` prints rows without a time: the sampler
notes when the first round was read and the mean period between rounds, and the capture writes
both to ``run.toml`` (``[gpu_trace] start``, ``interval_s``) so the rows land on the clock.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from toolkit.capture.clock import now
from toolkit.capture.halt import Halt
from toolkit.capture.processes import Children

__all__ = [
    "DCGMI_FIELDS",
    "QUERY_FIELDS",
    "GpuSampler",
    "gpu_tool",
    "record_inventory",
    "start_sampler",
]

QUERY_FIELDS = (
    "timestamp,index,name,uuid,utilization.gpu,memory.used,memory.total,power.draw,clocks.sm"
)
"""The ``nvidia-smi --query-gpu`` fields a capture records."""

DCGMI_FIELDS = "1001,1002,1003,1004,1005,203,252,155,100"
"""DCGM field ids a capture records with ``dcgmi dmon``: engine active (1001), SM active (1002),
SM occupancy (1003), tensor pipe (1004), DRAM active (1005), GPU utilization (203), frame buffer
used (252), power (155), SM clock (100)."""

INTERVAL_MS = 100
"""Sampling period of the GPU trace."""


def gpu_tool() -> str | None:
    """``nvidia-smi`` when it is on PATH, else ``dcgmi``, else None."""
    for tool in ("nvidia-smi", "dcgmi"):
        if shutil.which(tool):
            return tool
    return None


APPS_QUERY = "timestamp,gpu_uuid,gpu_bus_id,pid,process_name,used_memory"
"""The compute-process fields a capture lists: which GPU (UUID and bus), which process, and
the memory it holds (``foreign-gpu-process`` reads them)."""


def record_inventory(directory: Path, children: Children) -> dict[str, Path]:
    """``nvidia-smi -L``, ``nvidia-smi topo -m`` and the compute processes
    (``--query-compute-apps``) once, each into its own file; the files written (``gpus``,
    ``topology``, ``processes``). A listing that fails is left out."""
    out: dict[str, Path] = {}
    if not shutil.which("nvidia-smi"):
        return out
    for key, name, argv in (
        ("gpus", "gpus.txt", ["nvidia-smi", "-L"]),
        ("topology", "topology.txt", ["nvidia-smi", "topo", "-m"]),
        (
            "processes",
            "compute-apps.csv",
            ["nvidia-smi", f"--query-compute-apps={APPS_QUERY}", "--format=csv"],
        ),
    ):
        path = directory / name
        with path.open("wb") as sink:
            proc = children.start(argv, stdout=sink)
            try:
                code = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                code = None
            children.stop(proc)
        if code == 0 and path.stat().st_size:
            out[key] = path
        else:
            path.unlink(missing_ok=True)
    return out


@dataclass
class GpuSampler:
    """A running GPU sampler and what it learned about its rounds."""

    tool: str
    path: Path
    proc: subprocess.Popen[Any]
    first_round: datetime | None = None
    last_round: datetime | None = None
    rounds: int = 0
    _reader: threading.Thread | None = field(default=None, repr=False)

    @property
    def interval_s(self) -> float | None:
        """Mean period between rounds (``dcgmi``); None with fewer than two rounds."""
        if self.rounds < 2 or self.first_round is None or self.last_round is None:
            return None
        span = (self.last_round - self.first_round).total_seconds()
        return span / (self.rounds - 1) if span > 0 else None

    def stop(self, children: Children) -> None:
        children.stop(self.proc)
        if self._reader is not None:
            self._reader.join(timeout=5.0)


def start_sampler(
    tool: str, directory: Path, children: Children, *, halt: Halt | None = None
) -> GpuSampler:
    """Start sampling every GPU with ``tool`` (``gpu_tool()``) into a file of ``directory``;
    a write that fails (a full disk) ends the sampling and sets ``halt``. (``nvidia-smi``
    writes its file itself: on a full disk it ends on its own.)"""
    if tool == "nvidia-smi":
        path = directory / "gpu.csv"
        argv = [
            "nvidia-smi",
            f"--query-gpu={QUERY_FIELDS}",
            "--format=csv",
            "-lms",
            str(INTERVAL_MS),
        ]
        with path.open("ab") as sink:  # the child holds its own copy of the descriptor
            proc = children.start(argv, stdout=sink)
        return GpuSampler(tool, path, proc)
    path = directory / "gpu-dcgmi.txt"
    argv = ["dcgmi", "dmon", "-e", DCGMI_FIELDS, "-d", str(INTERVAL_MS)]
    proc = children.start(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sampler = GpuSampler(tool, path, proc)
    sampler._reader = threading.Thread(
        target=_read_dcgmi,
        args=(sampler, proc.stdout, halt),
        daemon=True,
        name="dcgmi-reader",
    )
    sampler._reader.start()
    return sampler


def _read_dcgmi(sampler: GpuSampler, stream: IO[bytes] | None, halt: Halt | None) -> None:
    """Copy ``dcgmi dmon`` output, counting rounds: a round starts at each ``GPU 0`` row."""
    try:
        _copy_dcgmi(sampler, stream)
    except OSError as e:
        if halt is None:
            raise
        halt.stop(e)


def _copy_dcgmi(sampler: GpuSampler, stream: IO[bytes] | None) -> None:
    if stream is None:
        return
    with sampler.path.open("ab") as sink:
        for raw in iter(stream.readline, b""):
            sink.write(raw)
            sink.flush()
            line = raw.decode("utf-8", "replace").split()
            if line[:2] == ["GPU", "0"]:
                t = now()
                sampler.first_round = sampler.first_round or t
                sampler.last_round = t
                sampler.rounds += 1
