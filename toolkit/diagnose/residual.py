"""``unexplained-slowdown``: time per round the named causes and the serving model leave over.

The serving model of the run's model on its machine, calibrated on single-stream points, predicts
the round (PP) or step (TP) of the run's busiest phase for the layout as it was packed (its layer
split and the last stage's lm_head included). The causes found before on the same run that the
model does not represent (eager decode, prefill stalls, retractions) lengthen that prediction by
their own impacts; what the measured round still exceeds it by is unexplained: communication
fences, slow kernels, a CPU-bound loop. Its share of the round is its impact.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from toolkit.analyze.model import Workload, predict
from toolkit.diagnose.finding import Finding, severity_of
from toolkit.diagnose.slots import measured_round
from toolkit.diagnose.thresholds import MIN_UNEXPLAINED
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["UNMODELLED", "unexplained_slowdown"]

UNMODELLED = ("cuda-graph-miss", "prefill-interference", "kv-cache-pressure")
"""Findings whose cost the serving model does not include: they explain part of a residual."""


def _busiest(ctx: RunAnalysis) -> dict[str, Any] | None:
    """The phase with the most requests running that has a measured round, among those with
    enough requests to fill the layout (every stage a micro-batch under PP, two or more
    without): at lower loads the model's batch-size terms, not the machine, decide the round."""
    best = None
    least = max(ctx.pp, 2) - 0.5
    for r in ctx.phase_summary.iter_rows(named=True):
        running = r["running_est"]
        if running is None or not math.isfinite(running) or running < least:
            continue
        if measured_round(ctx, r) is None:
            continue
        if best is None or running > best["running_est"]:
            best = r
    return best


def unexplained_slowdown(ctx: RunAnalysis) -> Finding | None:
    """The measured round exceeds what the model and the named causes account for."""
    if ctx.params is None or ctx.fit is None or not ctx.fit.calibration:
        return None
    r = _busiest(ctx)
    if r is None:
        return None
    measured = measured_round(ctx, r)
    phase = ctx.phase(r["phase"])
    running = max(round(r["running_est"]), 1)
    isl = max(round(phase.get("input_len") or 1000), 1)
    osl = max(round(phase.get("output_len") or isl), 1)
    layout = ctx.layout
    if ctx.pp > 1 and r["slot_req"]:
        layout = ctx.with_layout(pp_max_micro_batch_size=max(round(r["slot_req"]), 1))
    try:
        model_round = predict(layout, Workload(running, isl, osl), ctx.params).round_s
    except (ToolkitError, ZeroDivisionError, ValueError):
        return None
    if measured is None or not math.isfinite(model_round) or model_round <= 0:
        return None
    named = [f for f in ctx.found if f.id in UNMODELLED and f.impact]
    explained = model_round
    for f in named:
        explained /= max(1e-3, 1 - float(f.impact or 0.0))
    gap = measured - explained
    share = gap / measured
    if share < MIN_UNEXPLAINED:
        return None
    unit = "round" if ctx.pp > 1 else "step"
    causes = f" after the {', '.join(f.id for f in named)} found here" if named else ""
    sources = ctx.fit.sources
    constants = "; ".join(f"{k} {v}" for k, v in sources.items())
    evidence = pl.DataFrame(
        [
            {
                "phase": r["phase"],
                "running": running,
                "slot_req": r["slot_req"],
                "measured_ms": round(measured * 1e3, 1),
                "model_ms": round(model_round * 1e3, 1),
                "explained_ms": round(explained * 1e3, 1),
                "unexplained_ms": round(gap * 1e3, 1),
                "share": round(share, 3),
            }
        ]
    )
    per_stage = f", {gap / ctx.pp * 1e3:.1f} ms per stage pass" if ctx.pp > 1 else ""
    severity = severity_of(share)
    guessed = [k for k, v in sources.items() if k == "hbm_bytes_s" and v.startswith("assumed")]
    if guessed and severity == "high":
        severity = "medium"  # the model's slope rests on a guessed bandwidth: not proof enough
    return Finding(
        id="unexplained-slowdown",
        severity=severity,
        title=f"{gap * 1e3:.0f} ms per {unit} that no finding and no model term explains",
        summary=(
            f"At ~{running} requests each {unit} took {measured * 1e3:.0f} ms; the serving model "
            f"of {ctx.model.describe()} on {ctx.machine.describe()} expects "
            f"{model_round * 1e3:.0f} ms for the layout as packed"
            f"{causes}, {explained * 1e3:.0f} ms. The other {gap * 1e3:.0f} ms per {unit}"
            f"{per_stage} ({share:.0%} of it) is unexplained: communication fences between "
            f"stages, kernels slower than the weight reads, or a CPU-bound loop. Model constants: "
            f"{constants}."
        ),
        evidence=evidence,
        remedy=(
            "Profile one stage (torch profiler via /start_profile, or nsys) at this load and "
            "compare run_batch against recv and process_batch_result; newer SGLang releases "
            "overlap PP communication (SGLANG_PP_COMM_OVERLAP)."
            if ctx.pp > 1
            else "Profile a decode step at this load (torch profiler via /start_profile, or "
            "nsys): all-reduce time, kernel time and CPU gaps."
        ),
        impact=share,
        basis="modelled",
    )
