"""``unexplained-slowdown``: time per round the named causes and the layout leave over.

Two ways, the larger counts. Measured where the GPU trace allows: with the pipeline full (every
stage a micro-batch under PP, or TP) the slowest stage has work all the time, so its idle share
while decoding, beyond the idle the serving model expects there (per-step overhead, hops), is
time no stage spends computing. Eager decode steps found before in the same phase
(``cuda-graph-miss``) idle the GPU between kernel launches and explain their part, as measured;
an eager cost that is only assumed (no graph step to compare with) or a lower bound (one graph
batch size to compare with) does not size those gaps: the idle is then taken as theirs, not as
unexplained, and ``cuda-graph-miss`` says so.

Modelled, which also sees kernels slower than they should be (a busy GPU): the serving model of
the run's model on its machine, calibrated on single-stream points, predicts the round (PP) or
step (TP) of the run's busiest phase for the layout as it was packed (its layer split and the
last stage's lm_head included). The causes found before on the same run that the model does not
represent (eager decode, prefill stalls, retractions) lengthen that prediction by their own
impacts; what the measured round still exceeds it by is unexplained: communication fences, slow
kernels, a CPU-bound loop.

The residual earns its place: it is computed under every plausible variant of the constants
the model assumes (``ranges``), and widened by the model's own error on the run's loads that no
finding touches (``noise.model_band``). Only a residual whose low end stays above zero is a
finding: a gap the assumptions can absorb is no evidence of a fault. Its text says which
measurement would narrow the range.

Both ways judge the phase's steady window (its longest stretch near the peak load), so a cause
explains it by its cost in that window: eager decode by the eager token share of the window's
own lines. A cause the window's lines cannot size keeps the impact of its phase.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import polars as pl

from toolkit.analyze.model import Layout, Params, StageClock, Workload, predict
from toolkit.diagnose.cudagraph import eager_cost_in, eager_effect
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.noise import busy_noise, model_band
from toolkit.diagnose.profiled import has_profile, profiled_residual
from toolkit.diagnose.sizing import spread
from toolkit.diagnose.slots import certain_busy, full_pipeline_idle, judged, measured_round
from toolkit.diagnose.thresholds import HEALTHY_IDLE, MIN_NOISE, MIN_UNEXPLAINED
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


def unexplained_slowdown(ctx: RunAnalysis) -> Finding | None:
    """The measured round exceeds what the layout and the named causes account for."""
    if has_profile(ctx):  # the traces name the parts of the round: they decide
        return profiled_residual(ctx)
    found = [_single_stream(ctx)]
    r = _busiest(ctx)
    measured = measured_round(ctx, r) if r is not None else None
    if r is not None and measured is not None:
        named = _in_window(ctx, r)
        found += [_from_idle(ctx, r, measured, named), _from_model(ctx, r, measured, named)]
    sized = [f for f in found if f is not None]
    return max(sized, key=lambda f: f.impact or 0.0) if sized else None


def _single_stream(ctx: RunAnalysis) -> Finding | None:
    """One request's step beyond any plausible link: where the fit rejected a link cost (it
    would put more on each hop or all-reduce than the interconnect plausibly costs), the
    single-stream round against the model with the link at each end of its plausible range."""
    if ctx.fit is None or ctx.params is None:
        return None
    rejected = [k for k, v in ctx.fit.sources.items() if v.startswith("assumed: fit rejected")]
    rows = [r for r in ctx.phase_summary.iter_rows(named=True) if r["offered"] == 1]
    measured = measured_round(ctx, rows[0]) if rows else None
    if not rejected or not rows or measured is None:
        return None
    r = rows[0]
    layout, load = _packed(ctx, r), _workload(ctx, r)
    rounds = []
    for params in (ctx.params, *(v.params for v in ctx.model_variants)):
        try:
            rounds.append(predict(layout, load, params).round_s)
        except (ToolkitError, ZeroDivisionError, ValueError):
            continue
    rounds = [x for x in rounds if math.isfinite(x) and x > 0]
    if not rounds:
        return None
    where = ctx.load_of(r["phase"])
    sized = spread(
        1 - rounds[0] / measured,
        [1 - x / measured for x in rounds],
        basis="modelled",
        where=where,
        rests_on=(
            f"model step {min(rounds) * 1e3:.1f}–{max(rounds) * 1e3:.1f} ms with every link and "
            "overhead at the ends of its plausible range",
        ),
    )
    if sized.impact < MIN_UNEXPLAINED or sized.range[0] <= 0:
        return None
    fields = sized.fields()
    if fields["severity"] == "high":
        fields["severity"] = "medium"  # a gap to the model: what takes the time is not measured
    gap = sized.impact * measured
    unit = _unit(ctx)
    names = ", ".join(ctx.fit.sources[k].split(";")[0] for k in rejected)
    return Finding(
        id="unexplained-slowdown",
        title=f"{gap * 1e3:.0f} ms per {unit} at one request that no link explains",
        summary=(
            f"{where.capitalize()} each {unit} took {measured * 1e3:.0f} ms; the serving model of "
            f"{ctx.model.describe()} on {ctx.machine.describe()} reads the weights and crosses "
            f"the links in {min(rounds) * 1e3:.0f}–{max(rounds) * 1e3:.0f} ms at the plausible "
            f"ends of its constants ({names}). The other {gap * 1e3:.0f} ms per {unit}"
            f"{_per_stage(ctx, gap)} is there at every load: {sized.words()} of the "
            "throughput. A slow link between stages, a CPU-bound loop, or a fixed wait per step."
        ),
        evidence=pl.DataFrame(
            {
                "phase": [r["phase"]],
                "measured_ms": [round(measured * 1e3, 2)],
                "model_ms_low": [round(min(rounds) * 1e3, 2)],
                "model_ms_high": [round(max(rounds) * 1e3, 2)],
                "share": [round(sized.impact, 3)],
            }
        ),
        remedy=_remedy(ctx),
        phase=r["phase"],
        **fields,
    )


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
    """The slowest stage's idle share in a full pipeline beyond the model's own idle there,
    less what eager steps explain (all of it when their cost is only assumed or bounded from
    below)."""
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
    expected, expected_words = _expected_idle(ctx, r, measured)
    central = idle - explained - expected[0]
    noise = busy_noise(ctx, r["phase"], top["gpus"] or [], str(top["metric"]))
    values = [idle - explained - e + sign * noise for e in expected for sign in (-1, 1)]
    where = ctx.load_of(r["phase"])
    sized = spread(
        central,
        values,
        basis="measured",
        where=where,
        rests_on=(
            f"{top['metric']} over {top['samples']} samples ±{noise:.0%}",
            expected_words,
        ),
        carried=False,
    )
    if sized.impact < MIN_UNEXPLAINED or sized.range[0] <= 0:
        return None
    gap = sized.impact * measured
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
        title=f"{gap * 1e3:.0f} ms per {unit} with no stage computing, that no finding explains",
        summary=(
            f"{where.capitalize()} every stage had work (~{r['running_est']:.0f} requests "
            f"running), so the slowest stage should compute all the time but for the serving "
            f"model's own per-step overhead ({expected[0]:.0%} of the {unit}); {stage} was busy "
            f"{top['busy_pct']:.0f}% ({top['metric']} in the GPU trace), idle {idle:.0%} of "
            f"each {measured * 1e3:.0f} ms {unit}{causes}. The rest, {gap * 1e3:.0f} ms per "
            f"{unit}{_per_stage(ctx, gap)}, is unexplained: {sized.words()} of the throughput. "
            "Communication fences between stages, a CPU-bound loop, or waits on the host."
        ),
        evidence=evidence,
        remedy=_remedy(ctx),
        phase=r["phase"],
        **sized.fields(),
    )


def _expected_idle(ctx: RunAnalysis, r: dict[str, Any], measured: float) -> tuple[list[float], str]:
    """The idle share of the busiest stage the serving model expects in phase ``r`` (its
    per-step overhead and hops), under its fit and every plausible variant whose round is no
    longer than the measured one (an unexplained cost can only add time: a variant slower
    than the run is not this machine); without any, none up to ``HEALTHY_IDLE``."""
    layout, load = _packed(ctx, r), _workload(ctx, r)
    values = []
    for params in (
        [ctx.params, *(v.params for v in ctx.model_variants)] if ctx.params is not None else []
    ):
        try:
            pred = predict(layout, load, params)
        except (ToolkitError, ZeroDivisionError, ValueError):
            continue
        if pred.stage_busy and 0 < pred.round_s <= measured * (1 + MIN_NOISE):
            values.append(max(0.0, 1 - max(pred.stage_busy)))
    if values:
        return values, (
            f"model idle {min(values):.0%}–{max(values):.0%} over its plausible constants"
        )
    return [0.0, HEALTHY_IDLE], (
        f"0–{HEALTHY_IDLE:.0%} idle between steps (assumed: the serving model does not "
        "reproduce this round)"
    )


def _packed(ctx: RunAnalysis, r: dict[str, Any]) -> Layout:
    if ctx.pp > 1 and r["slot_req"]:
        return ctx.with_layout(pp_max_micro_batch_size=max(round(r["slot_req"]), 1))
    return ctx.layout


def _workload(ctx: RunAnalysis, r: dict[str, Any]) -> Workload:
    phase = ctx.phase(r["phase"])
    running = max(round(r["running_est"]), 1)
    isl = max(round(phase.get("input_len") or 1000), 1)
    osl = max(round(phase.get("output_len") or isl), 1)
    return Workload(running, isl, osl)


def _eager_bounded(ctx: RunAnalysis) -> bool:
    """Whether the eager slowdown was read against one graph batch size (a lower bound)."""
    effect = eager_effect(ctx)
    return effect is not None and effect.bounded


def _from_model(
    ctx: RunAnalysis, r: dict[str, Any], measured: float, named: list[Named]
) -> Finding | None:
    """The measured round against the serving model's, lengthened by the named causes, under
    every plausible variant of its constants and widened by its error on untouched loads.

    The model counts weight reads, links and per-step overhead, not compute or KV reads at
    large batches: where the GPU trace shows the slowest stage computing all the time, the gap
    is kernel time the model lacks (or slow kernels), and without a trace to show the GPUs
    idle it is a lead to measure: either way at most ``medium``. Only idle the trace shows
    makes it ``high``."""
    if ctx.params is None or ctx.fit is None or not ctx.fit.calibration:
        return None
    busy = full_pipeline_idle(ctx, r["phase"])
    layout, load = _packed(ctx, r), _workload(ctx, r)
    b = max(float(r["slot_req"] or 1.0), 1.0)

    def explained(params: Params) -> tuple[float, float, list[Named]] | None:
        try:
            model_round = predict(layout, load, params).round_s
        except (ToolkitError, ZeroDivisionError, ValueError):
            return None
        if not math.isfinite(model_round) or model_round <= 0:
            return None
        total, counted = model_round, []
        for n in named:
            impact = n.impact
            if n.finding.id == "stage-imbalance":
                impact = max(0.0, impact - _modelled_imbalance(layout, params, b))
            if impact > 0:
                total /= max(1e-3, 1 - impact)
                counted.append(Named(n.finding, impact, n.where))
        return model_round, total, counted

    base = explained(ctx.params)
    if base is None:
        return None
    model_round, total, counted = base
    band, band_words = model_band(ctx, untouched=_untouched(ctx, r["phase"]))
    shares = [1 - total / measured]
    for variant in ctx.model_variants:
        found = explained(variant.params)
        if found is not None:
            shares.append(1 - found[1] / measured)
    lows = [1 - (1 - v) * (1 + band) for v in shares]
    highs = [1 - (1 - v) * max(1e-9, 1 - band) for v in shares]
    where = ctx.load_of(r["phase"])
    sized = spread(
        shares[0],
        [*lows, *highs],
        basis="modelled",
        where=where,
        rests_on=(
            f"model round {min(_round(measured, s) for s in shares) * 1e3:.0f}–"
            f"{max(_round(measured, s) for s in shares) * 1e3:.0f} ms over its plausible "
            "constants",
            band_words,
        ),
        carried=False,
    )
    if sized.impact < MIN_UNEXPLAINED or sized.range[0] <= 0:
        return None
    gap = sized.impact * measured
    unit = _unit(ctx)
    causes = ""
    if counted:
        ids = ", ".join(n.finding.id for n in counted)
        each = "; ".join(f"{n.impact:.0%} of the {unit}, {n.where}" for n in counted)
        causes = f" after the {ids} found here ({each})"
    constants = "; ".join(f"{k} {v}" for k, v in ctx.constants().items())
    evidence = pl.DataFrame(
        [
            {
                "phase": r["phase"],
                "running": load.concurrency,
                "slot_req": r["slot_req"],
                "measured_ms": round(measured * 1e3, 1),
                "model_ms": round(model_round * 1e3, 1),
                "explained_ms": round(total * 1e3, 1),
                "unexplained_ms": round(gap * 1e3, 1),
                "share": round(sized.impact, 3),
                "share_low": round(sized.range[0], 3),
                "share_high": round(sized.range[1], 3),
                "explained_by": _explained_by(counted),
            }
        ]
    )
    fields = sized.fields()
    computing = busy is not None and busy[0] <= HEALTHY_IDLE
    if (busy is None or computing) and fields["severity"] == "high":
        fields["severity"] = "medium"  # the model's gap alone: no trace shows the GPUs idle
    if busy is None:
        seen = "No GPU trace shows whether the slowest stage idled here: a lead to measure."
    elif computing:
        seen = (
            f"The GPU trace shows the slowest stage busy {1 - busy[0]:.0%} of the time: the "
            "kernels take longer than the weight reads the model counts (compute or KV reads at "
            "this batch, or slow kernels), a lead to profile."
        )
    else:
        seen = f"The GPU trace shows the slowest stage idle {busy[0]:.0%} of the time."
    return Finding(
        id="unexplained-slowdown",
        title=f"{gap * 1e3:.0f} ms per {unit} that no finding and no model term explains",
        summary=(
            f"At ~{load.concurrency} requests each {unit} took {measured * 1e3:.0f} ms; the "
            f"serving model of {ctx.model.describe()} on {ctx.machine.describe()} expects "
            f"{model_round * 1e3:.0f} ms for the layout as packed{causes}, "
            f"{total * 1e3:.0f} ms. The other {gap * 1e3:.0f} ms per {unit}"
            f"{_per_stage(ctx, gap)} is unexplained even at the plausible ends of the "
            f"constants the model assumes: {sized.words()} of the throughput. Communication "
            "fences between stages, kernels slower than the weight reads, or a CPU-bound loop. "
            f"{seen} Model constants: {constants}."
        ),
        evidence=evidence,
        remedy=_remedy(ctx),
        phase=r["phase"],
        **fields,
    )


def _round(measured: float, share: float) -> float:
    return measured * (1 - share)


def _untouched(ctx: RunAnalysis, judged_phase: int) -> list[int]:
    """Loads of the run that no finding explains a cost at, other than the judged one: the
    model's error there is its own, not a cause's."""
    touched = {f.phase for f in ctx.found if f.phase is not None and f.severity != "info"}
    if any(f.id == "pp-underfilled-slots" for f in ctx.found):
        touched |= {r["phase"] for r in judged(ctx) if r["verdict"] == "under-filled"}
    out = []
    for row in ctx.phases.iter_rows(named=True):
        if row["phase"] in touched or row["phase"] == judged_phase or not row["offered"]:
            continue
        out.append(int(row["offered"]))
    return out


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
    narrow = (
        " A profile of one stage, or SGLang's per-rank device-time metrics "
        "(--enable-metrics, captured with ppscope capture), narrows the range: they measure "
        "what the model assumes."
    )
    if ctx.pp > 1:
        return (
            "Profile one stage (torch profiler via /start_profile, or nsys) at this load and "
            "compare run_batch against recv and process_batch_result; newer SGLang releases "
            "overlap PP communication (SGLANG_PP_COMM_OVERLAP)." + narrow
        )
    return (
        "Profile a decode step at this load (torch profiler via /start_profile, or nsys): "
        "all-reduce time, kernel time and CPU gaps." + narrow
    )
