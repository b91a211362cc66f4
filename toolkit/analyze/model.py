"""A decode-throughput model of SGLang PP/TP serving: admission replay, closed form, calibration.

Grounded in the PP scheduler notes (``shared/formats/sglang-pp-scheduler.md``, cited as §n):

* **Slots** (§1.1): ``L = pp_size + pp_async_batch_depth`` micro-batch slots; a request stays in
  the slot that admitted it (§1.2).
* **Admission** (§1.2, §1.3): on its turn a slot takes requests from the head of the shared
  queue until the chunked-prefill budget, the per-slot cap ``pp_max_micro_batch_size`` (auto
  ``max_running_requests // pp_size``), the global request rows or the KV pool run out.
  ``admission`` replays this and returns the slot occupancy vector.
* **Stage time** (§5.1): bytes read per step grow with the *distinct* experts a micro-batch
  touches, ``D(b) = E_eff·(1 − (1 − k/E_eff)^b)``; ``t_k(b) = B_k(b)/(tp·β) + AR_k + t_launch``,
  with two all-reduces per layer under TP (§5.3).
* **Round** (§5.2): ``T_round = max(Σ_j t_max(b_j), max_j P(b_j), n·(overhead + hop))`` where
  ``P(b) = Σ_k t_k(b) + hops·hop + overhead`` is one micro-batch's trip round the ring. The last
  term is the CPU chain of the loop: every rank processes each of the ``n`` results before it
  relays it one hop on (§1.1 steps 4 and 6). tok/s = ``Σ b_j / T_round``.
* **Calibration** (§5.4): ``fit`` solves β, the per-hop cost, the all-reduce latency and (when the
  points allow) the fixed overhead from the single-stream points of each layout plus the
  highest-concurrency point of each non-PP layout; every other point is then a prediction.

The discrete-event simulation of the same loop is in ``toolkit.analyze.model_sim``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = [
    "INCIDENT",
    "INCIDENT_HARDWARE",
    "KIMI_K2",
    "MODEL_POINTS",
    "OBSERVED",
    "WHAT_IF",
    "Batch",
    "Fit",
    "Hardware",
    "Layout",
    "ModelSpec",
    "ObservedPoint",
    "Params",
    "Prediction",
    "Request",
    "SlotScheduler",
    "StageClock",
    "Workload",
    "admission",
    "expected_vs_observed",
    "fit",
    "incident_points",
    "layer_partition",
    "observed_frame",
    "predict",
    "what_if",
    "what_if_table",
    "what_if_workload",
]

CLIP_MAX_NEW_TOKENS = 4096
"""``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``: most output tokens admission reserves (§1.2)."""

NEW_TOKEN_RATIO = 0.7
"""Share of a running request's remaining output admission reserves (SGLang's initial ratio)."""

DEFAULT_CHUNKED_PREFILL = 8192
"""``chunked_prefill_size`` default on 90–160 GB GPUs such as the RTX PRO 6000 (§1.2)."""


# ── inputs ────────────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class ModelSpec:
    """What one decode step of the model reads (§5.1). Bytes are per whole model, not per GPU."""

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
    e_eff: float  # effective expert count; < E models routing skew (§5.1)
    active_params: float  # parameters one token touches, for prefill FLOPs
    context_len: int
    act_bytes: int = 2  # bytes per activation element (bf16)

    def distinct_experts(self, b: float) -> float:
        """``D(b) = E_eff·(1 − (1 − k/E_eff)^b)``: distinct experts a batch touches (§5.1)."""
        if b <= 0:
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
    """A server launch, by SGLang's flag names where it has one (§1.3, §3)."""

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

    @property
    def loop_size(self) -> int:
        """Micro-batch slots: ``pp + depth`` under PP (§1.1); the normal loop has one."""
        return self.pp + self.pp_async_batch_depth if self.pp > 1 else 1

    @property
    def label(self) -> str:
        parts = [f"TP{self.tp}"] if self.tp > 1 else []
        parts += [f"PP{self.pp}"] if self.pp > 1 else []
        parts += [f"DP{self.dp}"] if self.dp > 1 else []
        return "×".join(parts) or "1 GPU"

    def running_cap(self, context_len: int) -> int:
        """Resolved ``max_running_requests`` (``resolve_max_num_reqs``, §1.3)."""
        if self.max_running_requests is not None:
            return self.max_running_requests
        if self.max_total_num_tokens is None:
            return 2048  # the clamp's floor, which every GPU of this class hits
        cap = self.max_total_num_tokens
        return max(1, int(min(min(max(cap / context_len * 512, 2048), 4096), cap // 2)))

    def micro_batch_cap(self, context_len: int) -> int:
        """Per-slot request cap: the flag, else ``max(max_running_requests // pp, 1)`` (§1.3)."""
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


# ── presets (§5.1, §5.4) ──────────────────────────────────────────────────────────────────────

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
    e_eff=207.0,  # routing skew that makes the TP8 fit need β ≈ 1.50 TB/s, not 1.93 (§5.4)
    active_params=32.0e9,
    context_len=262144,
)

INCIDENT_HARDWARE = Hardware(
    name="8x RTX PRO 6000 Blackwell (PCIe)",
    gpus=8,
    hbm_bytes_s=1.504e12,  # 84 % of the 1.79 TB/s spec (§5.4)
    hop_s=0.67e-3,  # H ≈ 7.4 ms at PP8 = 8 hops + the overhead (+0.5 ms dense FFN ≈ §5.4's 7.9)
    allreduce_s=273e-6,  # C_TP ≈ 35.4 ms = 122 all-reduces × α + overhead
    overhead_s=2.0e-3,  # prior: one step's launch, sampling and result processing
    flops_s=2.0e14,
    p2p_bytes_s=25e9,  # PCIe peer copies; matters for prefill chunks, not decode
)

INCIDENT = Params(KIMI_K2, INCIDENT_HARDWARE)
"""Kimi-K2-class model on the incident machine, calibrated as §5.4 does."""


# ── stages and their step times ───────────────────────────────────────────────────────────────


def layer_partition(layers: int, pp: int, override: Sequence[int] | None = None) -> tuple[int, ...]:
    """Layers per PP stage: ``layers // pp`` each, the remainder on the LAST stages (§3).

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
    """Step times of one layout's stages under one set of parameters (§3, §5.1, §5.3).

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
        """Hops per trip: ``pp − 1`` activation sends and one token relay back (§3)."""
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
        """TP cost of stage k: two all-reduces per layer, latency + ring bytes (§5.3)."""
        tp = self.layout.tp
        if tp == 1:
            return 0.0
        ring = 2 * (tp - 1) / tp * tokens * self.model.hidden_size * self.model.act_bytes
        return 2 * self.stages[k].layers * (self.hw.allreduce_s + ring / self.hw.allreduce_bytes_s)

    def decode(self, k: int, b: int) -> float:
        """``t_k(b) = B_k(b)/(tp·β) + AR_k(b) + t_launch + γ·b`` (§5.1, §5.3)."""
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
        """One PP hop: fixed cost plus hidden+residual rows (a 1/tp slice per rank, §3)."""
        rows = 2 * tokens * self.model.hidden_size * self.model.act_bytes / self.layout.tp
        return self.hw.hop_s + rows / self.hw.p2p_bytes_s

    def trip(self, b: int) -> float:
        """``P(b) = Σ_k t_k(b) + hops + overhead``: one micro-batch round the ring (§5.2)."""
        p = self.layout.pp
        relay = self.hop(0) if p > 1 else 0.0
        return (
            sum(self.decode(k, b) for k in range(p))
            + (p - 1) * self.hop(b)
            + relay
            + self.hw.overhead_s
        )

    def cpu_chain(self, n: int) -> float:
        """``n·(overhead + hop)``: each result is processed, then relayed a hop, per rank (§1.1)."""
        relay = self.hop(0) if self.layout.pp > 1 else 0.0
        return n * (self.hw.overhead_s + relay)

    def slowest(self, b: int) -> float:
        """``t_max(b)``: the slowest stage's step time."""
        return max(self.decode(k, b) for k in range(self.layout.pp))


# ── admission (§1.2) ──────────────────────────────────────────────────────────────────────────


@dataclass(eq=False)
class Request:
    """One request as the scheduler sees it; times are filled in by the simulation."""

    rid: int
    input_len: int
    output_len: int
    arrival_s: float = 0.0
    prefilled: int = 0
    generated: int = 0
    kv_tokens: int = 0
    slot: int = -1
    admitted_s: float = math.nan
    first_token_s: float = math.nan
    finished_s: float = math.nan

    @property
    def reserve(self) -> int:
        """KV tokens admission charges up front: prompt + clipped output (§1.2)."""
        return self.input_len + min(self.output_len, CLIP_MAX_NEW_TOKENS)


@dataclass
class Batch:
    """What one slot runs on its turn: a prefill chunk list or a decode step."""

    kind: str  # "prefill" or "decode"
    slot: int
    reqs: list[Request]
    tokens: list[int]  # new tokens per request: prompt chunk (prefill) or 1 (decode)
    done: list[bool]  # prefill: the request's prompt completes in this batch
    running_before: int  # requests already in the slot when it was formed (log `#running-req`)
    queue_after: int  # waiting requests after admission (log `#queue-req`)
    kv_after: int  # KV tokens in use after allocation (log `#token`)

    @property
    def size(self) -> int:
        return len(self.reqs)

    @property
    def new_tokens(self) -> int:
        return sum(self.tokens)


class SlotScheduler:
    """``get_next_batch_to_run`` for one slot's turn, shared by every stage (§1.1, §1.2).

    State: the shared waiting queue, the single ``chunked_req``, per-slot running requests (slot
    affinity) and per-slot prefilled requests waiting to be merged on the slot's next turn.
    Simplifications: no retraction, no prefix cache, no mixed chunk; KV charged as §1.2 says.
    """

    def __init__(self, layout: Layout, model: ModelSpec) -> None:
        self.layout = layout
        self.slots = layout.loop_size
        self.cap = layout.micro_batch_cap(model.context_len)
        self.rows = layout.running_cap(model.context_len)
        self.pool = layout.max_total_num_tokens
        self.waiting: deque[Request] = deque()
        self.chunked: Request | None = None
        self.running: list[list[Request]] = [[] for _ in range(self.slots)]
        self.pending: list[list[Request]] = [[] for _ in range(self.slots)]
        self.kv_used = 0

    def submit(self, req: Request) -> None:
        if self.pool is not None and req.reserve > self.pool:
            raise ToolkitError(
                f"a request of {req.input_len}+{req.output_len} tokens can never fit the KV pool "
                f"of {self.pool} tokens"
            )
        self.waiting.append(req)

    @property
    def rows_in_use(self) -> int:
        held = sum(len(r) + len(p) for r, p in zip(self.running, self.pending, strict=True))
        return held + (1 if self.chunked is not None else 0)

    def occupancy(self) -> tuple[int, ...]:
        """Requests bound to each slot (running or about to merge), in slot order."""
        return tuple(len(r) + len(p) for r, p in zip(self.running, self.pending, strict=True))

    def idle(self) -> bool:
        return not self.waiting and self.chunked is None and not any(self.occupancy())

    def turn(self, slot: int, now: float = 0.0) -> Batch | None:
        """Slot ``slot``'s turn: merge its last prefill, try a new prefill, else decode."""
        if self.pending[slot]:
            self.running[slot].extend(self.pending[slot])
            self.pending[slot] = []
        batch = self._prefill(slot, now)
        if batch is not None:
            return batch  # a slot with a prefill skips its decode this turn (§1.2)
        running = self.running[slot]
        if not running:
            return None
        for req in running:
            req.kv_tokens += 1  # prepare_for_decode allocates one KV slot per request
        self.kv_used += len(running)
        return Batch(
            "decode",
            slot,
            list(running),
            [1] * len(running),
            [False] * len(running),
            len(running),
            len(self.waiting),
            self.kv_used,
        )

    def _kv_left(self, slot: int) -> float:
        if self.pool is None:
            return math.inf
        held = sum(
            min(r.output_len - r.generated, CLIP_MAX_NEW_TOKENS) * NEW_TOKEN_RATIO
            for r in self.running[slot]
        )
        return self.pool - self.kv_used - held

    def _prefill(self, slot: int, now: float) -> Batch | None:
        if not self.waiting and self.chunked is None:
            return None
        before = len(self.running[slot])
        budget = min(self.cap - before, self.rows - self.rows_in_use)
        chunk = self.layout.chunked_prefill_size
        kv_left = self._kv_left(slot)
        reqs: list[Request] = []
        tokens: list[int] = []
        done: list[bool] = []
        if self.chunked is not None:
            # A chunked request is always continued: it already holds a row and KV (§1.2).
            req = self.chunked
            take = min(req.input_len - req.prefilled, chunk)
            reqs.append(req)
            tokens.append(take)
            chunk -= take
            self.chunked = None
            if req.prefilled + take < req.input_len:
                self.chunked = req
        while self.waiting and chunk > 0 and len(reqs) < budget:
            req = self.waiting[0]
            if req.reserve > kv_left:
                break
            self.waiting.popleft()
            kv_left -= req.reserve
            req.admitted_s = now
            take = min(req.input_len, chunk)
            reqs.append(req)
            tokens.append(take)
            chunk -= take
            if take < req.input_len:
                self.chunked = req  # the overflow becomes the single chunked request
                break
        if not reqs:
            return None
        for req, take in zip(reqs, tokens, strict=True):
            req.prefilled += take
            req.kv_tokens += take
            self.kv_used += take
            done.append(req.prefilled >= req.input_len)
            if done[-1]:
                req.slot = slot
                self.pending[slot].append(req)  # merged into running on the slot's next turn
        return Batch("prefill", slot, reqs, tokens, done, before, len(self.waiting), self.kv_used)

    def complete(self, batch: Batch, now: float = 0.0) -> list[Request]:
        """The batch's tokens arrived: count them, drop finished requests, return those."""
        finished = []
        for req, done in zip(batch.reqs, batch.done, strict=True):
            if batch.kind == "prefill" and not done:
                continue
            req.generated += 1
            if batch.kind == "prefill":
                req.first_token_s = now
            if req.generated >= req.output_len:
                req.finished_s = now
                finished.append(req)
                self.kv_used -= req.kv_tokens
                for group in (self.running[req.slot], self.pending[req.slot]):
                    if req in group:
                        group.remove(req)
        return finished


def admission(layout: Layout, workload: Workload, model: ModelSpec = KIMI_K2) -> tuple[int, ...]:
    """Replay §1.2's admission of a burst of ``concurrency`` requests; return slot occupancy.

    Slot turns go 0, 1, 2, …; each takes requests front-first until the chunk budget, the
    per-slot cap, the request rows or the KV pool stop it. Nothing rebalances later, so with
    ISL ≈ 1000 and a chunk of 8192 a burst of 32 fills four slots of eight.

    Returns
    -------
    tuple[int, ...]
        Requests per slot, length ``layout.loop_size``; requests that never fit stay queued.
    """
    sched = SlotScheduler(layout, model)
    for rid in range(workload.concurrency):
        sched.submit(Request(rid, workload.input_len, workload.output_len))
    idle_turns, turn = 0, 0
    while (sched.waiting or sched.chunked is not None) and idle_turns < sched.slots:
        batch = sched.turn(turn % sched.slots)
        idle_turns = 0 if batch is not None and batch.kind == "prefill" else idle_turns + 1
        turn += 1
    return sched.occupancy()


# ── closed form (§5.2, §5.3) ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Prediction:
    """The closed form's steady decode state for one layout and workload (§5.2).

    ``round_s`` is ``T_round`` (= TPOT); ``regime`` says which term of the max binds: ``A`` the
    trip of one micro-batch (under-filled pipeline), ``B`` the slowest stage, ``CPU`` the
    chain of result processing and relays. ``stage_busy`` is ``Σ_j t_k(b_j)/T_round`` per stage.
    """

    layout: Layout
    workload: Workload
    occupancy: tuple[int, ...]
    round_s: float
    tok_s: float
    trip_s: float
    stage_bound_s: float
    cpu_bound_s: float
    regime: str
    stage_busy: tuple[float, ...]
    in_flight: float  # Little's law: Σ_j P(b_j) / T_round micro-batches between launch and tokens

    @property
    def running(self) -> int:
        return sum(self.occupancy)

    @property
    def active_slots(self) -> int:
        return sum(1 for b in self.occupancy if b > 0)

    @property
    def tpot_s(self) -> float:
        return self.round_s

    @property
    def gpu_busy(self) -> tuple[float, ...]:
        """Busy share per GPU (stage k's ``tp`` ranks share its timeline)."""
        return tuple(b for b in self.stage_busy for _ in range(self.layout.tp))

    @property
    def gpu_idle_share(self) -> float:
        """Mean over GPUs of the share of each round a GPU runs no forward."""
        busy = self.stage_busy
        return 1.0 - sum(busy) / len(busy) if busy else math.nan

    @property
    def shape(self) -> str:
        """Occupancy as ``n×b`` (``4×8``), or the slot sizes when they differ."""
        sizes = [b for b in self.occupancy if b > 0]
        if not sizes:
            return "empty"
        if len(set(sizes)) == 1:
            return f"{len(sizes)}×{sizes[0]}"
        return "+".join(map(str, sizes))


def predict(layout: Layout, workload: Workload, params: Params = INCIDENT) -> Prediction:
    """Closed-form decode throughput (§5.2): ``tok/s = Σ b_j / T_round`` with

    ``T_round = max(Σ_j t_max(b_j), max_j P(b_j), n·(overhead + hop))``, ``b_j`` from
    ``admission``.
    ``pp = 1`` is one batch per step, ``t(b) + overhead`` (§5.3). ``dp`` replicas each serve an
    equal share of the concurrency; their throughputs add.
    """
    if layout.dp > 1:
        return _predict_dp(layout, workload, params)
    occupancy = admission(layout, workload, params.model)
    clock = StageClock(layout, params)
    sizes = [b for b in occupancy if b > 0]
    if not sizes:
        nan = math.nan
        return Prediction(layout, workload, occupancy, nan, 0.0, nan, nan, nan, "-", (), 0.0)
    stage_bound = sum(clock.slowest(b) for b in sizes)
    trip = max(clock.trip(b) for b in sizes)
    cpu = clock.cpu_chain(len(sizes))
    round_s = max(stage_bound, trip, cpu)
    regime = "A" if round_s == trip else ("B" if round_s == stage_bound else "CPU")
    busy = tuple(
        min(1.0, sum(clock.decode(k, b) for b in sizes) / round_s) for k in range(layout.pp)
    )
    in_flight = sum(clock.trip(b) for b in sizes) / round_s
    return Prediction(
        layout,
        workload,
        occupancy,
        round_s,
        sum(sizes) / round_s,
        trip,
        stage_bound,
        cpu,
        regime,
        busy,
        in_flight,
    )


def _predict_dp(layout: Layout, workload: Workload, params: Params) -> Prediction:
    one = replace(layout, dp=1)
    share, extra = divmod(workload.concurrency, layout.dp)
    parts = [
        predict(one, replace(workload, concurrency=share + (1 if i < extra else 0)), params)
        for i in range(layout.dp)
        if share + (1 if i < extra else 0) > 0
    ]
    first = parts[0]
    return Prediction(
        layout,
        workload,
        first.occupancy,
        max(p.round_s for p in parts),
        sum(p.tok_s for p in parts),
        first.trip_s,
        first.stage_bound_s,
        first.cpu_bound_s,
        first.regime,
        tuple(sum(p.stage_busy[k] for p in parts) / layout.dp for k in range(layout.pp)),
        sum(p.in_flight for p in parts),
    )


# ── what-if (by SGLang flag names) ────────────────────────────────────────────────────────────

_LAYOUT_KEYS: dict[str, str] = {
    "pp_async_batch_depth": "pp_async_batch_depth",
    "pp_max_micro_batch_size": "pp_max_micro_batch_size",
    "max_running_requests": "max_running_requests",
    "chunked_prefill_size": "chunked_prefill_size",
    "max_total_num_tokens": "max_total_num_tokens",
    "tp_size": "tp",
    "tp": "tp",
    "pp_size": "pp",
    "pp": "pp",
    "dp_size": "dp",
    "dp": "dp",
}
_PP_ONLY = {"pp_async_batch_depth", "pp_max_micro_batch_size"}
_AUTO_OK = {"pp_max_micro_batch_size", "max_running_requests", "max_total_num_tokens"}
_WORKLOAD_KEYS: dict[str, str] = {
    "concurrency": "concurrency",
    "max_concurrency": "concurrency",
    "input_len": "input_len",
    "random_input_len": "input_len",
    "output_len": "output_len",
    "random_output_len": "output_len",
}


def _changed(changes: Mapping[str, int | None]) -> set[str]:
    """Layout fields a change set touches."""
    return {_LAYOUT_KEYS[k] for k in changes if k in _LAYOUT_KEYS}


def _unknown(key: str) -> ToolkitError:
    known = ", ".join(sorted({*_LAYOUT_KEYS, *_WORKLOAD_KEYS}))
    return ToolkitError(f"what-if: unknown setting {key!r} (known: {known})")


def what_if(layout: Layout, changes: Mapping[str, int | None]) -> Layout:
    """The layout with SGLang flags changed, e.g. ``{"pp_max_micro_batch_size": 4}``.

    Workload keys (``concurrency``, ``input_len``, ``output_len``) are ignored here: see
    ``what_if_workload``. ``None`` means auto for the cap, the request limit and the pool.
    The PP-only flags (``pp_async_batch_depth``, ``pp_max_micro_batch_size``) leave a layout
    without PP unchanged: a what-if aimed at the PP run must not throttle the TP baseline.
    """
    updates: dict[str, Any] = {}
    for key, value in changes.items():
        if key in _WORKLOAD_KEYS:
            continue
        if key not in _LAYOUT_KEYS:
            raise _unknown(key)
        if value is None and key not in _AUTO_OK:
            raise ToolkitError(f"what-if: {key} needs a number, not auto")
        if key in _PP_ONLY and layout.pp == 1 and "pp" not in _changed(changes):
            continue
        updates[_LAYOUT_KEYS[key]] = None if value is None else int(value)
    if "pp" in updates and layout.layer_partition is not None:
        updates["layer_partition"] = None  # a fixed partition is for the old stage count
    return replace(layout, **updates)


def what_if_workload(workload: Workload, changes: Mapping[str, int | None]) -> Workload:
    """The workload with ``concurrency`` / ``input_len`` / ``output_len`` changed."""
    updates: dict[str, Any] = {}
    for key, value in changes.items():
        if key in _LAYOUT_KEYS:
            continue
        if key not in _WORKLOAD_KEYS:
            raise _unknown(key)
        if value is None:
            raise ToolkitError(f"what-if: {key} needs a number, not auto")
        updates[_WORKLOAD_KEYS[key]] = int(value)
    return replace(workload, **updates)


# ── observed points ───────────────────────────────────────────────────────────────────────────

_I, _F, _S, _B = pl.Int64(), pl.Float64(), pl.String(), pl.Boolean()

OBSERVED_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout label"),
    Column("tp", _I, "tensor parallel size"),
    Column("pp", _I, "pipeline parallel size"),
    Column("dp", _I, "data parallel size"),
    Column("pp_async_batch_depth", _I, "extra PP micro-batch slots"),
    Column("pp_max_micro_batch_size", _I, "per-slot request cap; null = auto"),
    Column("max_running_requests", _I, "request limit; null = SGLang's default"),
    Column("chunked_prefill_size", _I, "prefill chunk budget, tokens"),
    Column("max_total_num_tokens", _I, "KV pool, tokens; null = not limiting"),
    Column("concurrency", _I, "requests in flight"),
    Column("input_len", _I, "prompt tokens per request"),
    Column("output_len", _I, "generated tokens per request"),
    Column("output_tok_s", _F, "observed generated tokens per second (all streams)"),
)
OBSERVED = schema_of(OBSERVED_COLUMNS)

_OBSERVED_DEFAULTS: dict[str, Any] = {
    "dp": 1,
    "pp_async_batch_depth": 0,
    "pp_max_micro_batch_size": None,
    "max_running_requests": None,
    "chunked_prefill_size": DEFAULT_CHUNKED_PREFILL,
    "max_total_num_tokens": None,
    "input_len": 1000,
    "output_len": 1000,
}
_OBSERVED_REQUIRED = ("label", "tp", "pp", "concurrency", "output_tok_s")


@dataclass(frozen=True)
class ObservedPoint:
    """One measured point: a layout, a workload and its output throughput."""

    label: str
    tp: int
    pp: int
    concurrency: int
    output_tok_s: float
    pp_async_batch_depth: int = 0
    pp_max_micro_batch_size: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int = DEFAULT_CHUNKED_PREFILL
    max_total_num_tokens: int | None = None
    input_len: int = 1000
    output_len: int = 1000
    dp: int = 1


def observed_frame(
    points: pl.DataFrame | Iterable[ObservedPoint | Mapping[str, Any]],
) -> pl.DataFrame:
    """Observed points as an ``OBSERVED`` frame: missing optional columns get SGLang defaults.

    Accepts a frame (e.g. ``load_bench``'s runs: extra columns are dropped, mean lengths are
    rounded) or a sequence of ``ObservedPoint`` / mappings.
    """
    if not isinstance(points, pl.DataFrame):
        rows = [
            {f.name: getattr(p, f.name) for f in fields(ObservedPoint)}
            if isinstance(p, ObservedPoint)
            else dict(p)
            for p in points
        ]
        if not rows:
            return pl.DataFrame(schema=OBSERVED)
        points = pl.DataFrame(rows, infer_schema_length=None)
    if points.width == 0:
        return pl.DataFrame(schema=OBSERVED)
    missing = [c for c in _OBSERVED_REQUIRED if c not in points.columns]
    if missing:
        raise ToolkitError(f"observed points: missing column(s) {', '.join(missing)}")
    exprs = []
    for col in OBSERVED_COLUMNS:
        default = _OBSERVED_DEFAULTS.get(col.name)
        if col.name in points.columns:
            e = pl.col(col.name)
            if col.dtype == _I and points.schema[col.name].is_float():
                e = e.round(0)
            e = e.cast(col.dtype, strict=False)
            if col.name in ("tp", "pp"):
                e = e.fill_null(1)
            elif default is not None:
                e = e.fill_null(default)
        else:
            e = pl.lit(default, dtype=col.dtype)
        exprs.append(e.alias(col.name))
    frame = points.select(exprs)
    bad = frame.filter(
        pl.col("output_tok_s").is_null()
        | ~pl.col("output_tok_s").is_finite()
        | (pl.col("output_tok_s") <= 0)
        | (pl.col("concurrency").fill_null(0) < 1)
    )
    if bad.height:
        row = bad.row(0, named=True)
        raise ToolkitError(
            f"observed point {row['label']!r} c={row['concurrency']}: needs concurrency ≥ 1 and "
            f"a positive output_tok_s, got {row['output_tok_s']}"
        )
    return frame


def incident_points() -> pl.DataFrame:
    """The incident's four numbers (§0): PP8 d=8 vs TP8 at c=1 and c=32, ISL ≈ 1000.

    The output length was not reported; 1000 is assumed (it only matters for KV reservation).
    """
    common = {"chunked_prefill_size": 8192, "input_len": 1000, "output_len": 1000}
    pp8 = {"label": "PP8", "tp": 1, "pp": 8, "pp_async_batch_depth": 8}
    pp8 |= {"max_total_num_tokens": 327680, **common}
    tp8 = {"label": "TP8", "tp": 8, "pp": 1, "max_total_num_tokens": 140000, **common}
    return observed_frame(
        [
            {**pp8, "concurrency": 1, "output_tok_s": 34.3},
            {**tp8, "concurrency": 1, "output_tok_s": 26.3},
            {**pp8, "concurrency": 32, "output_tok_s": 248.1},
            {**tp8, "concurrency": 32, "output_tok_s": 577.8},
        ]
    )


def _layout_of(row: Mapping[str, Any]) -> Layout:
    return Layout(
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        dp=int(row["dp"]),
        pp_async_batch_depth=int(row["pp_async_batch_depth"]),
        pp_max_micro_batch_size=row["pp_max_micro_batch_size"],
        max_running_requests=row["max_running_requests"],
        chunked_prefill_size=int(row["chunked_prefill_size"]),
        max_total_num_tokens=row["max_total_num_tokens"],
    )


def _workload_of(row: Mapping[str, Any]) -> Workload:
    return Workload(int(row["concurrency"]), int(row["input_len"]), int(row["output_len"]))


# ── calibration ───────────────────────────────────────────────────────────────────────────────

_UNKNOWNS = ("allreduce_s", "hop_s", "inv_beta", "overhead_s")


@dataclass(frozen=True)
class Fit:
    """Calibrated parameters and how they were obtained."""

    params: Params
    fitted: tuple[str, ...]  # Hardware fields solved from the data
    fixed: tuple[str, ...]  # Hardware fields kept at the prior
    calibration: tuple[tuple[str, int], ...]  # (label, concurrency) of the points used

    def summary(self) -> dict[str, Any]:
        """The parameters in display units, for ``--json``."""
        hw, m = self.params.hardware, self.params.model
        return {
            "model": m.name,
            "hardware": hw.name,
            "hbm_tb_s": hw.hbm_bytes_s / 1e12,
            "e_eff": m.e_eff,
            "hop_ms": hw.hop_s * 1e3,
            "allreduce_us": hw.allreduce_s * 1e6,
            "overhead_ms": hw.overhead_s * 1e3,
            "fitted": list(self.fitted),
            "fixed": list(self.fixed),
            "calibration": [{"label": lab, "concurrency": c} for lab, c in self.calibration],
        }


def _trip_terms(layout: Layout, b: int, params: Params) -> tuple[dict[str, float], float]:
    """``P(b)`` as ``Σ coef·unknown + const`` in the fitted unknowns (β enters as 1/β)."""
    zero = replace(
        params.hardware, hbm_bytes_s=math.inf, hop_s=0.0, allreduce_s=0.0, overhead_s=0.0
    )
    clock = StageClock(layout, Params(params.model, zero))
    p, tp = layout.pp, layout.tp
    coef = {
        "inv_beta": sum(clock.stage_bytes(k, b) for k in range(p)) / tp,
        "allreduce_s": 2.0 * params.model.layers if tp > 1 else 0.0,
        "hop_s": float(clock.hops),
        "overhead_s": 1.0,
    }
    return coef, clock.trip(b)


def _select(columns: dict[str, list[float]], limit: int) -> list[str]:
    """Unknowns, in the dict's order, whose columns are linearly independent (Gram–Schmidt)."""
    chosen: list[str] = []
    basis: list[list[float]] = []
    for name, v in columns.items():
        if len(chosen) >= limit:
            break
        norm = math.sqrt(sum(x * x for x in v))
        if norm == 0.0:
            continue
        v = [x / norm for x in v]
        for q in basis:
            dot = sum(a * c for a, c in zip(v, q, strict=True))
            v = [a - dot * c for a, c in zip(v, q, strict=True)]
        rest = math.sqrt(sum(x * x for x in v))
        if rest > 1e-6:
            basis.append([x / rest for x in v])
            chosen.append(name)
    return chosen


def _least_squares(a: list[list[float]], y: list[float]) -> list[float]:
    """Solve ``min |A x − y|`` by the normal equations with column scaling (tiny systems)."""
    n = len(a[0])
    scale = [math.sqrt(sum(r[j] ** 2 for r in a)) or 1.0 for j in range(n)]
    a = [[r[j] / scale[j] for j in range(n)] for r in a]
    m = [
        [sum(r[i] * r[j] for r in a) for j in range(n)]
        + [sum(r[i] * v for r, v in zip(a, y, strict=True))]
        for i in range(n)
    ]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col and m[col][col] != 0.0:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * z for x, z in zip(m[r], m[col], strict=True)]
    return [m[i][n] / m[i][i] / scale[i] for i in range(n)]


