"""The ground truth: a tiny serving machine in plain arithmetic.

Every number a scenario writes comes from the few formulas below, so a reader can redo them by
hand. Nothing here is shared with ppscope: this package imports nothing from ``toolkit``.

Step time of one pipeline stage for a micro-batch of ``b`` requests, in ms::

    t_s(b) = n_s · (a + k·b) / g          weights read once per step, plus k per request
           + n_s · r              (g > 1) the TP all-reduce of every layer
           + m / g           (last stage) lm_head and sampling
           + n_s · e        (no CUDA graph) kernel-launch time of an eager step (GPU idle)

* ``n_s`` layers on stage s, ``g`` TP ranks per stage. ``k > 0`` makes a bigger micro-batch
  dearer per step, as for MoE (each request pulls in other experts); ``k`` small is a dense
  model. ``t0 = n_s·a/g + …`` and ``k_s = n_s·k/g`` give the affine ``t(b) = t0 + k_s·b``.
* Layers over ``p`` stages (``layer_split``): ``L // p`` each; SGLang ≥ 0.5.6 gives one more to
  each of the last ``L % p`` stages, ≤ 0.5.5 the whole remainder to the last stage;
  ``SGLANG_PP_LAYER_PARTITION`` overrides both.
* One micro-batch's trip through the pipeline: ``P(b) = Σ_s t_s(b) + p·h`` (``h`` per hop, plus
  ``x`` for each hop that crosses a node boundary). TP only (p = 1): ``P(b) = t(b)``.

A decode round: every non-empty slot ``j`` (``b_j`` requests) takes one step::

    T = max( Σ_j t_max(b_j),  max_j P(b_j) ) + o

The first term is the slowest stage working through every micro-batch back to back, the second a
micro-batch waiting for its own trip; ``o`` is an injected per-round overhead the layout does not
explain (0 unless a scenario says so). Then ``tok/s = Σ_j b_j / T`` and ``TPOT = T``; GPU busy
share of stage s is ``Σ_j t_s(b_j) / T`` (eager launch time and ``o`` are idle).

Admission (``admit_burst``, ``fill_pass``): a burst of ``c`` requests waits in the queue; the
slots come up in turn (``pp + pp_async_batch_depth`` slots under PP, one under TP) and each
turn's prefill pass takes requests from the head of the queue until the chunk budget
(``chunked_prefill_size`` prompt tokens; the request that overflows is split and finished on a
later turn, landing in that turn's slot) or the slot's room runs out (per-slot cap
``pp_max_micro_batch_size``, by default ``max_running_requests // pp``, and the global
``max_running_requests``). With ISL 1000 and a chunk of 8192 that is 8 requests a pass, so 32
requests fill 4 slots of 8, front first.

Prefill pass of ``x`` prompt tokens: ``x/1000 · f · L / g (+ p·h)`` ms, ``f`` ms per thousand
tokens per layer on one GPU; all GPUs busy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "Layout",
    "Machine",
    "admit_burst",
    "fill_pass",
    "layer_split",
]


def layer_split(
    layers: int, pp: int, version: tuple[int, ...], partition: Sequence[int] | None = None
) -> tuple[int, ...]:
    """Layers per stage: an explicit partition, else SGLang's default for ``version``."""
    if partition is not None:
        if sum(partition) != layers or len(partition) != pp:
            raise ValueError(f"partition {list(partition)} does not split {layers} over {pp}")
        return tuple(partition)
    base, rem = divmod(layers, pp)
    if version <= (0, 5, 5):
        return (base,) * (pp - 1) + (base + rem,)
    return (base,) * (pp - rem) + (base + 1,) * rem


@dataclass(frozen=True)
class Layout:
    """How the model is laid out: ``split`` is the layers of each PP stage."""

    tp: int
    pp: int
    split: tuple[int, ...]
    depth: int = 0  # pp_async_batch_depth
    nnodes: int = 1

    @property
    def layers(self) -> int:
        return sum(self.split)

    @property
    def slots(self) -> int:
        """Micro-batch slots: ``pp + depth`` under PP, one batch under TP."""
        return self.pp + self.depth if self.pp > 1 else 1

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    def label(self) -> str:
        if self.pp > 1 and self.tp > 1:
            return f"PP{self.pp}xTP{self.tp}"
        return f"PP{self.pp}" if self.pp > 1 else f"TP{self.tp}"


