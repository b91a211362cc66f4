"""Micro-batch slot rules: ``pp-underfilled-slots``, ``pp-low-concurrency``,
``pp-empty-async-slots``.

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

from toolkit.analyze.effects import TripCurve, trip_curve
from toolkit.diagnose.finding import Finding, severity_of
from toolkit.diagnose.thresholds import MIN_BUSY_SAMPLES, REPLAY_SLOT_SLACK, SLOT_TOLERANCE
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "certain_busy",
    "full_pipeline_idle",
    "pp_empty_async_slots",
    "pp_low_concurrency",
    "pp_underfilled_slots",
]


def _judged(ctx: RunAnalysis) -> list[dict[str, Any]]:
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


def _evidence(rows: list[dict[str, Any]], model: bool = False) -> pl.DataFrame:
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


def pp_underfilled_slots(ctx: RunAnalysis) -> Finding | None:
    """Enough requests ran to give every stage a micro-batch, but fewer slots held them.

    The cost is measured where the run allows: the rounds of its under-filled phases against
    their micro-batch sizes give the round of a micro-batch of ``c / pp`` requests, which is
    the round once every stage has one (``--pp-max-micro-batch-size ⌈c/pp⌉``). Without two
    measured sizes the serving model of the run's model and machine sizes it, scaled by the
    run's measured/model ratio; without a known model the cost stays unsized.
    """
    if ctx.pp < 2:
        return None
    rows = _judged(ctx)
    faults = [r for r in rows if r["verdict"] == "under-filled"]
    if not faults:
        return None
    p, slots = ctx.pp, ctx.slots
    curve = trip_curve(trip_points(ctx, rows))
    for r in rows:
        r.update(_sized(ctx, r, curve))
    candidates = [r for r in rows if not r["verdict"].startswith("inherent")]
    best = max(faults, key=_load)  # scaling is about the top: the highest load that packs
    c = _load(best)
    cap, gains = _best_cap(ctx, best, candidates, curve)
    cap = cap or max(math.ceil(c / p), 1)
    active = round(best["active_slots_est"])
    slot = round(best["slot_req"])
    now_round = measured_round(ctx, best)
    impact: float | None = None
    basis: str | None = None
    sizing = ""
    if gains and now_round:
        gain = gains.get(best["phase"], 1.0)
        impact = max(0.0, 1 - 1 / gain)
        basis = "measured"
        tok_s = _measured(ctx, best)
        for r in rows:
            if r["phase"] in gains:
                r["remedy_tok_s"] = _measured(ctx, r) * gains[r["phase"]]
        assert curve is not None
        sizing = (
            f" Measured here: {tok_s:.0f} tok/s at {c} requests, one token per request every "
            f"{now_round * 1e3:.0f} ms; the rounds of this run's under-filled phases grow by "
            f"{curve.per_request_s * 1e3:.1f} ms per request in a micro-batch, so with "
            f"--pp-max-micro-batch-size {cap} this load would run at ≈{tok_s * gain:.0f} tok/s "
            f"(the packing costs {impact:.0%})."
        )
        worse = [r for r in candidates if gains.get(r["phase"], 1.0) < 0.95]
        if worse:
            loads = ", ".join(str(_load(r)) for r in worse)
            sizing += f" At {loads} requests that cap would cost throughput: a static cap trades."
    elif best.get("now_tok_s") and best.get("fixed_tok_s"):
        impact = max(0.0, 1 - best["now_tok_s"] / best["fixed_tok_s"])
        basis = "modelled"
        sizing = _modelled_text(ctx, best, c, cap, now_round, impact)
    summary = (
        f"{c} requests in flight, but #token implies ~{active} active slots of {slots}; each "
        f"slot holds {slot} (#running-req), so only ~{active} of {p} stages have a micro-batch "
        f"to work on and each GPU idles about {max(0.0, 1 - active / p):.0%} of a round."
    )
    cause = _cause(ctx, best)
    if cause:
        summary += " " + cause
    if best["replay"]:
        summary += f" Replaying admission for this burst gives {best['replay']}."
    summary += sizing or (
        f" The cost is not sized: the run measured one micro-batch size only and "
        f"{ctx.model.describe()}."
    )
    severity = severity_of(impact, floor="medium")
    chosen = ctx.layout.pp_max_micro_batch_size
    if chosen is not None and slot >= chosen and severity == "high":
        # The user's own per-slot cap packed these slots: the known price of a static cap
        # tuned for another load, not a fault of the layout.
        severity = "medium"
        summary += (
            f" The packing comes from the explicit --pp-max-micro-batch-size {chosen}, tuned "
            "for another load: a static cap trades between loads."
        )
    return Finding(
        id="pp-underfilled-slots",
        severity=severity,
        title=f"~{active} of {slots} micro-batch slots active at {c} requests with {p} stages",
        summary=summary,
        evidence=_evidence(rows, model=True),
        remedy=_remedy(ctx, cap, c),
        impact=impact,
        basis=basis,
    )


def _measured(ctx: RunAnalysis, r: dict[str, Any]) -> float:
    """The phase's measured tok/s (benchmark, else the log's round)."""
    value = r.get("measured_tok_s")
    if value:
        return float(value)
    rnd = measured_round(ctx, r)
    return _load(r) / rnd if rnd else 0.0


def _capped_rate(curve: TripCurve, c: int, b_now: int, cap: int, stages: int, slots: int) -> float:
    """Requests served per second (on ``curve``'s rounds) when a cap of ``cap`` per slot packs
    ``c`` requests that ran ``b_now`` per slot: smaller micro-batches, more of them; beyond the
    stage count each round holds several micro-batches per stage, beyond the slot count the
    rest wait."""
    b = max(1, min(b_now, cap))
    n = math.ceil(c / b)
    running = min(c, slots * b)
    rnd = curve.round_s(b) * max(1.0, min(n, slots) / stages)
    return running / rnd if rnd > 0 else 0.0


def _best_cap(
    ctx: RunAnalysis,
    headline: dict[str, Any],
    rows: list[dict[str, Any]],
    curve: TripCurve | None,
) -> tuple[int | None, dict[int, float]]:
    """The ``pp_max_micro_batch_size`` that serves the headline phase's load best on the run's
    measured round curve, and per phase the throughput gain it gives (> 1: faster), so the
    summary can say where a static cap would cost."""
    if curve is None or not rows:
        return None, {}
    p, slots = ctx.pp, ctx.slots
    loads = {r["phase"]: (_load(r), _current_cap(r)) for r in rows}
    c, b = _load(headline), _current_cap(headline)
    candidates = range(1, max(b, 1) + 1)
    cap = max(candidates, key=lambda k: (round(_capped_rate(curve, c, b, k, p, slots), 9), k))
    gains = {
        phase: _capped_rate(curve, lc, lb, cap, p, slots)
        / _capped_rate(curve, lc, lb, lb, p, slots)
        for phase, (lc, lb) in loads.items()
    }
    return cap, gains


def _sized(ctx: RunAnalysis, r: dict[str, Any], curve: TripCurve | None) -> dict[str, Any]:
    """Per phase: tok/s measured, and with every stage given a micro-batch (measured curve, else
    the serving model as packed and remedied)."""
    c = _load(r)
    cap = max(math.ceil(c / ctx.pp), 1)
    out: dict[str, Any] = {}
    rnd = measured_round(ctx, r)
    phase = ctx.phase(r["phase"])
    if rnd:
        measured = phase.get("bench_tok_s") or c / rnd
        out["measured_tok_s"] = measured
    isl, osl = phase.get("input_len"), phase.get("output_len")
    packed = ctx.with_layout(pp_max_micro_batch_size=_current_cap(r))
    now = ctx.model_tok_s(packed, c, isl, osl)
    fixed = ctx.model_tok_s(ctx.with_layout(pp_max_micro_batch_size=cap), c, isl, osl)
    if now and fixed:
        out |= {"now_tok_s": now, "fixed_tok_s": fixed}
    return out


def _modelled_text(
    ctx: RunAnalysis, r: dict[str, Any], c: int, cap: int, now_round: float | None, impact: float
) -> str:
    now, fixed = r["now_tok_s"], r["fixed_tok_s"]
    text = (
        f" The serving model of {ctx.model.describe()} on {ctx.machine.describe()} expects "
        f"≈{now:.0f} tok/s as packed and ≈{fixed:.0f} tok/s with --pp-max-micro-batch-size "
        f"{cap} (−{impact:.0%} as packed)."
    )
    if now_round:
        measured = r.get("measured_tok_s") or c / now_round
        text += (
            f" The run measured {measured:.0f} tok/s, {measured / now:.0%} of the model's, so "
            f"expect ≈{fixed * measured / now:.0f} tok/s after the change."
        )
    return text


def _load(r: dict[str, Any]) -> int:
    return r["offered"] or max(round(r["running_est"]), 1)


def _current_cap(r: dict[str, Any]) -> int:
    """The per-slot size the phase ran with: the observed slot size."""
    return max(round(r["slot_req"] or 1), 1)


def _remedy(ctx: RunAnalysis, cap: int | None, c: int) -> str:
    if cap is None:
        cap = max(math.ceil(c / ctx.pp), 1)
    text = (
        f"--pp-max-micro-batch-size {cap}: admission then spreads {ctx.pp * cap} requests over "
        f"{ctx.pp} slots instead of packing few. "
    )
    if ctx.depth:
        text += (
            f"--pp-async-batch-depth 0 is worth a try too: its {ctx.depth} extra slots stay "
            "empty at this load. "
        )
    return text + (
        "Try it live without a restart: POST /set_internal_state "
        f'{{"server_args": {{"pp_max_micro_batch_size": {cap}}}}}.'
    )


def _cause(ctx: RunAnalysis, row: dict[str, Any]) -> str:
    """What packed the slots: the chunk budget or the per-slot cap."""
    chunk = ctx.derived["resolved_chunked_prefill_size"]
    cap = ctx.derived["per_slot_cap"]
    slot = round(row["slot_req"] or 0)
    phase = ctx.phase(row["phase"])
    isl = phase.get("input_len")
    if cap is not None and slot >= cap:
        mrr = ctx.derived["resolved_max_running_requests"]
        source = (
            "pp_max_micro_batch_size"
            if ctx.layout.pp_max_micro_batch_size
            else f"max_running_requests // pp_size = {mrr}//{ctx.pp}"
        )
        return f"Each slot fills up to its cap of {cap} ({source}) and nothing rebalances."
    if chunk and isl and chunk / isl <= slot * 1.5:
        return (
            f"Admission packs each slot in one prefill pass of the {chunk}-token chunk budget "
            f"(~{chunk / isl:.0f} requests of ~{isl:.0f} tokens) and never rebalances."
        )
    return "Admission front-packs the slots and never rebalances them."


def pp_low_concurrency(ctx: RunAnalysis) -> Finding | None:
    """Phases with fewer requests than stages: an under-filled pipeline by construction."""
    if ctx.pp < 2:
        return None
    rows = _judged(ctx)
    low = [r for r in rows if r["verdict"].startswith("inherent")]
    if not low:
        return None
    loads = sorted({r["offered"] or round(r["running_est"]) for r in low})
    shown = ", ".join(str(c) for c in loads[:8])
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
        evidence=_evidence(low),
        remedy="Nothing to fix: compare layouts at the concurrency you serve.",
    )


def pp_empty_async_slots(ctx: RunAnalysis) -> Finding | None:
    """``pp_async_batch_depth`` adds slots that never held requests, even when the load could
    have filled them."""
    if ctx.pp < 2 or ctx.depth < 1:
        return None
    rows = [r for r in _judged(ctx) if not r["verdict"].startswith("inherent")]
    if not rows:
        return None
    most = max(r["active_slots_est"] for r in rows)
    if most > ctx.pp + SLOT_TOLERANCE:
        return None
    return Finding(
        id="pp-empty-async-slots",
        severity="low",
        title=f"pp_async_batch_depth={ctx.depth} adds {ctx.depth} slots that stay empty",
        summary=(
            f"The loop cycles through {ctx.slots} slots per round, but in no phase did more "
            f"than ~{most:.0f} slots hold requests: the {ctx.slots - ctx.pp} extra iterations "
            "per round only cost CPU time and a gloo message per stage. Extra slots help only "
            "when filled."
        ),
        evidence=_evidence(rows),
        remedy=(
            "--pp-async-batch-depth 0 (or small), unless more requests than pp_size × "
            "pp_max_micro_batch_size run at once."
        ),
    )


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