def fit(
    observed: pl.DataFrame | Iterable[ObservedPoint | Mapping[str, Any]],
    *,
    model: ModelSpec = KIMI_K2,
    prior: Hardware = INCIDENT_HARDWARE,
) -> Fit:
    """Calibrate β, the per-hop cost, α_AR and the overhead from the single-stream points.

    Calibration points are every ``concurrency == 1`` point plus the highest-concurrency point of
    each non-PP layout (one more TP point, as §5.4 does). Each is a trip, linear in the unknowns:
    ``T = Σ_k B_k(b)/tp · (1/β) + N_AR·α_AR + hops·hop + overhead``, ``T = running / tok_s``.
    Unknowns are solved by least squares in the order α_AR, hop, β, overhead as far as the
    points make them independent; the others, and any that come out non-positive, keep the
    ``prior`` value. On the incident (``incident_points``) this gives β ≈ 1.50 TB/s,
    α_AR ≈ 273 µs and hop ≈ 0.67 ms with the 2 ms overhead prior: §5.4's ``H ≈ 7.9 ms`` at PP8
    once layer 0's dense FFN (≈ 0.5 ms of reads, counted in the stage time here) is added.
    """
    frame = observed_frame(observed)
    if frame.height == 0:
        raise ToolkitError("fit: no observed points")
    rows = frame.rows(named=True)
    best: dict[tuple[str, int, int, int], dict[str, Any]] = {}
    for row in rows:
        if row["pp"] == 1:
            key = (row["label"], row["tp"], row["dp"], row["max_running_requests"] or 0)
            if key not in best or row["concurrency"] > best[key]["concurrency"]:
                best[key] = row
    calib = [r for r in rows if r["concurrency"] == 1]
    calib += [r for r in best.values() if r["concurrency"] > 1]
    base = Params(model, prior)
    equations: list[tuple[dict[str, float], float]] = []
    for row in calib:
        layout, load = _layout_of(row), _workload_of(row)
        occupancy = admission(layout, load, model)
        b = max(occupancy)
        coef, const = _trip_terms(layout, b, base)
        equations.append((coef, sum(occupancy) / row["output_tok_s"] - const))
    prior_values = {
        "inv_beta": 1.0 / prior.hbm_bytes_s,
        "hop_s": prior.hop_s,
        "allreduce_s": prior.allreduce_s,
        "overhead_s": prior.overhead_s,
    }
    free, values = _solve(equations, prior_values)
    hw = replace(
        prior,
        hbm_bytes_s=1.0 / values["inv_beta"],
        hop_s=values["hop_s"],
        allreduce_s=values["allreduce_s"],
        overhead_s=values["overhead_s"],
    )
    names = {"inv_beta": "hbm_bytes_s"}
    solved = tuple(names.get(u, u) for u in _UNKNOWNS if u in free)
    kept = tuple(names.get(u, u) for u in _UNKNOWNS if u not in free)
    return Fit(
        Params(model, hw),
        solved,
        kept,
        tuple((r["label"], int(r["concurrency"])) for r in calib),
    )


