"""What a queue costs: the throughput all offered requests running would give, sized.

``queued_cost`` answers it the way the run allows: along the run's own sweep (how throughput
grows with load below the offered one), from rounds the run measured at the micro-batch size
all offered would run at, by the serving model with the limit relaxed, or by an assumed growth;
each with the range its assumptions span. ``queued_phases`` says which phases queued.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import polars as pl

from toolkit.analyze.effects import elasticity, round_at
from toolkit.analyze.model.admission import admission, occupancy_shape
from toolkit.analyze.model.spec import Workload
from toolkit.analyze.stages import reference_lines
from toolkit.diagnose.noise import model_range, throughput_noise
from toolkit.diagnose.sizing import Sizing, ratio, spread
from toolkit.diagnose.sizing import share as share_sized
from toolkit.diagnose.slots import measured_round
from toolkit.diagnose.thresholds import (
    ASSUMED_ELASTICITY,
    ASSUMED_MODEL_ERROR,
    ELASTICITY_FLOOR,
    MODEL_AGREEMENT,
    QUEUED_SHARE,
)
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["queued_cost", "queued_phases"]


def queued_phases(ctx: RunAnalysis) -> pl.DataFrame:
    """Per queued phase: its decode lines, the share with a queue and the median queue then."""
    waiting = pl.col("queue_req").fill_null(0) > 0
    return (
        ctx.occupancy.group_by("phase")
        .agg(
            lines=pl.len(),
            queued_share=waiting.mean(),
            queue_req=pl.col("queue_req").filter(waiting).cast(pl.Float64).median(),
        )
        .filter(pl.col("queued_share") >= QUEUED_SHARE)
        .sort("phase")
    )


def queued_cost(
    ctx: RunAnalysis, running: float, offered: int, relaxed: dict[str, Any], phase: int
) -> tuple[Sizing, str]:
    """What running all ``offered`` requests instead of ``running`` recovers, sized, and a
    sentence saying how.

    Measured when the run's own sweep shows how throughput grows with load below the offered
    one (elasticity ``e``: cost ``1 − (running/offered)^e``, ``e`` bounded by the noise of the
    two loads it comes from), or when another phase of the run measured the round at the
    micro-batch size all ``offered`` would run at (``_from_rounds``); else the serving model
    with the limit relaxed (``relaxed`` layout changes), when it reproduces the phase's
    measured throughput within ``MODEL_AGREEMENT``, under every plausible variant of its
    assumed constants; else assumed to grow between the square root of the load and in
    proportion to it (a decode round reads its weights once, so a bigger batch costs less
    than its size; prefill stalls the cap causes are not counted).
    """
    share = min(1.0, max(running, 1.0) / max(offered, 1))
    where = f"at {offered} requests"
    noise, noise_words = throughput_noise(ctx, phase)
    e = elasticity(ctx.throughput_curve, offered)
    if e is not None:
        low_e, high_e = _elasticity_range(ctx, offered, noise)
        # above the loads it measured a sweep may level off (a batch that outgrows its weight
        # reads turns compute-bound), down to ELASTICITY_FLOOR
        low_e = min(low_e, ELASTICITY_FLOOR)
        sized = spread(
            1 - share**e,
            [1 - share**low_e, 1 - share**high_e],
            basis="measured",
            where=where,
            rests_on=(
                f"sweep elasticity {low_e:.2f}–{high_e:.2f}, the low end for growth that levels "
                f"off above the loads measured (assumed)",
                noise_words,
            ),
        )
        return sized, (
            f" This run's sweep grows ×{2**e:.2f} per doubling of load below {offered} "
            f"requests, so all {offered} running would deliver ≈{1 / (1 - sized.impact):.2f}× "
            f"the throughput: the cap costs {sized.words()}."
        )
    span = ctx.phase(phase)
    isl, osl = span.get("input_len"), span.get("output_len")
    grown = _from_rounds(ctx, offered, relaxed, phase)
    if grown is not None:
        now, free, text = grown
        sized_rounds = ratio(
            now,
            free,
            basis="measured",
            where=where,
            now_noise=noise,
            after_noise=noise,
            rests_on=(noise_words, "rounds this run measured at that micro-batch size"),
        )
        if sized_rounds is not None:
            sized_rounds = sized_rounds.widened(
                ASSUMED_MODEL_ERROR,
                f"±{ASSUMED_MODEL_ERROR:.0%} for the admission replay and the round between "
                "measured sizes (assumed)",
            )
            return sized_rounds, text + f" The cap costs {sized_rounds.words()}."
    seen = _measured_tok_s(ctx, phase)

    def modelled(params: Any) -> float | None:
        now = ctx.model_tok_s(ctx.layout, max(round(running), 1), isl, osl, params=params)
        free = ctx.model_tok_s(ctx.with_layout(**relaxed), offered, isl, osl, params=params)
        return 1 - now / free if now and free else None

    now = ctx.model_tok_s(ctx.layout, max(round(running), 1), isl, osl)
    free = ctx.model_tok_s(ctx.with_layout(**relaxed), offered, isl, osl)
    agrees = now is not None and seen is not None and abs(now / seen - 1) <= MODEL_AGREEMENT
    central = modelled(ctx.params) if agrees else None
    if now and free and central is not None:
        sized = spread(
            max(0.0, central),
            model_range(ctx, modelled),
            basis="modelled",
            where=where,
            rests_on=("assumed constants over their plausible range",),
        ).widened(MODEL_AGREEMENT, f"model within ±{MODEL_AGREEMENT:.0%} of this phase")
        return sized, (
            f" The serving model expects ≈{free:.0f} tok/s with all of them running against "
            f"≈{now:.0f} tok/s now: the cap costs {sized.words()}."
        )
    model = ""
    if now and seen:
        model = (
            f" The serving model does not reproduce this phase (≈{now:.0f} tok/s modelled, "
            f"{seen:.0f} measured), so it does not size it."
        )
    sized = share_sized(
        1 - share**0.75,
        1 - share ** ASSUMED_ELASTICITY[0],
        1 - share ** ASSUMED_ELASTICITY[1],
        basis="assumed",
        where=where,
        rests_on=(
            f"assumed: throughput grows as load^{ASSUMED_ELASTICITY[0]}–"
            f"load^{ASSUMED_ELASTICITY[1]}",
        ),
    )
    return sized, (
        f"{model} Nothing in this run measures how throughput grows with load up to "
        f"{offered} requests, so it is assumed to grow between the square root of the load and "
        f"in proportion to it: the cap costs {sized.words()} (prefill stalls the cap causes "
        "not counted)."
    )


def _elasticity_range(ctx: RunAnalysis, offered: int, noise: float) -> tuple[float, float]:
    """The sweep's elasticity below ``offered``: its last two loads' throughputs moved by their
    noise in opposite directions (the lowest and highest slope they allow), the high end also
    the steepest pair of neighbouring loads below (growth may hold up as it did there)."""
    curve = ctx.throughput_curve
    loads = sorted(c for c in curve if 0 < c < offered and curve[c] > 0)
    out = []
    a, b = loads[-2], loads[-1]
    for sign in (-1, 1):
        hi = curve[b] * (1 + sign * noise)
        lo = curve[a] * (1 - sign * noise)
        out.append(math.log(hi / lo) / math.log(b / a))
    steepest = max(
        math.log(curve[y] / curve[x]) / math.log(y / x) for x, y in itertools.pairwise(loads)
    )
    low = min(1.0, max(0.0, min(out)))
    return low, min(1.0, max(0.0, *out, steepest))


def _from_rounds(
    ctx: RunAnalysis, offered: int, relaxed: dict[str, Any], phase: int
) -> tuple[float, float, str] | None:
    """The cost from rounds this run measured: all ``offered`` running against the phase.

    The admission replay of ``offered`` requests with the limit relaxed gives the micro-batch
    sizes they would run at; phases that queued nothing measured the round at the largest of
    them (``round_at``: that size, or between two measured sizes). With more filled slots
    than stages a round holds one pass of each, so it lengthens in proportion. A wave of
    ``offered`` then takes its prefill at the rate the phase's back-to-back prefill passes
    measured (``input throughput``) plus an output length of rounds, against the benchmark's
    output throughput of the phase; without a benchmark or a prefill rate both sides are
    decode rates (requests over the round). None when no phase measured that size.
    """
    span = ctx.phase(phase)
    isl, osl = span.get("input_len"), span.get("output_len")
    if not isinstance(isl, float) or not isinstance(osl, float):
        return None
    if not (math.isfinite(isl) and math.isfinite(osl) and isl >= 1 and osl >= 1):
        return None
    sizes = _replayed(ctx, relaxed, offered, isl, osl)
    if not sizes:
        return None
    queued = set(queued_phases(ctx)["phase"].to_list()) | {phase}
    points: dict[int, tuple[float, float]] = {}
    for r in ctx.phase_summary.iter_rows(named=True):
        took = measured_round(ctx, r) if r["phase"] not in queued and r["slot_req"] else None
        if took is not None:
            points[r["phase"]] = (float(r["slot_req"]), took)
    size = max(sizes)
    found = round_at(list(points.values()), size)
    if found is None:
        return None
    measured, rests_on = found
    rnd = measured * (max(1.0, len(sizes) / ctx.pp) if ctx.pp > 1 else 1.0)
    seen, rate = span.get("bench_tok_s"), _prefill_rate(ctx, phase)
    if isinstance(seen, float) and seen > 0 and rate:
        now: float | None = seen
        free = offered * osl / (offered * isl / rate + osl * rnd)
        what = f"prefill included: {offered}×{isl:.0f} tokens at the {rate:.0f} tok/s it ran at"
    else:
        now, free = _measured_tok_s(ctx, phase), offered / rnd
        what = "decode rates, prefill not counted"
    if now is None or free <= 0:
        return None
    unit = "micro-batch" if ctx.pp > 1 else "batch"
    used = sorted(k for k, (b, _) in points.items() if b in rests_on)
    named = ", ".join(f"{points[k][0]:g} {ctx.load_of(k)}" for k in used)
    shape = occupancy_shape(sizes)
    return (
        now,
        free,
        (
            f" This run measured the round at {unit} size{'s' if len(used) > 1 else ''} {named} "
            "(phases that queued nothing): "
            f"≈{measured * 1e3:.1f} ms at {size}, so all {offered} running ({shape} by the "
            f"admission replay) would deliver ≈{free:.0f} tok/s ({what}) against {now:.0f} "
            "measured."
        ),
    )


def _replayed(
    ctx: RunAnalysis, relaxed: dict[str, Any], offered: int, isl: float, osl: float
) -> list[int]:
    """The filled slot sizes of a burst of ``offered`` admitted with the ``relaxed`` layout
    (none when a request can never fit or the load is empty)."""
    try:
        load = Workload(offered, max(round(isl), 1), max(round(osl), 1))
        return [b for b in admission(ctx.with_layout(**relaxed), load, ctx.replay_model) if b]
    except (ToolkitError, ValueError, ZeroDivisionError):
        return []


def _prefill_rate(ctx: RunAnalysis, phase: int) -> float | None:
    """Prompt tokens a second of back-to-back prefill passes in a phase: the 90th percentile of
    its prefill lines' ``input throughput`` (a pass after a decode or a pause reports less)."""
    span = ctx.phase(phase)
    if not span:
        return None
    lines = reference_lines(ctx.batches, "prefill").filter(
        pl.col("ts").is_between(span["start"], span["end"])
    )
    rates = lines["input_tok_s"].drop_nulls() if "input_tok_s" in lines.columns else None
    if rates is None or rates.len() < 2:
        return None
    rate = rates.quantile(0.9)
    return float(rate) if isinstance(rate, float) and rate > 0 else None


def _measured_tok_s(ctx: RunAnalysis, phase: int) -> float | None:
    """The decode throughput a phase measured: its requests over its round (``measured_round``)."""
    rows = ctx.phase_summary.filter(pl.col("phase") == phase)
    if not rows.height:
        return None
    row = rows.row(0, named=True)
    rnd = measured_round(ctx, row)
    running = row.get("running_est")
    if rnd is None or not running or not math.isfinite(running):
        return None
    return running / rnd
