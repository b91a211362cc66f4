"""A run directory: one server launch plus what was measured against it, recognized by content.

Any folder works. Each file is sniffed (SGLang server log, benchmark results, GPU traces); an
optional ``run.toml`` names the run and carries what the files cannot say.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ParseError, ToolkitError
from toolkit.load import compression
from toolkit.load.assembly import (
    LAUNCH_SPANS,
    choose_launch,
    launch_spans,
    owning_launch,
)
from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.bench.results import BenchResults, load_bench
from toolkit.load.damage import collecting
from toolkit.load.gpu import trace_formats
from toolkit.load.gpu.identity import uuid_nodes
from toolkit.load.gpu.inventory import APPS_FORMAT, LIST_FORMAT
from toolkit.load.gpu.nodes import NodePlacement, log_hosts, place_nodes
from toolkit.load.gpu.roles import gpu_roles
from toolkit.load.gpu.trace import (
    GpuTrace,
    Topology,
    load_compute_apps,
    load_gpu_list,
    load_gpu_trace,
    load_topology,
)
from toolkit.load.layout import PARALLEL_SIZES, RunLayout, resolve_layout
from toolkit.load.phase_marks import PHASE_FORMAT, load_phase_marks
from toolkit.load.profile import LOOP_CATEGORIES, TORCH_TRACE, Profile, load_profile
from toolkit.load.prometheus import FORMATS as METRICS_FORMATS
from toolkit.load.prometheus import Metrics, load_metrics
from toolkit.load.requests import REQUESTS_FORMAT, load_server_requests
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.run_notes import input_mismatches
from toolkit.load.run_secrets import run_secrets
from toolkit.load.server_info import SERVER_INFO_FORMAT, first_answer_args, load_server_info
from toolkit.load.sglang.log import Launch, SGLangLog, load_sglang_log
from toolkit.load.sglang.restarts import implicit_starts, log_host_of
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command
from toolkit.load.sniff import HF_CONFIG, expand, sniff
from toolkit.load.windows import stray_inputs
from toolkit.schema.sglang import BATCHES

_CONFIG_BYTES = 64 << 20  # a model's config.json is a few kB
_LAUNCH_LINE = re.compile(r"(?:sglang\.launch_server|sglang serve|launch_server\.py)\b.*\s--\w")


@dataclass
class Run:
    """The inputs of one run directory, loaded on first use."""

    path: Path
    config: RunConfig
    files: dict[str, list[Path]] = field(default_factory=dict)  # format name → files
    cache: bool = True
    found: dict[str, list[ToolkitError]] = field(default_factory=dict, init=False, repr=False)
    """Damage read past while loading, by input (``damage``)."""

    @property
    def has_inputs(self) -> bool:
        """Whether the run holds anything to analyse: a server log, results, a GPU trace or
        the server's Prometheus metrics."""
        inputs = {"sglang-log", "sglang-dataset", *BENCH_FORMATS, *trace_formats()}
        return bool((inputs | set(METRICS_FORMATS)) & set(self.files))

    @cached_property
    def secrets(self) -> frozenset[str]:
        """Secret values the inputs hold (``run_secrets``): every output removes them."""
        return run_secrets(self)

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
            interval_s=self.config.gpu_trace_interval_s,
            start=self.config.gpu_trace_start,
            clock_offset_s=self.config.clock_offset_s,
            cache=self.cache,
        )

    @cached_property
    def profile(self) -> Profile | None:
        """The PyTorch profiler traces of the run (``profile/<phase>/`` or anywhere), their
        loop ranges and GPU activity (``LOOP_CATEGORIES``), or None."""
        paths = self.files.get(TORCH_TRACE, [])
        return load_profile(paths, self.path, LOOP_CATEGORIES) if paths else None

    @cached_property
    def compute_apps(self) -> pl.DataFrame | None:
        """The processes ``--query-compute-apps`` listed (``toolkit.schema.gpu.APPS``), their
        GPU index taken from the run's ``nvidia-smi -L`` listing, else from its GPU trace;
        None without such a file. ``processes_per_gpu`` counts them per GPU and listing."""
        paths = self.files.get(APPS_FORMAT, [])
        if not paths:
            return None
        apps = [load_compute_apps(p, self.gpu_inventory) for p in paths]
        return pl.concat(apps, how="diagonal_relaxed")

    @cached_property
    def gpu_inventory(self) -> pl.DataFrame | None:
        """GPU index ↔ UUID (and bus id) of the run: its ``nvidia-smi -L`` listing(s), else the
        ``uuid``/``pci_bus_id`` columns of its GPU trace; None without either."""
        lists = self.files.get(LIST_FORMAT, [])
        if lists:
            return pl.concat([load_gpu_list(p) for p in lists])
        if self.gpu is not None:
            return self.gpu.samples.select("gpu", "uuid", "pci_bus_id").unique()
        return None

    @cached_property
    def gpu_nodes(self) -> NodePlacement | None:
        """The node each GPU trace file (and host within it) was recorded on, and the witness
        that says so (``nodes.place_nodes``); None without a trace."""
        if self.gpu is None:
            return None
        launches = self._group_launches()
        stores = self.log.sources if self.log is not None else []
        return place_nodes(
            self.gpu.samples,
            nnodes=self.layout.nnodes,
            declared=dict(self.config.gpu_trace_nodes),
            hosts=log_hosts(launches, stores),
            root=self.path,
            uuids=self._uuid_nodes() if self.layout.nnodes > 1 else None,
        )

    def _uuid_nodes(self) -> dict[str, int]:
        """GPU UUID → node of the GPUs the scheduler processes hold (``identity.uuid_nodes``)."""
        try:
            return uuid_nodes(self.compute_apps, gpu_roles(self.layout))
        except ToolkitError:
            return {}

    @cached_property
    def node_samples(self) -> pl.DataFrame | None:
        """The GPU trace's samples with their ``node`` filled (``gpu_nodes``); None without."""
        if self.gpu is None or self.gpu_nodes is None:
            return None
        return self.gpu_nodes.apply(self.gpu.samples)

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
        """Benchmark results found in the run (files or printed blocks), or None; a file
        whose times meet no launch of the log (``stray_inputs``) is left out."""
        results = self.bench_all
        stray = [s["file"] for s in stray_inputs(self, ("benchmark results",))]
        if results is None or not stray:
            return results
        runs = results.runs.filter(~pl.col("source").is_in(stray))
        return replace(results, runs=runs) if runs.height else None

    @cached_property
    def stray_inputs(self) -> list[dict[str, Any]]:
        """Timed measurement files that meet no launch of the log (``windows.stray_inputs``)."""
        return stray_inputs(self)

    @cached_property
    def bench_all(self) -> BenchResults | None:
        """Every benchmark result found in the run (files or printed blocks), or None."""
        may_hold = {*BENCH_FORMATS, "sglang-log"}  # a server log may hold printed results
        paths = [p for fmt, ps in self.files.items() for p in ps if fmt in may_hold]
        if not paths:
            return None
        try:
            results = load_bench(paths, label=self.label, cache=self.cache)
        except ToolkitError as e:  # no file held a result: damage when one was broken
            self.found["benchmark results"] = [e] if isinstance(e, ParseError) else []
            return None
        self.found["benchmark results"] = results.damaged
        return results if results.runs.height else None

    @cached_property
    def phase_marks(self) -> pl.DataFrame | None:
        """When each benchmark run started and ended (``phases.jsonl`` of ``ppscope capture``),
        shifted by ``clock_offset_s`` like the GPU trace; None without a phase file."""
        paths = self.files.get(PHASE_FORMAT, [])
        if not paths:
            return None
        return load_phase_marks(paths, clock_offset_s=self.config.clock_offset_s)

    @cached_property
    def server_requests(self) -> pl.DataFrame | None:
        """Finished requests the server recorded (``schema.requests.SERVER_REQUESTS``): its
        metrics-export or JSON request-log files and the request lines of its log; None
        without any. All are written by the server, on the log's clock: no
        ``clock_offset_s``. ``launch`` is the log launch a log line belongs to
        (``launch_spans``; null for files of their own and lines before a file's first
        dump), so a breakdown can keep the launch it analyses."""
        paths = self.files.get(REQUESTS_FORMAT, [])
        own = load_server_requests(paths).table if paths else None
        frames = [own.with_columns(launch=pl.lit(None, pl.Int64))] if own is not None else []
        if self.log is not None:
            frames.append(owning_launch(self.log.requests, self.launch_spans).drop("group"))
        table = pl.concat(frames) if frames else None
        return table if table is not None and table.height else None

    @cached_property
    def server_info(self) -> pl.DataFrame | None:
        """The arguments a live server stated (``/server_info`` answers), long form, shifted
        by ``clock_offset_s`` like the GPU trace; None without such a file."""
        paths = self.files.get(SERVER_INFO_FORMAT, [])
        if not paths:
            return None
        with collecting() as self.found["server info"]:
            return load_server_info(paths, clock_offset_s=self.config.clock_offset_s)

    @cached_property
    def metrics(self) -> Metrics | None:
        """The server's Prometheus metrics (``/metrics`` snapshots of ``ppscope capture``, a
        Prometheus API answer, a saved ``/metrics`` answer), shifted by ``clock_offset_s`` like
        the GPU trace; None without any. Untimed answers are in ``Metrics.untimed``."""
        paths = [p for fmt in METRICS_FORMATS for p in self.files.get(fmt, [])]
        if not paths:
            return None
        with collecting() as self.found["metrics"]:
            return load_metrics(paths, clock_offset_s=self.config.clock_offset_s)

    @cached_property
    def launch_spans(self) -> pl.DataFrame:
        """Every launch of the run's log(s) with its span and multi-node group
        (``assembly.launch_spans``)."""
        if self.log is None:
            return pl.DataFrame(schema=LAUNCH_SPANS)
        starts, hosts = implicit_starts(self.log), log_host_of(self.log)
        return launch_spans(self.log.launches, self.log.scan_batches(), starts, hosts)

    @cached_property
    def launch_choice(self) -> tuple[int | None, str]:
        """(the launch group the run is about, why): the one the GPU trace overlaps the most,
        else the last that logged batch lines (``assembly.choose_launch``)."""
        return choose_launch(self.launch_spans, [w for w in [self.gpu_span] if w is not None])

    @property
    def launch(self) -> Launch | None:
        """The server launch the run is about (of a multi-node start, the first with a dump)."""
        launches = self._group_launches()
        return next((la for la in launches if la.server_args), launches[0] if launches else None)

    def _group_launches(self) -> list[Launch]:
        """The launches of the chosen start: one per node's log of a multi-node start."""
        if self.log is None or not self.log.launches:
            return []
        group, _ = self.launch_choice
        members = self.launch_spans.filter(pl.col("group") == group)["launch"].to_list()
        return [la for la in self.log.launches if la.index in members]

    @cached_property
    def batches(self) -> pl.DataFrame:
        """The batch lines of the chosen launch (every file of a multi-node start)."""
        if self.log is None:
            return pl.DataFrame(schema=BATCHES)
        lines = self.log.batches
        spans = self.launch_spans
        group, _ = self.launch_choice
        if not spans.height or spans["group"].n_unique() < 2:
            return lines
        owned = owning_launch(lines, spans)
        return owned.filter(pl.col("group") == group).drop("launch", "group")

    @cached_property
    def gpu_span(self) -> tuple[datetime, datetime] | None:
        """First and last time of the GPU trace (on the log's clock after ``clock_offset_s``)."""
        if self.gpu is None or not self.gpu.samples.height:
            return None
        ts = self.gpu.samples["ts"].drop_nulls()
        return (ts.min(), ts.max()) if ts.len() else None

    @cached_property
    def untimed_gpu_files(self) -> list[str]:
        """GPU trace files none of whose samples has a time (no ``[gpu_trace] start`` given
        for a format that prints none), in load order."""
        if self.gpu is None or not self.gpu.samples.height:
            return []
        per_file = self.gpu.samples.group_by("source", maintain_order=True).agg(
            timed=pl.col("ts").is_not_null().any()
        )
        return per_file.filter(~pl.col("timed"))["source"].to_list()

    @cached_property
    def mismatches(self) -> list[dict[str, str]]:
        """Inputs that do not belong with the chosen launch, or were read only in part
        (``run_notes.input_mismatches``). Each: ``input``, ``files``, ``detail``."""
        return input_mismatches(self)

    @cached_property
    def launch_span(self) -> tuple[datetime, datetime] | None:
        """First and last batch line of the chosen launch."""
        ts = self.batches["ts"].drop_nulls() if self.batches.height else None
        return (ts.min(), ts.max()) if ts is not None and ts.len() else None

    @cached_property
    def model_config(self) -> dict[str, Any] | None:
        """The served model's Hugging Face ``config.json``, when the run directory holds one."""
        for path in self.files.get(HF_CONFIG, []):
            try:
                data = json.loads(compression.head_bytes(path, _CONFIG_BYTES))
            except (OSError, ValueError, RecursionError, ToolkitError):
                continue
            if isinstance(data, dict):
                text = data.get("text_config")  # multimodal configs nest the language model
                return text if isinstance(text, dict) and "num_hidden_layers" in text else data
        return None

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
        has: the ServerArgs dump and startup summary, the launch command, the server's
        ``/server_info`` answer (when the log holds no dump), the rank tags."""
        launch = self.launch
        flags: dict[str, Any] | None = None
        if self.command is not None:
            try:
                flags = parse_launch_command(self.command[0])
            except ServerArgsError:
                flags = None
        dumped = launch.server_args if launch is not None else None
        return resolve_layout(
            dumped,
            launch.facts() if launch is not None else None,
            command=flags,
            info=None if dumped else self._stated_args(),
            tags=self._rank_sizes(),
        )

    def _stated_args(self) -> dict[str, Any]:
        """The arguments of the server's first ``/server_info`` answer (none when unreadable:
        ``parse`` names the file's problem)."""
        try:
            return first_answer_args(self.server_info)
        except ToolkitError:
            return {}

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
