"""Stage rules: ``pp-lockstep-logging`` (info), ``stage-desync``, ``gpu-idle-bubbles``.

All PP stages print the same micro-batch at the same log ordinal by design (every stage runs the
same scheduler on the same requests): identical lines are the baseline and get an info note. Stages
that disagree at an ordinal scheduled different batches, a correctness bug. GPU busy per stage
comes from the GPU trace (``sm_active`` preferred over ``util_pct``, which counts a NCCL kernel
waiting for its peer as busy) or from the log's ``fwd occupancy``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.analyze.model import Params, Workload, predict
from toolkit.analyze.stages import desync_share
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.noise import model_range
from toolkit.diagnose.profiled import has_profile, profiled_bubbles
from toolkit.diagnose.sizing import spread
from toolkit.diagnose.slots import SLOT_TOLERANCE, certain_busy
from toolkit.diagnose.thresholds import IDLE, MIN_BUSY_SAMPLES, UNEXPLAINED_IDLE
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["certain_busy", "gpu_idle_bubbles", "pp_lockstep_logging", "stage_desync"]

_DESYNC_EVIDENCE = ["kind", "ordinal", "ts", "running_req_min", "running_req_max", "token_min",
                    "token_max", "spread_s"]  # fmt: skip


def _stages_logging(ctx: RunAnalysis) -> int:
    return int(ctx.timeline["pp"].n_unique()) if ctx.timeline.height else 0


def pp_lockstep_logging(ctx: RunAnalysis) -> Finding | None:
    """Every stage printed the same batch at the same ordinal: the normal PP log, explained."""
    stages = _stages_logging(ctx)
    decode = ctx.desync.filter(pl.col("kind") == "decode")
    if stages < 2 or not decode.height or not decode["agrees"].all():
        return None
    spread = float(decode["spread_s"].max() or 0.0)
    evidence = (
        decode.head(8)
        .select("ordinal", "ts", "stages", "running_req_min", "token_min", "spread_s")
        .rename({"running_req_min": "running_req", "token_min": "token"})
    )
    return Finding(
        id="pp-lockstep-logging",
        severity="info",
        title=f"All {stages} stages log the same micro-batch at the same moment (normal for PP)",
        summary=(
            f"At each of {decode.height} decode log ordinals all {stages} stages printed the "
            f"same #running-req and #token, within {spread:.0f} s of each other. That is how "
            "SGLang PP logs: every stage runs the same scheduler on the same micro-batches and "
            f"prints every {ctx.log_interval}th (--decode-log-interval). #running-req is one "
            "micro-batch slot, not the total in flight."
        ),
        evidence=evidence,
        remedy="Nothing to fix. Read occupancy from #token (see pp-underfilled-slots).",
    )


def stage_desync(ctx: RunAnalysis) -> Finding | None:
    """Stages disagree on #running-req / #token at the same log ordinal."""
    if _stages_logging(ctx) < 2:
        return None
    bad = ctx.desync.filter(~pl.col("agrees"))
    if not bad.height:
        return None
    share = desync_share(ctx.desync, kind=None)
    severity = "high" if bad.height >= 2 or share >= 0.01 else "medium"
    first = bad.row(0, named=True)
    return Finding(
        id="stage-desync",
        severity=severity,
        title=f"Stages disagree at {bad.height} log ordinals ({share:.1%})",
        summary=(
            f"At {bad.height} of {ctx.desync.height} log ordinals the stages printed different "
            f"batches (first at {first['ts']}: #running-req {first['running_req_min']}–"
            f"{first['running_req_max']}, #token {first['token_min']}–{first['token_max']}). "
            "PP stages must schedule identical micro-batches; a desync is a correctness bug "
            "(cf. sgl-project/sglang#28424), not a logging artifact."
        ),
        evidence=bad.head(20).select(_DESYNC_EVIDENCE),
        remedy=(
            "Check features that make stages decide differently (structured output / grammar "
            "backends, per-rank randomness); upgrade SGLang; verify outputs against TP."
        ),
    )


IDLE_CAUSES = (
    "pp-underfilled-slots",
    "pp-low-concurrency",
    "cuda-graph-miss",
    "stage-imbalance",
    "unexplained-slowdown",
)
"""Findings that account for idle GPUs: a decoding GPU idles because of one of them."""


