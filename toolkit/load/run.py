"""A run directory: one server launch plus what was measured against it, recognized by content.

Any folder works. Each file is sniffed (SGLang server log, benchmark results, GPU traces); an
optional ``run.toml`` names the run and carries what the files cannot say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench.results import BenchResults, load_bench
from toolkit.load.gpu import trace_formats
from toolkit.load.gpu.trace import GpuTrace, Topology, load_gpu_trace, load_topology
from toolkit.load.layout import PARALLEL_SIZES, RunLayout, resolve_layout
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.sglang.log import Launch, SGLangLog, load_sglang_log
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command
from toolkit.load.sniff import expand, sniff

_LAUNCH_LINE = re.compile(r"(?:sglang\.launch_server|sglang serve|launch_server\.py)\b.*\s--\w")


@dataclass
class Run:
    """The inputs of one run directory, loaded on first use."""

    path: Path
    config: RunConfig
    files: dict[str, list[Path]] = field(default_factory=dict)  # format name → files
    cache: bool = True

    @property
    def has_inputs(self) -> bool:
        """Whether the run holds anything to analyse: a server log, results or a GPU trace."""
        inputs = {"sglang-log", "sglang-dataset", *BENCH_FORMATS, *trace_formats()}
        return bool(inputs & set(self.files))

    @cached_property
    def log(self) -> SGLangLog | None:
        """The SGLang server log(s) of the run (files, or a dataset ``ppscope ingest``
        wrote into the run directory), or None."""
        paths = self.files.get("sglang-log", []) + self.files.get("sglang-dataset", [])
        return load_sglang_log(paths, cache=self.cache) if paths else None

    @cached_property
    def gpu(self) -> GpuTrace | None:
        """The GPU telemetry of the run, shifted by ``run.toml``'s ``clock_offset_s``, or None."""
        paths = [p for fmt in trace_formats() for p in self.files.get(fmt, [])]
        if not paths:
            return None
        return load_gpu_trace(
            paths,
            fields=self.config.gpu_trace_fields,
            clock_offset_s=self.config.clock_offset_s,
            cache=self.cache,
        )

    @cached_property
    def topology(self) -> Topology | None:
        """``nvidia-smi topo -m`` of the run's machine, or None."""
        paths = self.files.get("nvidia-smi-topo", [])
        return load_topology(paths[0]) if paths else None

    @property
    def interconnect(self) -> str | None:
        """``pcie`` or ``nvlink``: from ``run.toml``, else from the topology."""
        if self.config.interconnect:
            return self.config.interconnect
        return self.topology.interconnect if self.topology is not None else None

    @cached_property
    def bench(self) -> BenchResults | None:
        """Benchmark results found in the run (files or printed blocks), or None."""
        may_hold = {*BENCH_FORMATS, "sglang-log"}  # a server log may hold printed results
        paths = [p for fmt, ps in self.files.items() for p in ps if fmt in may_hold]
        if not paths:
            return None
        try:
            results = load_bench(paths, label=self.label, cache=self.cache)
        except ToolkitError:
            return None  # no file held a result
        return results if results.runs.height else None

    @property
    def launch(self) -> Launch | None:
        """The last server launch of the run (the one the benchmark measured)."""
        launches = self.log.launches if self.log is not None else []
        return launches[-1] if launches else None

    @property
    def label(self) -> str:
        """``run.toml``'s label, else the layout (``PP8``, ``PP4xTP2``), else the folder name."""
        return self.config.label or self.layout.label or self.path.name

    @cached_property
    def command(self) -> tuple[str, str] | None:
        """(launch command, where it came from): ``run.toml``, else a ``launch_server`` line
        among the log's first lines that mention it."""
        if self.config.command:
            return self.config.command, "run.toml"
        if self.log is None:
            return None
        hits = (
            self.log.scan()
            .filter(pl.col("message").str.contains("launch_server", literal=True))
            .select("message", "lineno", "source")
            .head(20)
            .collect()
        )
        for message, lineno, source in hits.iter_rows():
            m = _LAUNCH_LINE.search(message or "")
            if m is not None:
                return message[m.start() :], f"{Path(source).name}:{lineno}"
        return None

    @cached_property
    def layout(self) -> RunLayout:
        """Parallel sizes and scheduler settings of the launch, from every witness the run
        has: the ServerArgs dump and startup summary, the launch command, the rank tags."""
        launch = self.launch
        flags: dict[str, Any] | None = None
        if self.command is not None:
            try:
                flags = parse_launch_command(self.command[0])
            except ServerArgsError:
                flags = None
        return resolve_layout(
            launch.server_args if launch is not None else None,
            launch.facts() if launch is not None else None,
            command=flags,
            tags=self._rank_sizes(),
        )

    def _rank_sizes(self) -> dict[str, int]:
        """Highest rank + 1 of each parallel tag in the log's prefixes (lower bounds)."""
        if self.log is None:
            return {}
        return {t: n for t, n in self.log.rank_sizes().items() if t in PARALLEL_SIZES}


def run_directory(path: str | Path) -> Path:
    """``path`` if it is a directory; else an error saying what it is instead."""
    path = Path(path)
    if not path.exists():
        raise ToolkitError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise ToolkitError(f"{path}: not a run directory (a file: name the folder that holds it)")
    return path


def load_run(directory: str | Path, *, cache: bool = True) -> Run:
    """The run in ``directory``: its ``run.toml`` and its files grouped by recognized format."""
    path = run_directory(directory)
    files: dict[str, list[Path]] = {}
    for file in expand([path]):
        if file.name == "run.toml":
            continue
        files.setdefault(sniff(file) or "unknown", []).append(file)
    return Run(path, read_run_config(path), files, cache)
