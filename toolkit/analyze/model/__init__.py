"""A decode-throughput model of SGLang PP/TP serving: admission replay, closed form, calibration.

The facts it rests on (SGLang's PP scheduler, v0.5.7 on):

* **Slots**: ``L = pp_size + pp_async_batch_depth`` micro-batch slots; a request stays in the
  slot that admitted it, and nothing moves requests between slots later.
* **Admission** (``admission``): on its turn a slot takes requests from the head of the shared
  queue until the chunked-prefill budget, the per-slot cap ``pp_max_micro_batch_size`` (auto
  ``max_running_requests // pp_size``), the global request rows or the KV pool run out. The
  replay returns the slot occupancy vector.
* **Stage time** (``spec.StageClock``): bytes read per step grow with the *distinct* experts a
  micro-batch touches, ``D(b) = E_eff·(1 − (1 − k/E_eff)^b)``;
  ``t_k(b) = B_k(b)/(tp·β) + AR_k + t_launch``, with two all-reduces per layer under TP.
* **Round** (``predict``): ``T_round = max(Σ_j t_max(b_j), max_j P(b_j), n·(overhead + hop))``
  where ``P(b) = Σ_k t_k(b) + hops·hop + overhead`` is one micro-batch's trip round the ring.
  The last term is the CPU chain of the loop: every rank processes each of the ``n`` results
  before it relays it one hop on. tok/s = ``Σ b_j / T_round``.
* **Calibration** (``fit``): β, the per-hop cost, the all-reduce latency and (when the points
  allow) the fixed overhead are solved from the single-stream points of each layout plus the
  highest-concurrency point of each non-PP layout; every other point is then a prediction
  (``expected_vs_observed``), and ``what_if_table`` asks the same model about changed flags.
* **Simulation** (``simulate``): the same loop as a discrete-event simulation, rank by rank.

Modules: ``spec`` (inputs and stage times), ``admission``, ``predict``, ``observed``, ``fit``,
``whatif``, ``sim`` and ``sim_result``.
"""

from __future__ import annotations

from toolkit.analyze.model.admission import (
    Batch,
    Request,
    SlotScheduler,
    admission,
    replay_model,
)
from toolkit.analyze.model.fit import MODEL_POINTS, Fit, expected_vs_observed, fit
from toolkit.analyze.model.observed import (
    OBSERVED,
    ObservedPoint,
    incident_points,
    observed_frame,
)
from toolkit.analyze.model.predict import Prediction, predict
from toolkit.analyze.model.sim import SimSummary, Simulation, simulate
from toolkit.analyze.model.spec import (
    DEFAULT_CHUNKED_PREFILL,
    INCIDENT,
    INCIDENT_HARDWARE,
    KIMI_K2,
    Hardware,
    Layout,
    ModelSpec,
    Params,
    StageClock,
    Workload,
    layer_partition,
)
from toolkit.analyze.model.whatif import WHAT_IF, what_if, what_if_table, what_if_workload

__all__ = [
    "DEFAULT_CHUNKED_PREFILL",
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
    "SimSummary",
    "Simulation",
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
    "replay_model",
    "simulate",
    "what_if",
    "what_if_table",
    "what_if_workload",
]
