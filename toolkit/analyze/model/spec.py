"""The serving model's inputs: model and hardware specs, layouts, workloads, stage times.

See ``toolkit.analyze.model`` for what the numbers mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from toolkit.errors import ToolkitError
from toolkit.load.layout import RunLayout
from toolkit.load.limits import check

CLIP_MAX_NEW_TOKENS = 4096
"""``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``: most output tokens admission reserves."""

NEW_TOKEN_RATIO = 0.7
"""Share of a running request's remaining output admission reserves (SGLang's initial ratio)."""

DEFAULT_CHUNKED_PREFILL = 8192
"""SGLang's ``chunked_prefill_size`` default on 90–160 GB GPUs such as the RTX PRO 6000."""


# ── inputs ────────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ModelSpec:
    """What one decode step of the model reads. Bytes are per whole model, not per GPU."""

    name: str
    layers: int
    first_dense_layers: int  # leading layers with a dense FFN instead of experts
    experts: int  # routed experts per MoE layer (E)
    top_k: int  # routed experts per token (k)
    expert_bytes: float  # one routed expert's weights
    dense_bytes_per_layer: float  # attention + shared expert: read by every step
    dense_ffn_bytes: float  # the FFN of one leading dense layer
    lm_head_bytes: float
    hidden_size: int
    e_eff: float  # effective expert count; < E models routing skew
    active_params: float  # parameters one token touches, for prefill FLOPs
    context_len: int
    act_bytes: int = 2  # bytes per activation element (bf16)

    def distinct_experts(self, b: float) -> float:
        """``D(b) = E_eff·(1 − (1 − k/E_eff)^b)``: distinct experts a batch touches."""
        if b <= 0 or self.experts <= 0 or self.top_k <= 0:
            return 0.0
        e = min(self.e_eff, float(self.experts))
        return e * (1.0 - (1.0 - self.top_k / e) ** b)

    def step_bytes(self, b: float) -> float:
        """``B(b)``: bytes the whole model reads for one decode step of ``b`` requests."""
        moe = self.layers - self.first_dense_layers
        return (
            self.layers * self.dense_bytes_per_layer
            + self.first_dense_layers * self.dense_ffn_bytes
            + moe * self.expert_bytes * self.distinct_experts(b)
            + self.lm_head_bytes
        )


@dataclass(frozen=True)
class Hardware:
    """The machine, and the few costs ``fit`` calibrates (β, hop, α_AR, overhead)."""

    name: str
    gpus: int
    hbm_bytes_s: float  # β: effective HBM bandwidth per GPU (fitted)
    hop_s: float  # one PP hop: p2p latency + gloo + per-stage CPU (fitted)
    allreduce_s: float  # α_AR: latency of one TP all-reduce (fitted)
    overhead_s: float  # per micro-batch step: launch, sampling, process_batch_result (prior)
    flops_s: float = 2.0e14  # effective dense compute per GPU, only for prefill
    p2p_bytes_s: float = math.inf  # PP activation transfer bandwidth
    allreduce_bytes_s: float = math.inf  # bus bandwidth of an all-reduce; inf = latency only
    stage_launch_s: float = 0.0  # t_launch_k: fixed cost inside each stage forward
    token_s: float = 0.0  # γ: per-request activation cost inside each stage forward


@dataclass(frozen=True)
class Params:
    """Everything ``predict`` needs besides the layout and the workload."""

    model: ModelSpec
    hardware: Hardware


