"""Admission rules: ``running-cap`` (a limit holds requests in the queue) and ``queue-backlog``.

Requests wait (``#queue-req`` > 0 through a phase) for one of four reasons, checked in this
order, the order in which SGLang's admission runs out of budget:

* ``max_total_num_tokens``: the KV pool is (nearly) full;
* ``max_running_requests``: the request rows are all taken (under PP also the auto per-slot
  cap ``max_running_requests // pp_size``);
* ``pp_max_micro_batch_size``: every slot is at its per-slot cap;
* ``chunked_prefill_size``: each prefill pass fills its token budget, so admission is bounded
  by the chunk per turn.

``running-cap`` names the binding one; when none binds the queue is ``queue-backlog``: the
offered load is more than the layout serves.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from toolkit.analyze.stages import reference_lines
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.queue_cost import queued_cost, queued_phases
from toolkit.diagnose.thresholds import (
    KV_FULL,
    NEAR_CAP,
)
from toolkit.run_analysis import RunAnalysis

__all__ = ["binding_limits", "queue_backlog", "running_cap"]


LIMITS = ("max_total_num_tokens", "max_running_requests", "pp_max_micro_batch_size",
          "chunked_prefill_size")  # fmt: skip


def binding_limits(ctx: RunAnalysis) -> list[dict[str, Any]]:
    """Per queued phase: its numbers and the limit that binds (None when none does).

    A phase is queued when at least ``QUEUED_SHARE`` of its decode lines show ``#queue-req``
    > 0. A decode line closes a fixed number of decode steps (``--decode-log-interval``), so
    that share is the share of the phase's steps taken with requests waiting; whole-second
    timestamps are too coarse to weigh the lines by time. The median of ``#queue-req`` is no
    test: when the offered load is up to twice what runs, the second wave waits while the
    first runs and the queue holds for about half the lines, so the median falls on either
    side of 1 with a warm-up line or a sparser log. The burst that opens a phase queues only
    through its first prefill passes, a few lines. ``queue_req`` is the median of the lines
    with a queue: how many wait while any do.
    """
    queued = queued_phases(ctx)
    if not queued.height:
        return []
    summary = {r["phase"]: r for r in ctx.phase_summary.iter_rows(named=True)}
    out = []
    for q in queued.iter_rows(named=True):
        s = summary.get(q["phase"])
        if s is None or s["running_est"] is None:
            continue
        out.append({**s, **q, "limit": _binder(ctx, s, q)})
    return out


def _binder(ctx: RunAnalysis, s: dict[str, Any], q: dict[str, Any]) -> str | None:
    d = ctx.derived
    if (s["token_usage"] or 0.0) >= KV_FULL:
        return "max_total_num_tokens"
    mrr = d["resolved_max_running_requests"]
    if mrr and s["running_est"] >= NEAR_CAP * mrr:
        return "max_running_requests"
    cap = d["per_slot_cap"]
    if (
        ctx.pp > 1
        and cap
        and (s["slot_req_max"] or 0) >= cap
        and (s["active_slots_est"] or 0) >= ctx.slots - 0.5
    ):
        return "pp_max_micro_batch_size"
    chunk = d["resolved_chunked_prefill_size"]
    if chunk and chunk > 0 and _chunk_bound(ctx, q["phase"], chunk):
        return "chunked_prefill_size"
    return None


def _chunk_bound(ctx: RunAnalysis, phase: int, chunk: int) -> bool:
    """Most prefill passes of the phase filled the chunk budget."""
    span = ctx.phase(phase)
    if not span:
        return False
    prefill = reference_lines(ctx.batches, "prefill").filter(
        pl.col("ts").is_between(span["start"], span["end"])
    )
    if prefill.height < 3:
        return False
    return float((prefill["new_token"].fill_null(0) >= chunk).mean() or 0.0) >= 0.5


def _relaxed(ctx: RunAnalysis, limit: str, offered: int) -> dict[str, Any]:
    """The launch with ``limit`` raised far enough for ``offered`` requests, and its flag."""
    lay = ctx.layout
    if limit == "max_total_num_tokens":
        return {"max_total_num_tokens": None}
    if limit == "max_running_requests":
        changes: dict[str, Any] = {"max_running_requests": max(offered, 1)}
        if ctx.pp > 1 and lay.pp_max_micro_batch_size is None:
            changes["pp_max_micro_batch_size"] = max(math.ceil(offered / ctx.pp), 1)
        return changes
    if limit == "pp_max_micro_batch_size":
        return {"pp_max_micro_batch_size": max(math.ceil(offered / ctx.slots), 1)}
    return {"chunked_prefill_size": 2 * lay.chunked_prefill_size}


def running_cap(ctx: RunAnalysis) -> Finding | None:
    """Requests wait although the GPUs could run them: name the limit that binds."""
    # A full KV pool is kv-cache-pressure's to report: one cause, one finding.
    rows = [r for r in binding_limits(ctx) if r["limit"] not in (None, "max_total_num_tokens")]
    if not rows:
        return None
    best: dict[str, Any] | None = None
    for r in rows:
        offered = r["offered"] or round(r["running_est"] + r["queue_req"])
        relaxed = _relaxed(ctx, r["limit"], offered)
        sized, text = queued_cost(ctx, r["running_est"], offered, relaxed, r["phase"])
        r.update(offered_c=offered, sized=sized, sizing=text)
        if best is None or sized.impact > best["sized"].impact:
            best = r
    assert best is not None
    limit = best["limit"]
    detail = _detail(ctx, best)
    summary = (
        f"{best['offered_c']} requests offered, but only ~{best['running_est']:.0f} run while "
        f"~{best['queue_req']:.0f} wait in the queue: {limit} binds ({detail})." + best["sizing"]
    )
    return Finding(
        id="running-cap",
        title=f"{limit} holds ~{best['queue_req']:.0f} requests in the queue at "
        f"{best['offered_c']} offered",
        summary=summary,
        evidence=_evidence(rows),
        remedy=_remedy(ctx, limit, best["offered_c"]),
        phase=best["phase"],
        **best["sized"].fields(),
    )


def _detail(ctx: RunAnalysis, r: dict[str, Any]) -> str:
    d = ctx.derived
    if r["limit"] == "max_total_num_tokens":
        return f"the KV pool of {d['kv_pool_tokens']} tokens is {r['token_usage']:.0%} full"
    if r["limit"] == "max_running_requests":
        text = f"max_running_requests={d['resolved_max_running_requests']}"
        if ctx.pp > 1 and ctx.layout.pp_max_micro_batch_size is None:
            mrr, cap = d["resolved_max_running_requests"], d["per_slot_cap"]
            text += f", auto per-slot cap {mrr}//{ctx.pp} = {cap}"
        return text
    if r["limit"] == "pp_max_micro_batch_size":
        return f"all {ctx.slots} slots hold their cap of {d['per_slot_cap']}"
    return f"each prefill pass fills the {d['resolved_chunked_prefill_size']}-token chunk budget"


def _remedy(ctx: RunAnalysis, limit: str, offered: int) -> str:
    if limit == "max_total_num_tokens":
        return (
            "More KV: --mem-fraction-static (higher), --kv-cache-dtype fp8_e5m2, or fewer "
            "concurrent requests; under PP the pool is the MIN over stages, so move layers off "
            "the heaviest stage (SGLANG_PP_LAYER_PARTITION)."
        )
    if limit == "max_running_requests":
        text = f"--max-running-requests {max(offered, 1)} (or unset it: the default is ≥ 2048)"
        if ctx.pp > 1:
            text += (
                f"; under PP also --pp-max-micro-batch-size {math.ceil(offered / ctx.pp)} so the "
                "requests spread over the stages"
            )
        return text + "."
    if limit == "pp_max_micro_batch_size":
        return f"--pp-max-micro-batch-size {math.ceil(offered / ctx.slots)} (per-slot cap)."
    return (
        f"--chunked-prefill-size {2 * ctx.layout.chunked_prefill_size} (a larger prefill "
        "budget per turn), or --max-prefill-tokens to match."
    )


def _evidence(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "phase": r["phase"],
                "offered": r["offered"],
                "running_est": round(r["running_est"], 1),
                "queue_req": r["queue_req"],
                "queued_share": round(r["queued_share"], 2),
                "token_usage": r["token_usage"],
                "slot_req_max": r["slot_req_max"],
                "active_slots_est": None
                if r["active_slots_est"] is None
                else round(r["active_slots_est"], 1),
                "limit": r["limit"] or "none found",
            }
            for r in rows[:20]
        ],
        schema={
            "phase": pl.Int64,
            "offered": pl.Int64,
            "running_est": pl.Float64,
            "queue_req": pl.Float64,
            "queued_share": pl.Float64,
            "token_usage": pl.Float64,
            "slot_req_max": pl.Int64,
            "active_slots_est": pl.Float64,
            "limit": pl.String,
        },
        orient="row",
    )


def queue_backlog(ctx: RunAnalysis) -> Finding | None:
    """Requests wait through a phase and no configured limit explains it: more load was
    offered than the layout serves."""
    rows = [r for r in binding_limits(ctx) if r["limit"] is None]
    if not rows:
        return None
    worst = max(rows, key=lambda r: r["queue_req"])
    ttft = _ttft(ctx, worst["offered"])
    summary = (
        f"~{worst['queue_req']:.0f} requests wait through phase {worst['phase']} "
        f"(queue on {worst['queued_share']:.0%} of its decode lines) while ~"
        f"{worst['running_est']:.0f} run, with the KV pool {worst['token_usage'] or 0:.0%} full "
        "and no request cap reached: the layout is saturated, requests pay in time to first "
        "token."
    )
    if ttft is not None:
        summary += f" Median TTFT there: {ttft:.0f} ms."
    summary += (
        " No setting of this server recovers throughput here: the remedy is capacity, so this "
        "is a note on latency, not a fault."
    )
    return Finding(
        id="queue-backlog",
        severity="info",
        title=f"~{worst['queue_req']:.0f} requests queue with no configured limit reached",
        summary=summary,
        evidence=_evidence(rows),
        remedy=(
            "Serve less load per server (add replicas, --dp-size), or a layout with more "
            "throughput; a rate-limited benchmark shows the latency you would serve at."
        ),
    )


def _ttft(ctx: RunAnalysis, offered: int | None) -> float | None:
    if ctx.bench is None or offered is None or "ttft_median_ms" not in ctx.bench.columns:
        return None
    rows = ctx.bench.filter(pl.col("concurrency") == offered)
    value = rows["ttft_median_ms"].median() if rows.height else None
    return float(value) if isinstance(value, int | float) else None