def _solve(
    equations: list[tuple[dict[str, float], float]], prior: dict[str, float]
) -> tuple[list[str], dict[str, float]]:
    """Least squares for the unknowns the equations pin down; the rest keep ``prior``.

    An unknown that comes out negative (or a non-positive 1/β) is one the data cannot support
    under this model: it goes back to its prior and the others are solved again.
    """
    values = dict(prior)
    usable = list(_UNKNOWNS)
    while True:
        free = _select({u: [c[u] for c, _ in equations] for u in usable}, len(equations))
        if not free:
            return [], values
        y = [t - sum(c[u] * values[u] for u in _UNKNOWNS if u not in free) for c, t in equations]
        solution = _least_squares([[c[u] for u in free] for c, _ in equations], y)
        bad = [
            u for u, x in zip(free, solution, strict=True) if x < 0 or (u == "inv_beta" and x <= 0)
        ]
        if not bad:
            values.update(zip(free, solution, strict=True))
            return free, values
        usable.remove(bad[0])


# ── expected vs observed ──────────────────────────────────────────────────────────────────────

MODEL_POINT_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout label"),
    Column("tp", _I, "tensor parallel size"),
    Column("pp", _I, "pipeline parallel size"),
    Column("concurrency", _I, "requests in flight"),
    Column("observed_tok_s", _F, "measured generated tokens/s"),
    Column("expected_tok_s", _F, "closed-form prediction with the fitted parameters"),
    Column("residual_pct", _F, "100·(observed − expected)/expected; 0 on calibration points"),
    Column("active_slots", _I, "slots holding requests after admission (§1.2)"),
    Column("gpu_idle_share", _F, "mean share of a round each GPU runs no forward (model)"),
    Column("stage_idle", pl.List(_F), "idle share of each PP stage's GPUs, stage order (model)"),
    Column("occupancy", _S, "slots × requests per slot, e.g. 4×8"),
    Column("in_flight", _F, "micro-batches between launch and tokens, on average"),
    Column("regime", _S, "binding term: A trip (under-filled), B slowest stage, CPU"),
    Column("expected_round_ms", _F, "model T_round = TPOT, ms"),
    Column("observed_round_ms", _F, "running requests / observed tok/s, ms"),
    Column("unexplained_round_ms", _F, "observed − expected round: per-round time the model lacks"),
    Column("calibration", _B, "the point was used by the fit"),
)
MODEL_POINTS = schema_of(MODEL_POINT_COLUMNS)


