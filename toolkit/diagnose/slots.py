"""Micro-batch slot rules: ``pp-low-concurrency``, ``pp-empty-async-slots``, and the per-phase
verdicts ``pp-underfilled-slots`` (``packing``) rests on.

Each phase is judged against what it offered. One request cannot fill eight stages, so a
pipeline that is under-filled because fewer requests ran than there are stages is inherent
(``pp-low-concurrency``, info). It is a fault when enough requests were running to give every
stage a micro-batch and fewer slots than stages held them: admission front-packs the slots
(up to the prefill chunk budget, or the per-slot cap) and a request stays in the slot that
admitted it, so the other stages wait.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from toolkit.analyze.model import StageClock
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.noise import throughput_noise
from toolkit.diagnose.promise import Remedied, promise_table, remedy_runs
from toolkit.diagnose.prose import loads
from toolkit.diagnose.sizing import Sizing, ratio
from toolkit.diagnose.thresholds import MIN_BUSY_SAMPLES, REPLAY_SLOT_SLACK, SLOT_TOLERANCE
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "certain_busy",
    "full_pipeline_idle",
    "judged",
    "load_of_row",
    "measured_round",
    "pp_empty_async_slots",
    "pp_low_concurrency",
    "slot_evidence",
    "slowest_stage_ratio",
    "trip_points",
]


def judged(ctx: RunAnalysis) -> list[dict[str, Any]]:
    """Per phase: its numbers and a verdict (filled / under-filled / inherent)."""
    p = ctx.pp
    rows = []
    for r in ctx.phase_summary.iter_rows(named=True):
        running, active = r["running_est"], r["active_slots_est"]
        if running is None or active is None or not math.isfinite(running):
            continue
        offered = r["offered"]
        enough = running >= p - SLOT_TOLERANCE and (offered is None or offered >= p)
        if not enough:
            verdict = "inherent: fewer requests than stages"
        elif active < p - SLOT_TOLERANCE and not _replay_fills(r, p):
            verdict = "under-filled"
        elif active < p - SLOT_TOLERANCE:
            verdict = "filled: uneven slots (replay)"
        else:
            verdict = "filled"
        rows.append({**r, "verdict": verdict})
    return rows


def _replay_fills(r: dict[str, Any], p: int) -> bool:
    """The admission replay of the phase's burst fills every stage's slot, and its largest slot
    is the size the lines show.

    With ``decode_log_interval`` a multiple of the slot count the lines show one slot, the same
    one every time: the first admitted, the fullest when admission front-packs. Dividing the
    running requests by it then counts too few slots when they are uneven; a replay that fills
    them all and agrees with the logged size says they are uneven, not empty.
    """
    full, top, seen = r.get("replay_active"), r.get("replay_slot_max"), r.get("slot_req")
    if not full or not top or not seen:
        return False
    return full >= p - SLOT_TOLERANCE and abs(seen - top) <= REPLAY_SLOT_SLACK * top


def slot_evidence(rows: list[dict[str, Any]], model: bool = False) -> pl.DataFrame:
    frame = pl.DataFrame(
        [
            {
                "phase": r["phase"],
                "offered": r["offered"],
                "running_est": _round(r["running_est"], 1),
                "slot_req": _round(r["slot_req"], 1),
                "active_slots_est": _round(r["active_slots_est"], 1),
                "replay": r["replay"],
                "stages": r["stages"],
                "slots": r["slots"],
                "verdict": r["verdict"],
                "measured_tok_s": _round(r.get("measured_tok_s"), 0),
                "remedy_tok_s": _round(r.get("remedy_tok_s"), 0),
                "model_tok_s": _round(r.get("now_tok_s"), 0),
                "model_remedy_tok_s": _round(r.get("fixed_tok_s"), 0),
            }
            for r in rows[:20]
        ],
        schema={
            "phase": pl.Int64,
            "offered": pl.Int64,
            "running_est": pl.Float64,
            "slot_req": pl.Float64,
            "active_slots_est": pl.Float64,
            "replay": pl.String,
            "stages": pl.Int64,
            "slots": pl.Int64,
            "verdict": pl.String,
            "measured_tok_s": pl.Float64,
            "remedy_tok_s": pl.Float64,
            "model_tok_s": pl.Float64,
            "model_remedy_tok_s": pl.Float64,
        },
        orient="row",
    )
    sized = ("measured_tok_s", "remedy_tok_s", "model_tok_s", "model_remedy_tok_s")
    return frame if model else frame.drop(sized)


def load_of_row(r: dict[str, Any]) -> int:
    """The load a phase row stands for: the concurrency offered, else the requests running."""
    return int(r["offered"] or max(round(r["running_est"]), 1))


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def measured_round(ctx: RunAnalysis, r: dict[str, Any]) -> float | None:
    """The phase's time per output token (= one round under PP), seconds: the benchmark's
    median TPOT, else the log's own, requests running over gen throughput (``#running-req``
    itself without PP; under PP the count from ``#token`` and admissions)."""
    phase = ctx.phase(r["phase"])
    tpot = phase.get("bench_tpot_ms")
    if isinstance(tpot, float) and math.isfinite(tpot) and tpot > 0:
        return tpot / 1e3
    running, gen = r.get("running_est"), r.get("gen_tok_s")
    if running and gen and math.isfinite(running) and gen > 0:
        return running / gen
    return None