@dataclass(frozen=True)
class Layout:
    """A server launch, by SGLang's flag names where it has one."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    pp_async_batch_depth: int = 0
    pp_max_micro_batch_size: int | None = None  # None = auto, max_running_requests // pp
    max_running_requests: int | None = None  # None = SGLang's default from the KV pool
    chunked_prefill_size: int = DEFAULT_CHUNKED_PREFILL
    max_total_num_tokens: int | None = None  # KV pool in tokens; None = unlimited
    layer_partition: tuple[int, ...] | None = None  # SGLANG_PP_LAYER_PARTITION

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "chunked_prefill_size"):
            if getattr(self, name) < 1:
                raise ToolkitError(f"layout: {name} must be at least 1, got {getattr(self, name)}")
        if self.pp_async_batch_depth < 0:
            raise ToolkitError(
                f"layout: pp_async_batch_depth must be ≥ 0, got {self.pp_async_batch_depth}"
            )
        for name in ("pp_max_micro_batch_size", "max_running_requests", "max_total_num_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ToolkitError(f"layout: {name} must be at least 1, got {value}")
        # before any replay allocates by them: slots, requests and tokens within plausible limits
        for name in ("tp", "pp", "dp"):
            check("parallel_size", getattr(self, name), f"layout: {name}")
        check("slots", self.pp + self.pp_async_batch_depth, "layout: pp + pp_async_batch_depth")
        check("running_requests", self.pp_max_micro_batch_size, "layout: pp_max_micro_batch_size")
        check("running_requests", self.max_running_requests, "layout: max_running_requests")
        check("tokens", self.max_total_num_tokens, "layout: max_total_num_tokens")
        check("tokens", self.chunked_prefill_size, "layout: chunked_prefill_size")

    @property
    def loop_size(self) -> int:
        """Micro-batch slots: ``pp + depth`` under PP; the normal loop has one."""
        return self.pp + self.pp_async_batch_depth if self.pp > 1 else 1

    @property
    def label(self) -> str:
        """``TP8``, ``PP8``, ``PP4xTP2``: the label a run of this layout gets."""
        return str(RunLayout(tp=self.tp, pp=self.pp, dp=self.dp, layout_from="model").label)

    def running_cap(self, context_len: int) -> int:
        """Resolved ``max_running_requests`` (SGLang's ``resolve_max_num_reqs``)."""
        if self.max_running_requests is not None:
            return self.max_running_requests
        if self.max_total_num_tokens is None:
            return 2048  # the clamp's floor, which every GPU of this class hits
        cap = self.max_total_num_tokens
        return max(1, int(min(min(max(cap / context_len * 512, 2048), 4096), cap // 2)))

    def micro_batch_cap(self, context_len: int) -> int:
        """Per-slot request cap: the flag, else ``max(max_running_requests // pp, 1)``
        (divided by ``pp``, not by the slot count)."""
        if self.pp_max_micro_batch_size is not None:
            return self.pp_max_micro_batch_size
        return max(self.running_cap(context_len) // self.pp, 1)


@dataclass(frozen=True)
class Workload:
    """A closed-loop benchmark: ``concurrency`` requests in flight of the given lengths."""

    concurrency: int
    input_len: int = 1000
    output_len: int = 1000
    num_requests: int | None = None  # simulation only: total requests; None = keep going
    input_jitter: float = 0.0  # simulation only: lengths uniform in ±jitter·len
    output_jitter: float = 0.0

    def __post_init__(self) -> None:
        for name in ("concurrency", "input_len", "output_len"):
            if getattr(self, name) < 1:
                raise ToolkitError(
                    f"workload: {name} must be at least 1, got {getattr(self, name)}"
                )
        for name in ("input_jitter", "output_jitter"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ToolkitError(f"workload: {name} must be in [0, 1), got {getattr(self, name)}")
        # a replay holds one entry per request in flight: bounded before it allocates
        check("concurrency", self.concurrency, "workload")
        check("tokens", self.input_len, "workload: input_len")
        check("tokens", self.output_len, "workload: output_len")
        check("requests", self.num_requests, "workload: num_requests")


# ── presets ───────────────────────────────────────────────────────────────────────────────────────

KIMI_K2 = ModelSpec(
    name="Kimi-K2-class MoE (61 layers, 384 experts top-8, INT4 experts)",
    layers=61,
    first_dense_layers=1,
    experts=384,
    top_k=8,
    expert_bytes=44.0e6 * 0.5625,  # INT4 g32: 44.0 M params × 0.5625 B ≈ 24.8 MB
    dense_bytes_per_layer=0.29e9,  # bf16 MLA ≈ 0.2 GB + shared expert ≈ 0.09 GB
    dense_ffn_bytes=3 * 7168 * 18432 * 2,  # layer 0's dense FFN, bf16 ≈ 0.79 GB
    lm_head_bytes=163840 * 7168 * 2,  # ≈ 2.35 GB
    hidden_size=7168,
    e_eff=207.0,  # routing skew that makes the TP8 fit need β ≈ 1.50 TB/s, not 1.93
    active_params=32.0e9,
    context_len=262144,
)

INCIDENT_HARDWARE = Hardware(
    name="8x RTX PRO 6000 Blackwell (PCIe)",
    gpus=8,
    hbm_bytes_s=1.504e12,  # 84 % of the 1.79 TB/s spec
    hop_s=0.67e-3,  # H ≈ 7.4 ms at PP8 = 8 hops + the overhead (+0.5 ms dense FFN ≈ 7.9 fitted)
    allreduce_s=273e-6,  # C_TP ≈ 35.4 ms = 122 all-reduces × α + overhead
    overhead_s=2.0e-3,  # prior: one step's launch, sampling and result processing
    flops_s=2.0e14,
    p2p_bytes_s=25e9,  # PCIe peer copies; matters for prefill chunks, not decode
)

INCIDENT = Params(KIMI_K2, INCIDENT_HARDWARE)
"""Kimi-K2-class model on the incident machine, calibrated on the incident's TP8 and PP8 points."""


# ── stages and their step times ───────────────────────────────────────────────────────────────────


def layer_partition(layers: int, pp: int, override: Sequence[int] | None = None) -> tuple[int, ...]:
    """Layers per PP stage: ``layers // pp`` each, the remainder on the LAST stages.

    ``override`` is ``SGLANG_PP_LAYER_PARTITION`` (one count per stage). Kimi K2 at PP8 gives
    ``7,7,7,8,8,8,8,8``.
    """
    if override is not None:
        counts = tuple(int(x) for x in override)
        if len(counts) != pp or sum(counts) != layers or min(counts) < 1:
            raise ToolkitError(
                f"layer partition {','.join(map(str, counts))} does not split {layers} layers "
                f"into {pp} non-empty stages"
            )
        return counts
    if layers < pp:
        raise ToolkitError(f"cannot split {layers} layers into {pp} pipeline stages")
    base, rem = divmod(layers, pp)
    return tuple(base + (1 if k >= pp - rem else 0) for k in range(pp))


@dataclass(frozen=True)
class _Stage:
    layers: int
    dense_layers: int  # leading dense-FFN layers held by this stage
    lm_head: bool


class StageClock:
    """Step times of one layout's stages under one set of parameters.

    ``decode(k, b)`` is ``t_k(b)``; ``trip(b)`` is ``P(b)``; ``hop(tokens)`` is one PP hop
    carrying ``tokens`` rows of activations (0 for the token relay).
    """

    def __init__(self, layout: Layout, params: Params) -> None:
        self.layout = layout
        self.model = params.model
        self.hw = params.hardware
        parts = layer_partition(self.model.layers, layout.pp, layout.layer_partition)
        stages, start = [], 0
        for k, n in enumerate(parts):
            dense = max(0, min(start + n, self.model.first_dense_layers) - start)
            stages.append(_Stage(n, dense, k == layout.pp - 1))
            start += n
        self.stages: tuple[_Stage, ...] = tuple(stages)
        self._decode: dict[tuple[int, int], float] = {}

    @property
    def hops(self) -> int:
        """Hops per trip: ``pp − 1`` activation sends and one token relay back."""
        return self.layout.pp if self.layout.pp > 1 else 0

    def stage_bytes(self, k: int, b: float) -> float:
        """``B_k(b)``: bytes stage k reads (all its TP ranks together) for one step."""
        s, m = self.stages[k], self.model
        moe = s.layers - s.dense_layers
        return (
            s.layers * m.dense_bytes_per_layer
            + s.dense_layers * m.dense_ffn_bytes
            + moe * m.expert_bytes * m.distinct_experts(b)
            + (m.lm_head_bytes if s.lm_head else 0.0)
        )

    def allreduce(self, k: int, tokens: float) -> float:
        """TP cost of stage k: two all-reduces per layer, latency + ring bytes."""
        tp = self.layout.tp
        if tp == 1:
            return 0.0
        ring = 2 * (tp - 1) / tp * tokens * self.model.hidden_size * self.model.act_bytes
        return 2 * self.stages[k].layers * (self.hw.allreduce_s + ring / self.hw.allreduce_bytes_s)

    def decode(self, k: int, b: int) -> float:
        """``t_k(b) = B_k(b)/(tp·β) + AR_k(b) + t_launch + γ·b``."""
        key = (k, b)
        if key not in self._decode:
            hw = self.hw
            self._decode[key] = (
                self.stage_bytes(k, b) / (self.layout.tp * hw.hbm_bytes_s)
                + self.allreduce(k, b)
                + hw.stage_launch_s
                + hw.token_s * b
            )
        return self._decode[key]

    def prefill(self, k: int, tokens: int) -> float:
        """A prefill chunk on stage k: the slower of weight reads and FLOPs, plus TP cost."""
        s, m, hw, tp = self.stages[k], self.model, self.hw, self.layout.tp
        flops = 2.0 * m.active_params * s.layers / m.layers * tokens
        compute = max(self.stage_bytes(k, tokens) / hw.hbm_bytes_s, flops / hw.flops_s) / tp
        return compute + self.allreduce(k, tokens) + hw.stage_launch_s + hw.token_s * tokens

    def hop(self, tokens: int) -> float:
        """One PP hop: fixed cost plus hidden+residual rows (a 1/tp slice per rank)."""
        rows = 2 * tokens * self.model.hidden_size * self.model.act_bytes / self.layout.tp
        return self.hw.hop_s + rows / self.hw.p2p_bytes_s

    def trip(self, b: int) -> float:
        """``P(b) = Σ_k t_k(b) + hops + overhead``: one micro-batch round the ring."""
        p = self.layout.pp
        relay = self.hop(0) if p > 1 else 0.0
        return (
            sum(self.decode(k, b) for k in range(p))
            + (p - 1) * self.hop(b)
            + relay
            + self.hw.overhead_s
        )

    def cpu_chain(self, n: int) -> float:
        """``n·(overhead + hop)``: each result is processed, then relayed a hop, per rank."""
        relay = self.hop(0) if self.layout.pp > 1 else 0.0
        return n * (self.hw.overhead_s + relay)

    def slowest(self, b: int) -> float:
        """``t_max(b)``: the slowest stage's step time."""
        return max(self.decode(k, b) for k in range(self.layout.pp))
