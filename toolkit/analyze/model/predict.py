"""The closed form: steady decode throughput of one layout under one workload.

``T_round = max(Σ_j t_max(b_j), max_j P(b_j), n·(overhead + hop))`` over the ``n`` filled
slots of sizes ``b_j``; tok/s = ``Σ b_j / T_round``. ``P(b)`` is one micro-batch's trip round
the ring, ``t_max(b)`` the slowest stage's step; the last term is the CPU chain of SGLang's
PP loop (every rank processes each result before it relays it one hop on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from toolkit.analyze.model.admission import admission, occupancy_shape
from toolkit.analyze.model.spec import Layout, Params, StageClock, Workload

__all__ = ["Prediction", "predict"]


@dataclass(frozen=True)
class Prediction:
    """The closed form's steady decode state for one layout and workload.

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
        return occupancy_shape(self.occupancy)


def predict(layout: Layout, workload: Workload, params: Params) -> Prediction:
    """Closed-form decode throughput: ``tok/s = Σ b_j / T_round`` with

    ``T_round = max(Σ_j t_max(b_j), max_j P(b_j), n·(overhead + hop))``, ``b_j`` from
    ``admission``.
    ``pp = 1`` is one batch per step, ``t(b) + overhead`` (two all-reduces per layer under TP).
    ``dp`` replicas each serve an equal share of the concurrency; their throughputs add.
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
    """``dp`` replicas of the layout, each with its share of the requests; tok/s adds up."""
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