def trip_points(ctx: RunAnalysis, rows: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(micro-batch size, round s) of the phases whose slots were fewer than the stages: there
    each micro-batch's trip round the ring is the round. A phase whose slots were all held but
    uneven (``_replay_fills``) is no such point: its round is not one trip of the logged slot."""
    out = []
    for r in rows:
        active, slot = r["active_slots_est"], r["slot_req"]
        rnd = measured_round(ctx, r)
        if rnd is None or not slot or active is None or active >= ctx.pp - SLOT_TOLERANCE:
            continue
        if r["verdict"].startswith("filled"):
            continue
        out.append((float(slot), rnd))
    return out


def pp_low_concurrency(ctx: RunAnalysis) -> Finding | None:
    """Phases with fewer requests than stages: an under-filled pipeline by construction."""
    if ctx.pp < 2:
        return None
    rows = judged(ctx)
    low = [r for r in rows if r["verdict"].startswith("inherent")]
    if not low:
        return None
    shown = loads({r["offered"] or round(r["running_est"]) for r in low})
    return Finding(
        id="pp-low-concurrency",
        severity="info",
        title=f"Fewer requests than the {ctx.pp} stages at concurrency {shown}",
        summary=(
            f"At concurrency {shown} fewer requests ran than there are stages: one request "
            f"cannot fill {ctx.pp} stages, so most GPUs wait most of each round by design. "
            "This is inherent, not a fault; PP's edge at low load is that it has no all-reduce "
            "per layer."
        ),
        evidence=slot_evidence(low),
        remedy="Nothing to fix: compare layouts at the concurrency you serve.",
    )


def pp_empty_async_slots(ctx: RunAnalysis) -> Finding | None:
    """``pp_async_batch_depth`` adds slots that never held requests, even when the load could
    have filled them.

    The serving model does not count the loop's empty iterations, so the cost is sized only by
    a run of the same model, machine and layout with another depth among the runs diagnosed
    with this one (the highest load both measured); else it is a note."""
    if ctx.pp < 2 or ctx.depth < 1:
        return None
    rows = [r for r in judged(ctx) if not r["verdict"].startswith("inherent")]
    if not rows:
        return None
    most = max(r["active_slots_est"] for r in rows)
    if most > ctx.pp + SLOT_TOLERANCE:
        return None
    remedies = remedy_runs(ctx, "pp_async_batch_depth", lambda x: x.depth if x.pp > 1 else None)
    table = promise_table(ctx, "pp_async_batch_depth", remedies, lambda c, value: None)
    measured = _measured_depth(ctx, remedies, {load_of_row(r) for r in rows})
    summary = (
        f"The loop cycles through {ctx.slots} slots per round, but in no phase did more "
        f"than ~{most:.0f} slots hold requests: the {ctx.slots - ctx.pp} extra iterations "
        "per round only cost CPU time and a gloo message per stage. Extra slots help only "
        "when filled."
    )
    fields: dict[str, Any] = {"severity": "info"}
    if measured is not None:
        fields = measured[0].fields()
        summary += f" {measured[1]}"
    else:
        summary += (
            " Its cost is not sized: the serving model does not count empty loop iterations; "
            "a run with --pp-async-batch-depth 0 at the same load measures it."
        )
    return Finding(
        id="pp-empty-async-slots",
        title=f"pp_async_batch_depth={ctx.depth} adds {ctx.depth} slots that stay empty",
        summary=summary,
        evidence=slot_evidence(rows),
        remedy=(
            "--pp-async-batch-depth 0 (or small), unless more requests than pp_size × "
            "pp_max_micro_batch_size run at once."
        ),
        promise=table if table.height else None,
        **fields,
    )


def _measured_depth(
    ctx: RunAnalysis, remedies: list[Remedied], loads: set[int]
) -> tuple[Sizing, str] | None:
    """The gain a run with a smaller depth measured at the highest load both runs measured
    among ``loads``, sized with both measurements' noise, and the sentence saying so."""
    mine = ctx.throughput_curve
    for remedy in remedies:
        if remedy.value >= ctx.depth:
            continue
        theirs = remedy.ctx.throughput_curve
        shared = sorted(loads & set(mine) & set(theirs))
        if not shared:
            continue
        c = shared[-1]
        phase = next((r["phase"] for r in judged(ctx) if load_of_row(r) == c), None)
        noise, words = throughput_noise(ctx, phase)
        sized = ratio(
            mine[c],
            max(theirs[c], mine[c]),
            basis="measured",
            where=f"at {c} requests",
            now_noise=noise,
            after_noise=noise,
            rests_on=(f"{remedy.ctx.label} measured with depth {remedy.value}", words),
            carried=False,
        )
        if sized is not None:
            return sized, (
                f"{remedy.ctx.label}, the same model, machine and layout with "
                f"--pp-async-batch-depth {remedy.value}, measured {theirs[c]:.1f} tok/s at {c} "
                f"requests against {mine[c]:.1f} here: {sized.words()}."
            )
    return None


def slowest_stage_ratio(ctx: RunAnalysis, b: float = 1.0) -> tuple[float, float, str]:
    """(low, high, where that comes from) of the busiest stage over the mean stage: the
    stages' measured busy shares while decoding (one value), else between even stages and the
    model's step of each stage from the layer split at micro-batch ``b`` (an assumption: both
    ends), else 1 (assumed even). With every stage holding work the slowest sets the round,
    so a full pipeline's round is this ratio times the mean stage's share of a trip."""
    if ctx.pp < 2:
        return 1.0, 1.0, "one stage"
    busy = ctx.busy
    for column in ("busy_pct", "fwd_occupancy_pct"):
        if column not in busy.columns:
            continue
        values = busy[column].drop_nulls()
        mean = values.mean() if values.len() >= 2 else None
        if isinstance(mean, float) and mean > 0:
            top = float(values.max())  # type: ignore[arg-type]
            metric = busy["metric"][0] if "metric" in busy.columns else column
            ratio = top / mean
            return ratio, ratio, f"busiest stage {ratio:.2f}× the mean ({metric})"
    if ctx.params is not None:
        try:
            clock = StageClock(ctx.layout, ctx.params)
            times = [clock.decode(k, b) for k in range(ctx.pp)]
        except (ToolkitError, ZeroDivisionError, ValueError):
            times = []
        if times and sum(times) > 0:
            ratio = max(times) * len(times) / sum(times)
            return (
                1.0,
                ratio,
                (
                    f"busiest stage 1–{ratio:.2f}× the mean: even, up to what the layer split "
                    "gives by the serving model (no per-stage measure)"
                ),
            )
    return 1.0, 1.0, "stages assumed even (no per-stage measure)"


def certain_busy(ctx: RunAnalysis) -> pl.DataFrame | None:
    """``busy_by_phase`` without the stages of a phase read from fewer than
    ``MIN_BUSY_SAMPLES`` samples per GPU (coarse sampling of a short window): their share is
    shown in evidence but no finding rests on it. None without a trace."""
    by_phase = ctx.busy_by_phase
    if by_phase is None:
        return None
    return by_phase.filter(pl.col("samples") >= MIN_BUSY_SAMPLES)


def _measurable(ctx: RunAnalysis, r: dict[str, Any]) -> bool:
    """Whether the GPU trace covers the phase and every stage had a micro-batch in it (always,
    without PP): then the slowest stage's idle time is measured, not modelled."""
    active = r["active_slots_est"]
    full = ctx.pp == 1 or (active is not None and active >= ctx.pp - SLOT_TOLERANCE)
    busy = certain_busy(ctx)
    if not full or busy is None:
        return False
    rows = busy.filter(pl.col("phase") == r["phase"]).drop_nulls("busy_pct")
    return rows.height > 0


def full_pipeline_idle(ctx: RunAnalysis, phase: int) -> tuple[float, dict[str, Any]] | None:
    """The idle share of the busiest stage in ``phase`` and its ``busy_by_phase`` row, when the
    GPU trace covers the phase and every stage had work in it (``_measurable``); else None."""
    rows = ctx.phase_summary.filter(pl.col("phase") == phase)
    if not rows.height or not _measurable(ctx, rows.row(0, named=True)):
        return None
    certain = certain_busy(ctx)
    assert certain is not None
    busy = certain.filter(pl.col("phase") == phase).drop_nulls("busy_pct")
    top = busy.sort("busy_pct", descending=True).row(0, named=True)
    return 1.0 - min(float(top["busy_pct"]) / 100.0, 1.0), top
