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

The discrete-event simulation of the same loop is in ``toolkit.analyze.model.sim``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
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
from toolkit.analyze.model.admission import Batch, Request, SlotScheduler, admission
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