def expected_vs_observed(
    fitted: Fit, observed: pl.DataFrame | Iterable[ObservedPoint | Mapping[str, Any]]
) -> pl.DataFrame:
    """Each observed point against the closed form under ``fitted`` (schema ``MODEL_POINTS``).

    On ``incident_points`` the PP8 c=32 row expects ≈ 415 tok/s from 4 active slots (4×8)
    with ≈ 55 % of each GPU's round idle, observes 248.1: residual ≈ −40 %, ≈ 52 ms per round
    unexplained (§5.4).
    """
    frame = observed_frame(observed)
    used = set(fitted.calibration)
    out = []
    for row in frame.rows(named=True):
        pred = predict(_layout_of(row), _workload_of(row), fitted.params)
        obs = row["output_tok_s"]
        exp = pred.tok_s
        obs_round = pred.running / obs if pred.running else math.nan
        out.append(
            {
                "label": row["label"],
                "tp": row["tp"],
                "pp": row["pp"],
                "concurrency": row["concurrency"],
                "observed_tok_s": obs,
                "expected_tok_s": exp,
                "residual_pct": 100.0 * (obs - exp) / exp if exp > 0 else math.nan,
                "active_slots": pred.active_slots,
                "gpu_idle_share": pred.gpu_idle_share,
                "stage_idle": [1.0 - b for b in pred.stage_busy],
                "occupancy": pred.shape,
                "in_flight": pred.in_flight,
                "regime": pred.regime,
                "expected_round_ms": pred.round_s * 1e3,
                "observed_round_ms": obs_round * 1e3,
                "unexplained_round_ms": (obs_round - pred.round_s) * 1e3,
                "calibration": (row["label"], row["concurrency"]) in used,
            }
        )
    return pl.DataFrame(out, schema=MODEL_POINTS)