def gpu_idle_bubbles(ctx: RunAnalysis) -> Finding | None:
    """GPUs idle while requests decode: a symptom, attributed to the findings that explain it.

    Severity stays ``info`` when the occupancy or a finding on the same run explains the idle
    time (the cost is that finding's); idle time beyond the occupancy that no finding explains
    is sized here.
    """
    if has_profile(ctx):  # the traces measure every stage's idle and waits: they decide
        return profiled_bubbles(ctx)
    rows = _phase_idle(ctx)
    idle = [r for r in rows if r["idle"] >= IDLE]
    if not idle:
        return None
    unsure = _uncertain_phases(ctx)
    unsure_note = (
        f" Phase(s) {', '.join(map(str, unsure))} hold fewer than {MIN_BUSY_SAMPLES} trace "
        "samples per GPU and are not judged."
        if unsure
        else ""
    )
    evidence = pl.DataFrame(
        [
            {k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}
            for r in rows[:20]
        ],
        schema={
            "phase": pl.Int64,
            "offered": pl.Int64,
            "active_slots_est": pl.Float64,
            "busy": pl.Float64,
            "idle": pl.Float64,
            "expected_idle": pl.Float64,
            "unexplained": pl.Float64,
            "metric": pl.String,
        },
        orient="row",
    )
    causes = [
        f.id
        for f in ctx.found
        if (f.id in IDLE_CAUSES and f.severity != "info") or f.id == "pp-low-concurrency"
    ]
    unexplained = [r for r in idle if (r["unexplained"] or 0.0) >= UNEXPLAINED_IDLE]
    if unexplained and not causes:
        worst = max(unexplained, key=lambda r: r["unexplained"])
        busy, expected_busy = worst["busy"], 1 - worst["expected_idle"]
        values = [1 - busy / e for e in _expected_range(ctx, worst) if e > 0]
        sized = spread(
            max(0.0, 1 - busy / expected_busy) if expected_busy > 0 else 0.0,
            values,
            basis="modelled",
            where=ctx.load_of(worst["phase"]),
            rests_on=("the serving model's busy share over its plausible constants",),
        )
        fields = sized.fields()
        return Finding(
            id="gpu-idle-bubbles",
            title=f"GPUs idle {worst['idle']:.0%} while decoding at {worst['offered']} requests",
            summary=(
                f"{ctx.load_of(worst['phase']).capitalize()} the GPUs were busy {busy:.0%} of "
                f"the time ({worst['metric']}), while {_occupancy(ctx, worst)} lets the serving "
                f"model expect {expected_busy:.0%}: {worst['unexplained']:.0%} of each GPU's time "
                "is bubbles the load does not explain (communication fences, a CPU-bound loop, "
                f"or slow kernels), and no finding here accounts for them: {sized.words()} of "
                f"the throughput.{unsure_note}"
            ),
            evidence=evidence,
            remedy=(
                "Profile one stage (POST /start_profile): long recv_requests / "
                "process_batch_result point at the CPU loop, SendRecv kernels before run_batch "
                "at communication fences; SGLANG_PP_COMM_OVERLAP=1 (≥0.5.23) moves PP "
                "communication off the compute stream."
            ),
            phase=worst["phase"],
            **fields,
        )
    worst = max(idle, key=lambda r: r["idle"])
    expected = worst["expected_idle"]
    model = (
        f"; with {_occupancy(ctx, worst)} the serving model expects {expected:.0%} idle"
        if expected is not None and worst["active_slots_est"] is not None
        else ""
    )
    why = (
        f"Accounted for by {', '.join(causes)} (their impact is the cost)."
        if causes
        else "The occupancy accounts for it."
    )
    return Finding(
        id="gpu-idle-bubbles",
        severity="info",
        title=f"GPUs idle {worst['idle']:.0%} while decoding at {worst['offered']} requests",
        summary=(
            f"{ctx.load_of(worst['phase']).capitalize()} the GPUs were busy "
            f"{worst['busy']:.0%} ({worst['metric']}){model}. {why}{unsure_note}"
        ),
        evidence=evidence,
        remedy="Act on the findings that explain the idle time, then look again.",
        phase=worst["phase"],
    )


