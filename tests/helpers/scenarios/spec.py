"""What a scenario is: a model, a machine, a launch, the benchmark phases, and what is true."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from helpers.scenarios.machine import Layout, Machine, layer_split

__all__ = ["Cause", "Hardware", "Launch", "Model", "Phase", "Scenario"]


@dataclass(frozen=True)
class Model:
    """The served model, as far as the logs show it."""

    path: str
    layers: int
    arch: str  # the class name SGLang prints after loading weights
    weights_gb: float  # all weights, GB
    context_len: int
    kv_bytes: int  # KV bytes per token per layer for the whole model (K and V)
    mla: bool = False  # one latent KV pool ("KV size") instead of K and V pools
    dtype: str = "torch.bfloat16"


@dataclass(frozen=True)
class Hardware:
    """One node's GPUs, as nvidia-smi names them."""

    gpu_name: str  # nvidia-smi ``name``
    label: str  # run.toml ``hardware``
    interconnect: str  # "pcie" or "nvlink"
    mem_mib: int
    tdp_w: float
    idle_w: float
    gpus: int = 8  # per node


@dataclass(frozen=True)
class Launch:
    """The server launch: flags as given, and what the server resolved them to."""

    tp: int = 1
    pp: int = 1
    depth: int | None = None  # --pp-async-batch-depth (None: not given)
    chunk: int = 8192  # chunked_prefill_size as resolved
    max_prefill_tokens: int = 16384
    mrr: int | None = None  # --max-running-requests as given
    mrr_resolved: int = 2048
    cap: int | None = None  # --pp-max-micro-batch-size (or --max-micro-batch-size) as given
    pool: int = 500_000  # max_total_num_tokens
    max_total_tokens: int | None = None  # --max-total-tokens as given
    graph_max: int = 256  # largest captured decode batch size; 0: graphs disabled
    graph_max_given: bool = False  # --cuda-graph-max-bs on the command line
    mem_fraction: float = 0.85
    mem_fraction_given: bool = False
    partition: tuple[int, ...] | None = None  # SGLANG_PP_LAYER_PARTITION
    nnodes: int = 1
    env: tuple[tuple[str, str], ...] = ()  # environment shown before the command
    flags: tuple[tuple[str, str | None], ...] = ()  # further flags, as given

    @property
    def slot_cap(self) -> int:
        """Requests one slot may hold: the flag, else ``max_running_requests // pp``."""
        if self.pp == 1:
            return self.mrr_resolved
        return self.cap if self.cap is not None else max(self.mrr_resolved // self.pp, 1)

    def layout(self, model: Model, version: tuple[int, ...]) -> Layout:
        split = layer_split(model.layers, self.pp, version, self.partition)
        return Layout(
            tp=self.tp, pp=self.pp, split=split, depth=self.depth or 0, nnodes=self.nnodes
        )


@dataclass(frozen=True)
class Phase:
    """One ``sglang.bench_serving`` run: ``num_prompts`` requests, at most ``c`` in flight."""

    c: int
    num_prompts: int
    isl: int
    osl: int


@dataclass(frozen=True)
class Cause:
    """An injected cause: its cost as a share of throughput, and how it was derived."""

    impact: float
    derivation: str
    phase: int  # index of the phase the impact is computed on
    # What removes the cause: ("launch" | "machine", field, value) replacements of the spec
    # (``derive.played`` plays the phase with them); empty for a cost that is a share of time.
    fix: tuple[tuple[str, str, Any], ...] = ()


@dataclass(frozen=True)
class Scenario:
    """Everything needed to write one run directory and say what is true about it."""

    name: str
    label: str
    version: str  # SGLang version whose log format is written
    model: Model
    hardware: Hardware
    launch: Launch
    machine: Machine
    phases: tuple[Phase, ...]
    causes: dict[str, Cause] = field(default_factory=dict)
    incidental: tuple[str, ...] = ()  # findings that are true but not injected (info, small)
    notes: str = ""
    journald: bool = False
    log_ms: bool = False  # SGLANG_LOG_MS=1
    gpu_interval_ms: int = 1000
    start: str = "2026-05-12 09:30:00"  # the launch's wall clock
    hosts: tuple[str, ...] = ("gpu-node-1",)
    gap_s: float = 15.0  # idle time between benchmark phases
    # -- how the run was recorded (``variations`` sets these; the defaults are the family's) --
    wrapper: str | None = None  # line wrapper (``formats.WRAPPERS``); None: journald or plain
    decode_log_interval: int = 40  # --decode-log-interval
    range_ratio: float = 1.0  # bench_serving --random-range-ratio: lengths in [r·len, len]
    warmup: int = 0  # > 0: a test run of one request, min(OSL, warmup) tokens, before each phase
    api_path: str = "/v1/completions"  # what the benchmark requests
    gpu_format: str = "smi"  # "smi" (--query-gpu CSV), "smi-dmon", "dcgmi"
    # The span a utilization sample averages: None, the polling interval (the family's
    # traces); nvidia-smi's own counter averages the last 1/6–1 s whatever the interval.
    util_window_ms: int | None = None
    gpu_clock_offset_s: float = 0.0  # the GPU trace's clock minus the log's
    declared_offset_s: float = 0.0  # run.toml ``clock_offset_s``
    bench_format: str = "jsonl"  # "jsonl" (--output-file) or "stdout" (the printed blocks)
    omit: frozenset[str] = frozenset()  # files or lines not kept (``variations.OMITTABLE``)
    noise: tuple[str, ...] = ()  # unrelated lines mixed in (``formats.NOISE``)
    variation: dict[str, Any] | None = None  # the variation applied (expected.json)

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))

    @property
    def layout(self) -> Layout:
        return self.launch.layout(self.model, self.version_tuple)

    @property
    def hardware_label(self) -> str:
        """run.toml's ``hardware``: the node's GPUs, times the nodes."""
        n = self.launch.nnodes
        return self.hardware.label if n == 1 else f"{n} nodes of {self.hardware.label}"

    @property
    def healthy(self) -> bool:
        return not self.causes

    def describe(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "label": lay.label(),
            "tp": lay.tp,
            "pp": lay.pp,
            "pp_async_batch_depth": lay.depth,
            "slots": lay.slots,
            "slot_cap": self.launch.slot_cap,
            "max_running_requests": self.launch.mrr_resolved,
            "chunked_prefill_size": self.launch.chunk,
            "max_total_num_tokens": self.launch.pool,
            "cuda_graph_max_bs": self.launch.graph_max,
            "layers_per_stage": list(lay.split),
            "nnodes": lay.nnodes,
        }
