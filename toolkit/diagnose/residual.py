"""``unexplained-slowdown``: time per round the named causes and the layout leave over.

Two ways, the larger counts. Measured where the GPU trace allows: with the pipeline full (every
stage a micro-batch under PP, or TP) the slowest stage has work all the time, so its idle share
while decoding is time no stage spends computing. Eager decode steps found before in the same
phase (``cuda-graph-miss``) idle the GPU between kernel launches and explain their part, as
measured; the rest is unexplained. An eager cost that is only assumed (no graph step to compare
with) or a lower bound (one graph batch size to compare with) does not size those gaps: the
idle is then taken as theirs, not as unexplained, and ``cuda-graph-miss`` says so.

Modelled, which also sees kernels slower than they should be (a busy GPU): the serving model of
the run's model on its machine, calibrated on single-stream points, predicts the round (PP) or
step (TP) of the run's busiest phase for the layout as it was packed (its layer split and the
last stage's lm_head included). The causes found before on the same run that the model does not
represent (eager decode, prefill stalls, retractions) lengthen that prediction by their own
impacts; what the measured round still exceeds it by is unexplained: communication fences, slow
kernels, a CPU-bound loop. Its share of the round is its impact.

Both ways judge the phase's steady window (its longest stretch near the peak load), so a cause
explains it by its cost in that window: eager decode by the eager token share of the window's
own lines (a drain that ran on graphs does not thin it out). A cause the window's lines cannot
size keeps the impact of its phase, and the evidence says which is which.

A single-stream calibration puts whatever the weight reads leave over on the link (a PP hop, a
TP all-reduce). When that comes out beyond ``PLAUSIBLE_LINK`` times what the interconnect costs
(the machine's prior), it is not the link: the prediction keeps the prior and the excess counts
as unexplained, at one request and at the load judged.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple

import polars as pl

from toolkit.analyze.model import Layout, Params, StageClock, Workload, predict
from toolkit.analyze.model.machine import prior
from toolkit.diagnose.cudagraph import eager_cost_in, eager_effect
from toolkit.diagnose.finding import Finding, severity_of
from toolkit.diagnose.slots import certain_busy, full_pipeline_idle, measured_round
from toolkit.diagnose.thresholds import MIN_UNEXPLAINED, PLAUSIBLE_LINK
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["UNMODELLED", "unexplained_slowdown"]

UNMODELLED = ("cuda-graph-miss", "prefill-interference", "kv-cache-pressure", "stage-imbalance")
"""Findings whose cost the serving model does not include: they explain part of a residual. Of a
``stage-imbalance`` only the part beyond the imbalance the model's own layer split predicts
counts (a slower GPU, a heavier stage than its layers say)."""


class Named(NamedTuple):
    """A cause found before, with the impact it explains in the judged window and where that
    impact was measured."""

    finding: Finding
    impact: float
    where: str


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


def _plausible(ctx: RunAnalysis) -> tuple[Params, list[tuple[str, str, float, float]]]:
    """The fitted parameters with a link cost beyond ``PLAUSIBLE_LINK`` × its prior put back
    to the prior; and (key, name, fitted, kept) for each one put back."""
    params = ctx.params
    assert params is not None and ctx.fit is not None
    start, _ = prior(ctx.machine)
    changes, notes = {}, []
    for key, name in (("hop_s", "PP hop"), ("allreduce_s", "all-reduce")):
        if key not in ctx.fit.fitted:
            continue
        fitted, kept = getattr(params.hardware, key), getattr(start, key)
        if kept > 0 and fitted > PLAUSIBLE_LINK * kept:
            changes[key] = kept
            notes.append((key, name, fitted, kept))
    if not changes:
        return params, []
    return replace(params, hardware=replace(params.hardware, **changes)), notes


def unexplained_slowdown(ctx: RunAnalysis) -> Finding | None:
    """The measured round exceeds what the layout and the named causes account for."""
    r = _busiest(ctx)
    if r is None:
        return None
    measured = measured_round(ctx, r)
    if measured is None:
        return None
    named = _in_window(ctx, r)
    idle = _from_idle(ctx, r, measured, named)
    modelled = _from_model(ctx, r, measured, named)
    found = [f for f in (idle, modelled) if f is not None]
    return max(found, key=lambda f: f.impact or 0.0) if found else None


def _in_window(ctx: RunAnalysis, r: dict[str, Any]) -> list[Named]:
    """The causes found before that explain part of the steady window of phase ``r``, each
    with its impact there. Eager decode is sized on the window's own lines (its eager share
    there, wherever the finding was placed); a cause they cannot size keeps the impact of its
    own phase (or the run), and only when that is this phase."""
    out = []
    start, end = r.get("steady_start"), r.get("steady_end")
    for f in ctx.found:
        if f.id not in UNMODELLED or not f.impact:
            continue
        window = None
        if f.id == "cuda-graph-miss" and start is not None and end is not None:
            window = eager_cost_in(ctx, f, r["phase"], start, end)
        if window is not None:
            share, impact = window
            where = f"steady window, {share:.0%} of its decode tokens eager"
            out.append(Named(f, impact, where))
        elif f.phase is None or f.phase == r["phase"]:
            where = "whole run" if f.phase is None else f"phase {f.phase} as a whole"
            out.append(Named(f, float(f.impact), where))
    return [n for n in out if n.impact > 0]


def _from_idle(
    ctx: RunAnalysis, r: dict[str, Any], measured: float, named: list[Named]
) -> Finding | None:
    """The slowest stage's idle share in a full pipeline, less what eager steps explain (all
    of it when their cost is only assumed or bounded from below)."""
    measured_idle = full_pipeline_idle(ctx, r["phase"])
    if measured_idle is None:
        return None
    idle, top = measured_idle
    busy = certain_busy(ctx)
    assert busy is not None
    rows = busy.filter(pl.col("phase") == r["phase"]).drop_nulls("busy_pct")
    eager = [n for n in named if n.finding.id == "cuda-graph-miss"]
    if eager and (any(n.finding.basis == "assumed" for n in eager) or _eager_bounded(ctx)):
        return None  # launch gaps are idle time the factor does not size: they are it
    explained = min(idle, sum(n.impact for n in eager))
    share = idle - explained
    if share < MIN_UNEXPLAINED:
        return None
    gap = share * measured
    unit = _unit(ctx)
    stage = f"stage {top['pp']}" if ctx.pp > 1 else "the busiest GPU"
    causes = (
        f"; eager decode steps (cuda-graph-miss, {eager[0].where}) explain {explained:.0%} of it"
        if explained > 0
        else ""
    )
    evidence = rows.select(
        "phase", "pp", "gpus", pl.col("busy_pct").round(1), "samples", "metric"
    ).sort("pp")
    evidence = evidence.with_columns(explained_by=pl.lit(_explained_by(eager), pl.String))
    return Finding(
        id="unexplained-slowdown",
        severity=severity_of(share),
        title=f"{gap * 1e3:.0f} ms per {unit} with no stage computing, that no finding explains",
        summary=(
            f"{ctx.load_of(r['phase']).capitalize()} every stage had work "
            f"(~{r['running_est']:.0f} requests running), so the slowest stage should compute "
            f"all the time; {stage} was busy {top['busy_pct']:.0f}% ({top['metric']} in the GPU "
            f"trace), idle {idle:.0%} of each {measured * 1e3:.0f} ms {unit}{causes}. The other "
            f"{share:.0%}, {gap * 1e3:.0f} ms per {unit}{_per_stage(ctx, gap)}, is unexplained: "
            "communication fences between stages, a CPU-bound loop, or waits on the host."
        ),
        evidence=evidence,
        remedy=_remedy(ctx),
        impact=share,
        basis="measured",
        phase=r["phase"],
    )


def _eager_bounded(ctx: RunAnalysis) -> bool:
    """Whether the eager slowdown was read against one graph batch size (a lower bound)."""
    effect = eager_effect(ctx)
    return effect is not None and effect.bounded


def _from_model(
    ctx: RunAnalysis, r: dict[str, Any], measured: float, named: list[Named]
) -> Finding | None:
    """The measured round against the serving model's, lengthened by the named causes."""
    if ctx.params is None or ctx.fit is None or not ctx.fit.calibration:
        return None
    phase = ctx.phase(r["phase"])
    running = max(round(r["running_est"]), 1)
    isl = max(round(phase.get("input_len") or 1000), 1)
    osl = max(round(phase.get("output_len") or isl), 1)
    layout = ctx.layout
    if ctx.pp > 1 and r["slot_req"]:
        layout = ctx.with_layout(pp_max_micro_batch_size=max(round(r["slot_req"]), 1))
    params, implausible = _plausible(ctx)
    try:
        model_round = predict(layout, Workload(running, isl, osl), params).round_s
    except (ToolkitError, ZeroDivisionError, ValueError):
        return None
    if not math.isfinite(model_round) or model_round <= 0:
        return None
    explained = model_round
    b = max(float(r["slot_req"] or 1.0), 1.0)
    counted = []
    for n in named:
        impact = n.impact
        if n.finding.id == "stage-imbalance":
            impact = max(0.0, impact - _modelled_imbalance(layout, params, b))
        if impact > 0:
            explained /= max(1e-3, 1 - impact)
            counted.append(Named(n.finding, impact, n.where))
    gap = measured - explained
    share = gap / measured
    if share < MIN_UNEXPLAINED:
        return None
    unit = _unit(ctx)
    causes = ""
    if counted:
        ids = ", ".join(n.finding.id for n in counted)
        sized = "; ".join(f"{n.impact:.0%} of the {unit}, {n.where}" for n in counted)
        causes = f" after the {ids} found here ({sized})"
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
                "explained_by": _explained_by(counted),
            }
        ]
    )
    link = ""
    if implausible:
        link = " " + " ".join(
            f"The single-stream calibration would put {fitted * 1e3:.2f} ms on each {name}, "
            f"{fitted / kept:.0f}× what it costs on this interconnect ({kept * 1e3:.2f} ms, "
            f"{sources.get(key, 'prior')}): that is not the link, so the model keeps the "
            "latter and the excess counts here."
            for key, name, fitted, kept in implausible
        )
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
            f"{_per_stage(ctx, gap)} ({share:.0%} of it) is unexplained: communication fences "
            f"between stages, kernels slower than the weight reads, or a CPU-bound loop.{link} "
            f"Model constants: {constants}."
        ),
        evidence=evidence,
        remedy=_remedy(ctx),
        impact=share,
        basis="modelled",
        phase=r["phase"],
    )


