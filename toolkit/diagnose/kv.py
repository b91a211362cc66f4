"""``kv-cache-pressure``: the KV pool ran full — requests were retracted or admission waited.

A retraction drops a running request's KV and recomputes it later, and SGLang then reserves
more per request (``new_token_ratio`` up), so fewer run at once. Under PP the pool is one per
stage and ``max_total_num_tokens`` is the MIN over stages: the stage with the most weights
(often the last, with the lm_head) sets it.
"""

from __future__ import annotations

import polars as pl

from toolkit.diagnose.finding import Finding
from toolkit.diagnose.queue_cost import queued_cost
from toolkit.diagnose.sizing import Sizing
from toolkit.diagnose.thresholds import KV_FULL, POOL_FULL, POOL_FULL_SHARE
from toolkit.run_analysis import RunAnalysis

__all__ = ["kv_cache_pressure", "pool_bound_phases"]


def kv_cache_pressure(ctx: RunAnalysis) -> Finding | None:
    """Retractions, or a pool at ≥ 95 % on a tenth of the decode lines."""
    kv = ctx.kv
    decode = kv.filter(pl.col("kind") == "decode")
    retracted = int(ctx.retracted["retracted_reqs"].fill_null(1).sum() or 0)
    events = ctx.retracted.height
    full_share = float((decode["token_usage"].fill_null(0.0) >= POOL_FULL).mean() or 0.0)
    if not events and full_share < POOL_FULL_SHARE:
        return None
    evidence = _per_phase(ctx).head(20)
    blocked = float(decode["blocked_by_tokens"].mean() or 0.0) if decode.height else 0.0
    peak = decode["token_usage"].max() if decode.height else None
    sized, sizing, phase = _impact(ctx)
    pool = ctx.derived["kv_pool_tokens"]
    parts = []
    if events:
        ratio = ctx.retracted["ratio_after"].max()
        parts.append(
            f"{events} retractions dropped {retracted} running requests for recompute"
            + (f" (new_token_ratio up to {ratio:.2f})" if ratio is not None else "")
        )
    if decode.height:
        parts.append(
            f"the pool{f' of {pool} tokens' if pool else ''} peaked at {peak or 0:.0%} and was "
            f"≥ {POOL_FULL:.0%} full on {full_share:.0%} of decode lines, with requests waiting on "
            f"{blocked:.0%}"
        )
    summary = "; ".join(parts).capitalize() + "."
    if ctx.pp > 1:
        summary += (
            " Under PP each stage has its own pool and the heaviest stage sizes them all "
            "(MIN over stages)."
        )
    summary += sizing
    if sized is None:
        summary += (
            " Its cost is not sized: no phase shows requests waiting on the full pool long "
            "enough to compare."
        )
    fields = sized.fields() if sized is not None else {"severity": "info"}
    return Finding(
        id="kv-cache-pressure",
        title=(
            f"KV pool full: {events} retractions, ≥ {POOL_FULL:.0%} on {full_share:.0%} of "
            "decode lines"
        ),
        summary=summary,
        evidence=evidence,
        remedy=(
            "More KV per stage: --mem-fraction-static (higher), --kv-cache-dtype fp8_e5m2, a "
            "lower --max-running-requests so admission stops before the pool is full; under PP, "
            "fewer layers on the heaviest stage (SGLANG_PP_LAYER_PARTITION)."
        ),
        phase=phase,
        **fields,
    )


def _per_phase(ctx: RunAnalysis) -> pl.DataFrame:
    kv = ctx.kv.filter(pl.col("kind") == "decode")
    schema = {
        "phase": pl.Int64,
        "decode_lines": pl.UInt32,
        "usage_median": pl.Float64,
        "usage_peak": pl.Float64,
        "full_lines": pl.UInt32,
        "blocked_lines": pl.UInt32,
        "retracted_reqs": pl.Int64,
    }
    if not kv.height or not ctx.phases.height:
        return pl.DataFrame(schema=schema)
    tagged = kv.sort("ts").join_asof(
        ctx.phases.select("start", "phase").sort("start"), left_on="ts", right_on="start"
    )
    out = (
        tagged.group_by("phase")
        .agg(
            decode_lines=pl.len(),
            usage_median=pl.col("token_usage").median(),
            usage_peak=pl.col("token_usage").max(),
            full_lines=(pl.col("token_usage") >= POOL_FULL).sum(),
            blocked_lines=pl.col("blocked_by_tokens").sum(),
            retracted_reqs=pl.col("retracted").sum(),
        )
        .sort("phase")
    )
    return out.cast(schema)


def pool_bound_phases(ctx: RunAnalysis) -> list[int]:
    """Phases whose pace the KV pool sets rather than the batch: a median token usage of at
    least ``KV_FULL``, or retractions."""
    per = _per_phase(ctx)
    bound = (pl.col("usage_median") >= KV_FULL) | (pl.col("retracted_reqs") > 0)
    return [int(p) for p in per.filter(bound)["phase"].drop_nulls().to_list()]


def _impact(ctx: RunAnalysis) -> tuple[Sizing | None, str, int | None]:
    """The cost of requests waiting on a full pool, in the worst such phase (``queued_cost``
    with the pool unlimited): share, basis, the sentence that sizes it, and the phase.

    A phase counts when some of its decode lines show requests waiting on a full pool. Its
    running requests are the time-weighted mean over the whole phase, not its steady peak: a
    full pool holds fewer at a time as contexts grow, retracts some, and leaves the queued
    ones to run after the others finish.
    """
    worst: tuple[Sizing | None, str, int | None] = (None, "", None)
    pressed = _per_phase(ctx).filter(pl.col("blocked_lines") > 0)["phase"].to_list()
    for phase in pressed:
        lines = ctx.occupancy.filter(pl.col("phase") == phase).sort("ts")
        if lines.height < 2:
            continue
        seconds = (lines["ts"].diff().dt.total_milliseconds() / 1000.0).fill_null(0.0)
        weights = seconds.to_list()
        values = lines["running_est"].to_list()
        pairs = [(w, v) for w, v in zip(weights, values, strict=True) if v is not None and w > 0]
        total = sum(w for w, _ in pairs)
        if total <= 0:
            continue
        running = sum(w * v for w, v in pairs) / total
        queued = lines["queue_req"].fill_null(0).cast(pl.Float64)
        peak = float((lines["running_est"].fill_null(0.0) + queued).max() or 0.0)
        offered = ctx.phase(phase).get("offered") or max(round(peak), 1)
        sized, text = queued_cost(ctx, running, offered, {"max_total_num_tokens": None}, phase)
        if worst[0] is None or sized.impact > worst[0].impact:
            worst = (sized, text, phase)
    return worst