def _occupancy(ctx: RunAnalysis, row: dict[str, Any]) -> str:
    """The load of a ``_phase_idle`` row in the layout's words: slots for stages under PP, the
    batch without."""
    if ctx.pp > 1:
        return f"~{row['active_slots_est']:.0f} active slots for {ctx.pp} stages"
    return f"one batch of ~{row['offered']} requests"


def _phase_idle(ctx: RunAnalysis) -> list[dict[str, Any]]:
    """Per phase: measured busy share (mean over stages), the model's, and the difference."""
    per_phase = _measured_busy(ctx)
    if not per_phase:
        return []
    summary = {r["phase"]: r for r in ctx.phase_summary.iter_rows(named=True)}
    out = []
    for phase, (busy, metric) in sorted(per_phase.items()):
        s = summary.get(phase)
        if s is None or s["running_est"] is None:
            continue
        if s["running_est"] < ctx.pp - SLOT_TOLERANCE:
            continue  # fewer requests than stages: idle GPUs are inherent (pp-low-concurrency)
        offered = s["offered"] or max(round(s["running_est"]), 1)
        expected = _expected_busy(ctx, s, offered)
        out.append(
            {
                "phase": phase,
                "offered": offered,
                "active_slots_est": s["active_slots_est"],
                "busy": busy,
                "idle": 1 - busy,
                "expected_idle": None if expected is None else 1 - expected,
                "unexplained": None if expected is None else expected - busy,
                "metric": metric,
            }
        )
    return out


def _uncertain_phases(ctx: RunAnalysis) -> list[int]:
    """Phases whose trace busy share rests on fewer than ``MIN_BUSY_SAMPLES`` samples."""
    by_phase = ctx.busy_by_phase
    if by_phase is None or not by_phase.height:
        return []
    rows = by_phase.filter(pl.col("samples") < MIN_BUSY_SAMPLES)
    return sorted(set(rows["phase"].to_list()))


def _measured_busy(ctx: RunAnalysis) -> dict[int, tuple[float, str]]:
    """Phase → (mean busy share over stages, metric), from the trace, else fwd occupancy."""
    by_phase = certain_busy(ctx)
    if by_phase is not None and by_phase.height:
        agg = by_phase.group_by("phase").agg(pl.col("busy_pct").mean(), pl.col("metric").first())
        return {r["phase"]: (r["busy_pct"] / 100.0, r["metric"]) for r in agg.iter_rows(named=True)}
    decode = ctx.timeline.filter(
        (pl.col("kind") == "decode") & pl.col("fwd_occupancy_pct").is_not_null()
    )
    if not decode.height or not ctx.phases.height:
        return {}
    tagged = decode.sort("ts").join_asof(
        ctx.phases.select("start", "phase").sort("start"), left_on="ts", right_on="start"
    )
    agg = tagged.group_by("phase").agg(pl.col("fwd_occupancy_pct").mean())
    return {
        r["phase"]: (r["fwd_occupancy_pct"] / 100.0, "fwd_occupancy")
        for r in agg.iter_rows(named=True)
        if r["phase"] is not None
    }


def _expected_range(ctx: RunAnalysis, row: dict[str, Any]) -> list[float]:
    """The mean stage busy share the serving model expects for a ``_phase_idle`` row, under
    every plausible variant of its constants."""
    summary = ctx.phase_summary.filter(pl.col("phase") == row["phase"])
    if not summary.height:
        return []
    s = summary.row(0, named=True)
    return model_range(ctx, lambda params: _expected_busy(ctx, s, row["offered"], params))


def _expected_busy(
    ctx: RunAnalysis, s: dict[str, Any], offered: int, params: Params | None = None
) -> float | None:
    """Mean stage busy share the serving model expects for the phase as packed (under
    ``params``, by default the run's fit)."""
    params = params or ctx.params
    if params is None:
        return None
    phase = ctx.phase(s["phase"])
    isl = round(phase.get("input_len") or 1000)
    osl = round(phase.get("output_len") or isl)
    layout = ctx.layout
    if ctx.pp > 1 and s["slot_req"]:
        layout = ctx.with_layout(pp_max_micro_batch_size=max(round(s["slot_req"]), 1))
    try:
        pred = predict(layout, Workload(offered, max(isl, 1), max(osl, 1)), params)
    except (ToolkitError, ZeroDivisionError, ValueError):  # a launch the model cannot represent
        return None
    busy = pred.stage_busy
    return sum(busy) / len(busy) if busy else None
