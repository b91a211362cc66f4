"""Admission replay: which micro-batch slot each request joins, and how full each gets."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from toolkit.analyze.model.spec import (
    CLIP_MAX_NEW_TOKENS,
    NEW_TOKEN_RATIO,
    Layout,
    ModelSpec,
    Workload,
)
from toolkit.errors import ToolkitError

# ── admission ─────────────────────────────────────────────────────────────────────────────────────


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
        """KV tokens admission charges up front: prompt + clipped output."""
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
    """``get_next_batch_to_run`` for one slot's turn, shared by every stage.

    State: the shared waiting queue, the single ``chunked_req``, per-slot running requests (slot
    affinity) and per-slot prefilled requests waiting to be merged on the slot's next turn.
    Simplifications: no retraction, no prefix cache, no mixed chunk; KV charged as SGLang's
    ``PrefillAdder`` does.
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
            return batch  # a slot with a prefill skips its decode this turn
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
            # A chunked request is always continued: it already holds a row and KV.
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


def occupancy_shape(occupancy: tuple[int, ...] | list[int]) -> str:
    """Slot occupancy as ``n×b`` (``4×8``), the filled slots' sizes when they differ
    (``21+21+10``), or ``empty``."""
    sizes = [b for b in occupancy if b > 0]
    if not sizes:
        return "empty"
    if len(set(sizes)) == 1:
        return f"{len(sizes)}×{sizes[0]}"
    return "+".join(map(str, sizes))


UNKNOWN_CONTEXT = 1 << 30
"""The context length of a model nothing states: so long that SGLang's default request cap
comes out at its floor (2048, or half the pool when that is smaller)."""


def replay_model(spec: ModelSpec | None, context_len: int | None) -> ModelSpec:
    """The model a run's admission replay uses: only its context length counts (it sets the
    default request cap). The run's model, else a model that reads nothing with the context
    length the log states, else ``UNKNOWN_CONTEXT``; never another model's numbers."""
    if spec is not None:
        return spec
    context = context_len if context_len is not None and context_len > 0 else UNKNOWN_CONTEXT
    return ModelSpec(
        name="unknown model",
        layers=1,
        first_dense_layers=1,
        experts=0,
        top_k=0,
        expert_bytes=0.0,
        dense_bytes_per_layer=0.0,
        dense_ffn_bytes=0.0,
        lm_head_bytes=0.0,
        hidden_size=1,
        e_eff=1.0,
        active_params=0.0,
        context_len=context,
    )


def admission(layout: Layout, workload: Workload, model: ModelSpec) -> tuple[int, ...]:
    """Replay SGLang's PP admission of a burst of ``concurrency`` requests; return slot occupancy.

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
