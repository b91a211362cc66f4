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

from toolkit.diagnose.finding import Finding, severity_of
from toolkit.run_analysis import RunAnalysis

__all__ = ["pp_empty_async_slots", "pp_low_concurrency", "pp_underfilled_slots"]

# Active-slot estimates carry ~10 % noise (mean context): half a slot short of the stage
# count is not yet a fault.
SLOT_TOLERANCE = 0.5


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
        elif active < p - SLOT_TOLERANCE:
            verdict = "under-filled"
        else:
            verdict = "filled"
        rows.append({**r, "verdict": verdict})
    return rows


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
                "model_tok_s": _round(r.get("now_tok_s"), 0),
                "remedy_tok_s": _round(r.get("fixed_tok_s"), 0),
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
            "model_tok_s": pl.Float64,
            "remedy_tok_s": pl.Float64,
        },
        orient="row",
    )
    return frame if model else frame.drop("model_tok_s", "remedy_tok_s")


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


def pp_underfilled_slots(ctx: RunAnalysis) -> Finding | None:
    """Enough requests ran to give every stage a micro-batch, but fewer slots held them."""
    if ctx.pp < 2:
        return None
    rows = _judged(ctx)
    faults = [r for r in rows if r["verdict"] == "under-filled"]
    if not faults:
        return None
    p, slots = ctx.pp, ctx.slots
    cap, plan = _best_cap(ctx, [r for r in rows if not r["verdict"].startswith("inherent")])
    for r in rows:
        r.update(plan.get(r["phase"], {}))
    gains = [r for r in faults if r.get("gain") is not None]
    # The headline is the phase that loses the most tokens per second, not the largest share:
    # that is where the throughput the user cares about goes.
    best = max(gains, key=lambda r: r["gain"]) if gains else max(faults, key=_load)
    impact = best.get("impact")
    c = _load(best)
    active = round(best["active_slots_est"])
    slot = round(best["slot_req"])
    in_flight = f"{c} requests in flight" if best["offered"] else f"~{c} requests running"
    summary = (
        f"{in_flight}, but #token implies ~{active} active slots of {slots}; each slot holds "
        f"{slot} (#running-req), so only ~{active} of {p} stages have a micro-batch to work on "
        f"and each GPU idles about {max(0.0, 1 - active / p):.0%} of a round."
    )
    cause = _cause(ctx, best)
    if cause:
        summary += " " + cause
    if best["replay"]:
        summary += f" Replaying admission for this burst gives {best['replay']}."
    # The cap that packed the slots may already be the best single value for the sweep.
    tradeoff = impact is not None and impact < 0.01
    if impact is not None and not tradeoff:
        summary += (
            f" The serving model expects ≈{best['fixed_tok_s']:.0f} tok/s with "
            f"--pp-max-micro-batch-size {cap} against ≈{best['now_tok_s']:.0f} tok/s as packed "
            f"(−{impact:.0%})."
        )
        worse = [r for r in rows if (r.get("gain") or 0.0) < -0.05 * (r.get("now_tok_s") or 1)]
        if worse:
            loads = ", ".join(str(_load(r)) for r in worse)
            summary += f" At {loads} requests that cap would cost throughput: a static cap trades."
    if tradeoff:
        summary += (
            f" The per-slot cap of {cap} is already the best single value for this sweep's "
            "loads: the low-load phases pay for it."
        )
        severity = "low"
        impact = None
        fill = max(math.ceil(c / p), 1)
        remedy = (
            f"Nothing to change for this sweep. If you mostly serve about {c} requests, "
            f"--pp-max-micro-batch-size {fill} gives every stage a micro-batch there."
        )
    else:
        severity = severity_of(impact, floor="medium")
        remedy = _remedy(ctx, cap, c)
    return Finding(
        id="pp-underfilled-slots",
        severity=severity,
        title=f"~{active} of {slots} micro-batch slots active at {c} requests with {p} stages",
        summary=summary,
        evidence=_evidence(rows, model=True),
        remedy=remedy,
        impact=impact,
    )


def _load(r: dict[str, Any]) -> int:
    return r["offered"] or max(round(r["running_est"]), 1)


def _current_cap(r: dict[str, Any]) -> int:
    """The per-slot size the phase ran with: the observed slot size."""
    return max(round(r["slot_req"] or 1), 1)


def _best_cap(
    ctx: RunAnalysis, rows: list[dict[str, Any]]
) -> tuple[int | None, dict[int, dict[str, Any]]]:
    """The single ``pp_max_micro_batch_size`` the serving model favours over the phases that
    could fill the pipeline (geometric mean of tok/s), and per phase: tok/s as packed (the
    observed slot size as cap reproduces the packing), tok/s with that cap, the gain and the
    share the packing costs. A static cap serves every load at once, so one value is chosen.
    """
    if not rows:
        return None, {}
    loads = {r["phase"]: _load(r) for r in rows}
    lengths = {r["phase"]: ctx.phase(r["phase"]) for r in rows}
    candidates = sorted(
        {max(math.ceil(c / ctx.pp), 1) for c in loads.values()} | {_current_cap(r) for r in rows}
    )

    def tok_s(cap: int, phase: int) -> float | None:
        span = lengths[phase]
        layout = ctx.with_layout(pp_max_micro_batch_size=cap)
        return ctx.model_tok_s(layout, loads[phase], span.get("input_len"), span.get("output_len"))

    table = {cap: {r["phase"]: tok_s(cap, r["phase"]) for r in rows} for cap in candidates}
    scored = {
        cap: math.fsum(math.log(v) for v in per.values() if v) / len(per)
        for cap, per in table.items()
        if all(per.values())
    }
    if not scored:
        return None, {}
    best = max(scored, key=lambda cap: (round(scored[cap], 9), -cap))
    plan = {}
    for r in rows:
        now = table.get(_current_cap(r), {}).get(r["phase"])
        fixed = table[best][r["phase"]]
        if now is None or fixed is None:
            continue
        plan[r["phase"]] = {
            "now_tok_s": now,
            "fixed_tok_s": fixed,
            "gain": fixed - now,
            "impact": max(0.0, 1.0 - now / fixed),
        }
    return best, plan


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
