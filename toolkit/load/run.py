"""A run directory: one server launch plus what was measured against it, recognized by content.

Any folder works. Each file is sniffed (SGLang server log, benchmark results, GPU traces); an
optional ``run.toml`` names the run and carries what the files cannot say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench.common import layout_label, layout_of
from toolkit.load.bench.results import BenchResults, load_bench
from toolkit.load.gpu import trace_formats
from toolkit.load.gpu.trace import GpuTrace, Topology, load_gpu_trace, load_topology
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.sglang.log import Launch, SGLangLog, load_sglang_log
from toolkit.load.sniff import expand, sniff

# Scheduler settings that decide how a layout behaves, as the serving model names them.
LAYOUT_KEYS = (
    "pp_async_batch_depth",
    "pp_max_micro_batch_size",
    "max_running_requests",
    "chunked_prefill_size",
    "max_total_num_tokens",
)


@dataclass
class Run:
    """The inputs of one run directory, loaded on first use."""

    path: Path
    config: RunConfig
    files: dict[str, list[Path]] = field(default_factory=dict)  # format name → files
    cache: bool = True

    @cached_property
    def log(self) -> SGLangLog | None:
        """The SGLang server log(s) of the run, or None."""
        paths = self.files.get("sglang-log", [])
        return load_sglang_log(paths, cache=self.cache) if paths else None

    @cached_property
    def gpu(self) -> GpuTrace | None:
        """The GPU telemetry of the run, shifted by ``run.toml``'s ``clock_offset_s``, or None."""
        paths = [p for fmt in trace_formats() for p in self.files.get(fmt, [])]
        if not paths:
            return None
        return load_gpu_trace(
            paths, fields=self.config.gpu_trace_fields, clock_offset_s=self.config.clock_offset_s
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
        if self.config.label:
            return self.config.label
        launch = self.launch
        derived = layout_label(layout_of(launch.server_args)) if launch is not None else None
        return derived or self.path.name

    def layout(self) -> dict[str, Any]:
        """Parallel sizes and scheduler settings of the launch, resolved where SGLang logged it.

        ``max_running_requests`` and ``max_total_num_tokens`` come from the scheduler's startup
        summary when printed (it holds the resolved values), else from the ServerArgs dump.
        """
        launch = self.launch
        if launch is None:
            return {}
        args = launch.server_args
        facts = launch.facts()
        out: dict[str, Any] = dict(layout_of(args))
        for key in LAYOUT_KEYS:
            value = facts.get(key, args.get(key))
            if key == "pp_max_micro_batch_size" and value is None:
                value = args.get("max_micro_batch_size")  # its name in 0.4.6–0.5.1
            if isinstance(value, dict):  # differs by rank: the smallest binds
                value = min(value.values())
            out[key] = value if isinstance(value, int) and not isinstance(value, bool) else None
        return out


def load_run(directory: str | Path, *, cache: bool = True) -> Run:
    """The run in ``directory``: its ``run.toml`` and its files grouped by recognized format."""
    path = Path(directory)
    if not path.is_dir():
        raise ToolkitError(f"{path}: not a run directory")
    files: dict[str, list[Path]] = {}
    for file in expand([path]):
        if file.name == "run.toml":
            continue
        files.setdefault(sniff(file) or "unknown", []).append(file)
    return Run(path, read_run_config(path), files, cache)