@dataclass(frozen=True)
class Machine:
    """Per-layer costs in ms (see the module docstring for the formulas)."""

    a: float  # per layer at b -> 0 (one GPU holding the layer)
    k: float  # per layer per request in the micro-batch
    m: float  # lm_head and sampling, on the last stage
    h: float = 0.0  # one PP hop (send, receive, CPU)
    r: float = 0.0  # per-layer all-reduce when tp > 1
    e: float = 0.0  # per-layer launch time of an eager (no CUDA graph) step
    x: float = 0.0  # extra for a PP hop that crosses a node boundary
    f: float = 0.0  # prefill: ms per 1000 prompt tokens per layer on one GPU
    o: float = 0.0  # injected per-round overhead the layout does not explain

    # -- one step -------------------------------------------------------------------------
    def kernel_ms(self, lay: Layout, stage: int, b: int) -> float:
        """GPU time of one step of stage ``stage`` for ``b`` requests (no launch gaps)."""
        n = lay.split[stage]
        t = n * (self.a + self.k * b) / lay.tp
        if lay.tp > 1:
            t += n * self.r
        if stage == lay.pp - 1:
            t += self.m / lay.tp
        return t

    def stage_ms(self, lay: Layout, stage: int, b: int, graph: bool = True) -> float:
        """``t_s(b)``: wall time of one step of stage ``stage``."""
        t = self.kernel_ms(lay, stage, b)
        return t if graph else t + lay.split[stage] * self.e

    def hops_ms(self, lay: Layout) -> float:
        if lay.pp == 1:
            return 0.0
        return lay.pp * self.h + (lay.nnodes * self.x if lay.nnodes > 1 else 0.0)

    def trip_ms(self, lay: Layout, b: int, graph: bool = True) -> float:
        """``P(b)``: one micro-batch through every stage and back."""
        return sum(self.stage_ms(lay, s, b, graph) for s in range(lay.pp)) + self.hops_ms(lay)

    # -- one round ------------------------------------------------------------------------
    def round_ms(self, lay: Layout, sizes: Sequence[int], graph_max: int = 1 << 30) -> float:
        """``T``: one decode step for every non-empty slot (graphs cover ``b ≤ graph_max``)."""
        sizes = [b for b in sizes if b > 0]
        if not sizes:
            return 0.0
        slowest = sum(
            max(self.stage_ms(lay, s, b, b <= graph_max) for s in range(lay.pp)) for b in sizes
        )
        trip = max(self.trip_ms(lay, b, b <= graph_max) for b in sizes)
        return max(slowest, trip) + self.o

    def tok_s(self, lay: Layout, sizes: Sequence[int], graph_max: int = 1 << 30) -> float:
        """Decode tokens per second with these slot sizes."""
        return 1000.0 * sum(sizes) / self.round_ms(lay, sizes, graph_max)

    def busy(self, lay: Layout, sizes: Sequence[int], graph_max: int = 1 << 30) -> list[float]:
        """Busy share of each stage's GPUs in a round: ``Σ_j kernel_s(b_j) / T``."""
        t = self.round_ms(lay, sizes, graph_max)
        return [sum(self.kernel_ms(lay, s, b) for b in sizes if b > 0) / t for s in range(lay.pp)]

    def prefill_ms(self, lay: Layout, tokens: int) -> float:
        """One prefill pass of ``tokens`` prompt tokens through the whole model."""
        return tokens / 1000.0 * self.f * lay.layers / lay.tp + self.hops_ms(lay)


# -- admission ------------------------------------------------------------------------------


def fill_pass(
    waiting: Iterable[int],
    chunk: int,
    room: int,
    fits: Callable[[int], bool] | None = None,
) -> list[tuple[int, int]]:
    """One prefill pass: ``(index, tokens)`` taken from the queue head, in order.

    ``waiting`` holds the prompt tokens each queued request still needs (the head may be a
    request split by an earlier pass). Requests are taken while the chunk budget and the
    slot's room (requests) last and ``fits(index)`` (the KV budget) allows; the one that
    overflows the budget is taken in part and ends the pass.
    """
    out: list[tuple[int, int]] = []
    left = chunk
    for i, need in enumerate(waiting):
        if room <= 0 or left <= 0 or (fits is not None and not fits(i)):
            break
        take = min(need, left)
        out.append((i, take))
        left -= take
        room -= 1
        if take < need:
            break
    return out


def admit_burst(
    c: int,
    isl: int,
    slots: int,
    chunk: int,
    slot_cap: int,
    running_cap: int,
) -> list[int]:
    """Slot sizes after a burst of ``c`` equal requests is admitted, turn by turn, front first."""
    waiting = [isl] * c
    sizes = [0] * slots
    turn = idle = 0
    while waiting and idle < slots:
        room = min(slot_cap - sizes[turn], running_cap - sum(sizes))
        taken = fill_pass(waiting, chunk, room)
        idle = 0 if taken else idle + 1
        done = 0
        for i, tokens in taken:
            waiting[i] -= tokens
            if waiting[i] == 0:
                done += 1
        sizes[turn] += done
        waiting = waiting[done:]
        turn = (turn + 1) % slots
    return sizes
