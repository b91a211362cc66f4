"""Calibration: the few machine costs solved from measured points, and the residuals left.

``fit`` solves β (HBM bandwidth), the per-hop cost, the all-reduce latency α_AR and (when the
points allow) the fixed per-step overhead from the single-stream points of each layout plus
the highest-concurrency point of each non-PP layout; every other point is then a prediction
(``expected_vs_observed``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from toolkit.analyze.model.admission import admission
from toolkit.analyze.model.observed import Points, observed_frame, point_layout, point_workload
from toolkit.analyze.model.predict import predict
from toolkit.analyze.model.spec import (
    Hardware,
    Layout,
    ModelSpec,
    Params,
    StageClock,
)
from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = ["MODEL_POINTS", "Fit", "expected_vs_observed", "fit", "fit_none"]

_I, _F, _S, _B = pl.Int64(), pl.Float64(), pl.String(), pl.Boolean()
_UNKNOWNS = ("allreduce_s", "hop_s", "inv_beta", "overhead_s")


@dataclass(frozen=True)
class Fit:
    """Calibrated parameters and how they were obtained."""

    params: Params
    fitted: tuple[str, ...]  # Hardware fields solved from the data
    fixed: tuple[str, ...]  # Hardware fields kept at the prior
    calibration: tuple[tuple[str, int], ...]  # (label, concurrency) of the points used
    sources: dict[str, str] = field(default_factory=dict)  # constant → where its value came from

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
            "sources": dict(self.sources),
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
    observed: Points,
    *,
    model: ModelSpec,
    prior: Hardware,
    prior_sources: Mapping[str, str] | None = None,
    high_load: bool | Collection[str] = False,
) -> Fit:
    """Calibrate β, the per-hop cost, α_AR and the overhead from the single-stream points.

    Calibration points are every ``concurrency == 1`` point (with ``high_load``, also the
    highest-concurrency point of each non-PP layout; a collection of labels limits that to
    the points of those labels). Each is a trip, linear in the unknowns:
    ``T = Σ_k B_k(b)/tp · (1/β) + N_AR·α_AR + hops·hop + overhead``, ``T = running / tok_s``.
    Unknowns are solved by least squares in the order α_AR, hop, β, overhead as far as the
    points make them independent; the others, and any that come out non-positive, keep the
    ``prior`` value, whose source ``prior_sources`` names (default ``prior``). On the incident's
    four numbers (``incident_points``, with ``high_load``) this gives β ≈ 1.50 TB/s,
    α_AR ≈ 273 µs and hop ≈ 0.67 ms with the 2 ms overhead prior.
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
    if high_load:
        allowed = None if isinstance(high_load, bool) else set(high_load)
        calib += [
            r
            for r in best.values()
            if r["concurrency"] > 1 and (allowed is None or r["label"] in allowed)
        ]
    base = Params(model, prior)
    equations: list[tuple[dict[str, float], float]] = []
    for row in calib:
        layout, load = point_layout(row), point_workload(row)
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
    used = tuple((r["label"], int(r["concurrency"])) for r in calib)
    points = ", ".join(f"{label} c={c}" for label, c in used)
    given = dict(prior_sources or {})
    sources = {name: f"fitted ({points})" for name in solved}
    sources |= {name: given.get(name, "prior") for name in kept}
    return Fit(Params(model, hw), solved, kept, used, sources)


def fit_none(model: ModelSpec, prior: Hardware, prior_sources: Mapping[str, str]) -> Fit:
    """A fit with nothing calibrated: every constant at its prior (no usable points)."""
    kept = ("hbm_bytes_s", "hop_s", "allreduce_s", "overhead_s")
    sources = {name: prior_sources.get(name, "prior") for name in kept}
    return Fit(Params(model, prior), (), kept, (), sources)


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


# ── expected vs observed ──────────────────────────────────────────────────────────────────────────

MODEL_POINT_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout label"),
    Column("tp", _I, "tensor parallel size"),
    Column("pp", _I, "pipeline parallel size"),
    Column("concurrency", _I, "requests in flight"),
    Column("observed_tok_s", _F, "measured generated tokens/s"),
    Column("expected_tok_s", _F, "closed-form prediction with the fitted parameters"),
    Column("residual_pct", _F, "100·(observed − expected)/expected; 0 on calibration points"),
    Column("active_slots", _I, "slots holding requests after admission"),
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


def expected_vs_observed(fitted: Fit, observed: Points) -> pl.DataFrame:
    """Each observed point against the closed form under ``fitted`` (schema ``MODEL_POINTS``).

    On ``incident_points`` the PP8 c=32 row expects ≈ 415 tok/s from 4 active slots (4×8)
    with ≈ 55 % of each GPU's round idle, observes 248.1: residual ≈ −40 %, ≈ 52 ms per round
    unexplained.
    """
    frame = observed_frame(observed)
    used = set(fitted.calibration)
    out = []
    for row in frame.rows(named=True):
        pred = predict(point_layout(row), point_workload(row), fitted.params)
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