def _modelled_imbalance(layout: Layout, params: Params, b: float) -> float:
    """``1 − mean/max`` of the model's stage steps at micro-batch ``b``: the imbalance the
    layer split and the lm_head already put in its round (0 without PP)."""
    if layout.pp < 2:
        return 0.0
    try:
        clock = StageClock(layout, params)
        times = [clock.decode(k, b) for k in range(layout.pp)]
    except (ToolkitError, ZeroDivisionError, ValueError):
        return 0.0
    top = max(times)
    return 1 - sum(times) / len(times) / top if top > 0 else 0.0


def _explained_by(named: list[Named]) -> str:
    """The causes counted, each with its impact and where it was sized, for the evidence."""
    if not named:
        return "no finding sized for this window"
    return "; ".join(f"{n.finding.id} {n.impact:.3f} ({n.where})" for n in named)


def _unit(ctx: RunAnalysis) -> str:
    return "round" if ctx.pp > 1 else "step"


def _per_stage(ctx: RunAnalysis, gap: float) -> str:
    return f", {gap / ctx.pp * 1e3:.1f} ms per stage pass" if ctx.pp > 1 else ""


def _remedy(ctx: RunAnalysis) -> str:
    if ctx.pp > 1:
        return (
            "Profile one stage (torch profiler via /start_profile, or nsys) at this load and "
            "compare run_batch against recv and process_batch_result; newer SGLang releases "
            "overlap PP communication (SGLANG_PP_COMM_OVERLAP)."
        )
    return (
        "Profile a decode step at this load (torch profiler via /start_profile, or nsys): "
        "all-reduce time, kernel time and CPU gaps."
    )