WHAT_IF_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout label"),
    Column("base_concurrency", _I, "requests in flight as measured"),
    Column("concurrency", _I, "requests in flight after the change"),
    Column("expected_tok_s", _F, "prediction for the point as measured"),
    Column("what_if_tok_s", _F, "prediction under the change"),
    Column("change_pct", _F, "100·(what_if − expected)/expected"),
    Column("active_slots", _I, "filled slots under the change"),
    Column("occupancy", _S, "slots × requests per slot under the change"),
    Column("gpu_idle_share", _F, "mean GPU idle share under the change"),
    Column("regime", _S, "binding term under the change"),
    Column("round_ms", _F, "T_round = TPOT under the change, ms"),
)
WHAT_IF = schema_of(WHAT_IF_COLUMNS)


def what_if_table(
    fitted: Fit,
    observed: pl.DataFrame | Iterable[ObservedPoint | Mapping[str, Any]],
    changes: Mapping[str, int | None],
) -> pl.DataFrame:
    """Every observed point predicted as measured and under ``changes`` (schema ``WHAT_IF``).

    On the incident, ``{"pp_max_micro_batch_size": 4}`` turns PP8 c=32 into 8×4 and predicts
    ≈ 560–630 tok/s (≈ 564 with the last stage's lm_head setting the pace, §5.4).
    """
    frame = observed_frame(observed)
    what_if(Layout(), changes)  # reject unknown keys before any work
    what_if_workload(Workload(1), changes)
    out = []
    for row in frame.rows(named=True):
        layout, load = _layout_of(row), _workload_of(row)
        before = predict(layout, load, fitted.params)
        after = predict(what_if(layout, changes), what_if_workload(load, changes), fitted.params)
        change = 100.0 * (after.tok_s - before.tok_s) / before.tok_s if before.tok_s else math.nan
        out.append(
            {
                "label": row["label"],
                "base_concurrency": row["concurrency"],
                "concurrency": after.workload.concurrency,
                "expected_tok_s": before.tok_s,
                "what_if_tok_s": after.tok_s,
                "change_pct": change,
                "active_slots": after.active_slots,
                "occupancy": after.shape,
                "gpu_idle_share": after.gpu_idle_share,
                "regime": after.regime,
                "round_ms": after.round_s * 1e3,
            }
        )
    return pl.DataFrame(out, schema=WHAT_IF)
