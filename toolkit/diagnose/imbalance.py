"""``stage-imbalance``: one stage is busier than the others, and with a full pipeline it sets
the round.

The busy share of each stage comes from the GPU trace (``sm_active`` preferred to ``util_pct``,
which counts a NCCL kernel waiting for its peer as busy), else SGLang's per-rank device time in
``/metrics`` or the log's ``fwd occupancy`` (``RunAnalysis.busy``); without any, the layer split
of the run's model. The remedy is a layer split (``SGLANG_PP_LAYER_PARTITION``) and its impact
is what that split recovers where every stage has work: the slowest stage's step after the
move against now, sized two ways where the run allows: from the measured busy shares (each
stage's time scales with its layers) and by the serving model under every plausible variant of
its constants. A pipeline that was never full loses nothing to the imbalance yet: ``info``.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from toolkit.analyze.config import layer_partition_of
from toolkit.analyze.model import StageClock, layer_partition
from toolkit.analyze.model.ranges import plausible_hop
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.noise import model_range
from toolkit.diagnose.profiled import has_profile, profiled_imbalance
from toolkit.diagnose.sizing import Sizing, spread
from toolkit.diagnose.slots import SLOT_TOLERANCE, certain_busy, load_of_row, measured_round
from toolkit.diagnose.thresholds import IMBALANCE, MIN_NOISE
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["split_source", "stage_imbalance"]


def _filled(ctx: RunAnalysis) -> list[dict[str, Any]]:
    """Phases where enough requests ran to give every stage a micro-batch and they did."""
    out = []
    for r in ctx.phase_summary.iter_rows(named=True):
        active = r["active_slots_est"]
        if active is not None and math.isfinite(active) and active >= ctx.pp - SLOT_TOLERANCE:
            out.append(r)
    return out


def stage_imbalance(ctx: RunAnalysis) -> Finding | None:
    """One stage is busier than the others: with a full pipeline it sets the pace."""
    if ctx.pp < 2:
        return None
    if has_profile(ctx):  # the traces measure each stage's work: they decide
        return profiled_imbalance(ctx, lambda works: _profiled_split(ctx, works))
    full = _filled(ctx)
    busy = _busy_when_full(ctx, [r["phase"] for r in full]) if full else None
    if busy is None:
        busy = ctx.busy
    measure = "busy_pct" if busy["busy_pct"].null_count() < busy.height else "fwd_occupancy_pct"
    values = busy.filter(pl.col(measure).is_not_null())
    if values.height < 2:
        return _split_imbalance(ctx, full)
    mean = float(values[measure].mean() or 0.0)
    ranked = values.sort(measure, descending=True)
    top, low = ranked.row(0, named=True), ranked.row(-1, named=True)
    if mean <= 0 or top[measure] / mean < IMBALANCE:
        return None
    ratio = top[measure] / mean
    metric = values["metric"][0]
    shares = {int(r["pp"]): float(r[measure]) for r in values.iter_rows(named=True)}
    fullest = max(full, key=load_of_row) if full else None
    if fullest is not None:
        shares = _phase_shares(ctx, fullest["phase"]) or shares
    slots = float(fullest["active_slots_est"] or ctx.pp) if fullest is not None else ctx.pp
    measured = _measured_split(ctx, shares, slots, _hop_share(ctx, fullest))
    partition = measured[0] if measured else _rebalanced(ctx, top["pp"], low["pp"])
    text = ",".join(map(str, partition)) if partition else None
    sized: Sizing | None = None
    if full and partition:
        where = ctx.load_of(max(full, key=load_of_row)["phase"])
        sized = _sized(ctx, full, partition, measured, where, metric)
    if sized is not None:
        when = (
            f"With the pipeline full the slowest stage sets the round; "
            f"SGLANG_PP_LAYER_PARTITION={text} recovers {sized.words()}."
        )
    elif full:
        when = "With the pipeline full the slowest stage sets the round, but no split to try "
        when += "is known (the model's layer count is not), so the gain is not sized."
    else:
        when = (
            "The pipeline was never full, so the slowest stage did not set the pace at these "
            "loads: a new split recovers nothing here yet; it will matter once the slots are "
            "filled."
        )
    remedy = (
        f"SGLANG_PP_LAYER_PARTITION={text} (fewer layers on stage {top['pp']})"
        if text
        else "SGLANG_PP_LAYER_PARTITION with fewer layers on the busiest stage"
    )
    fields: dict[str, Any] = sized.fields() if sized is not None else {"severity": "info"}
    return Finding(
        id="stage-imbalance",
        title=f"Stage {top['pp']} is {ratio:.2f}× as busy as the mean stage",
        summary=(
            f"While decoding{' with the pipeline full' if full else ''}, stage {top['pp']} ran "
            f"{top[measure]:.0f} % busy against a mean of {mean:.0f} % ({metric}). "
            f"{_split_text(ctx)} {when}"
        ),
        evidence=_with_memory(
            ctx,
            values.select(
                "pp", "gpus", "busy_pct", "samples", "fwd_occupancy_pct", "metric", "vs_mean"
            ),
        )
        .with_columns(pl.col("busy_pct", "fwd_occupancy_pct", "vs_mean").round(2))
        .head(20),
        remedy=remedy + "; the first stage also holds the embedding, so measure after moving.",
        **fields,
    )


def _sized(
    ctx: RunAnalysis,
    full: list[dict[str, Any]],
    partition: tuple[int, ...],
    measured: tuple[tuple[int, ...], float, float] | None,
    where: str,
    metric: str,
) -> Sizing | None:
    """The split's gain at the fullest phase: from the measured busy shares when the run has
    them (``_measured_split``: between the last stage's excess fixed and all of its time moving
    with its layers, each end within the shares' noise), else by the serving model under every
    plausible variant of its constants."""
    if measured is not None:
        _, low, high = measured
        return spread(
            (low + high) / 2,
            [max(0.0, low - MIN_NOISE), high + MIN_NOISE],
            basis="measured",
            where=where,
            rests_on=(
                f"busy shares ({metric}) scaled by each stage's layers, the last stage's "
                "excess over the others' per-layer time fixed (lm_head) or moving with them",
            ),
        )
    row = max(full, key=load_of_row)
    modelled = _partition_gain(ctx, row, partition)
    if modelled is None:
        return None
    variants = model_range(ctx, lambda params: _partition_gain(ctx, row, partition, params))
    return spread(
        modelled,
        [modelled, *variants],
        basis="modelled",
        where=where,
        rests_on=("the serving model over its plausible constants",),
    )


def _phase_shares(ctx: RunAnalysis, phase: int) -> dict[int, float]:
    """Each stage's trace busy share (%) in one phase, when every stage has one there."""
    by_phase = certain_busy(ctx)
    if by_phase is None:
        return {}
    rows = by_phase.filter(pl.col("phase") == phase).drop_nulls("busy_pct")
    shares = {int(r["pp"]): float(r["busy_pct"]) for r in rows.iter_rows(named=True)}
    return shares if sorted(shares) == list(range(ctx.pp)) else {}


def _hop_share(ctx: RunAnalysis, row: dict[str, Any] | None) -> tuple[float, float]:
    """The share (%) of the phase's round its micro-batch's hops round the ring take, at the
    ends of the plausible range of a hop (the model's fitted value counts as both ends)."""
    rnd = measured_round(ctx, row) if row is not None else None
    if not rnd or ctx.fit is None:
        return 0.0, 0.0
    if "hop_s" in ctx.fit.fitted:
        hop = ctx.fit.params.hardware.hop_s
        return (100 * ctx.pp * hop / rnd,) * 2
    low, high = plausible_hop(ctx.machine)
    return 100 * ctx.pp * low / rnd, 100 * ctx.pp * high / rnd


def _measured_split(
    ctx: RunAnalysis, shares: dict[int, float], slots: float, hops: tuple[float, float]
) -> tuple[tuple[int, ...], float, float] | None:
    """The layer split the measured busy shares call for, and its gain at the two ends of what
    the shares allow: the last stage's excess over the other stages' time per layer fixed (its
    lm_head does not move: the low end), or all of every stage's time moving with its layers
    (the high end). A busy share is a stage's time over the round, so the round shortens by
    the slowest stage's share less the slowest share after the move, and that difference is
    the impact (``1 − round_after/round_now``); the rest of the round, idle on every stage,
    stays. The round never gets shorter than one micro-batch's trip: every stage's share over
    the ``slots`` micro-batches of a round, plus its ``hops`` (share % at a plausible hop's
    low and high end). Layers move one at a time from the
    slowest stage to the fastest while that shortens the slowest, under the low end's
    arithmetic. None without the current split's layer counts or a gain."""
    layers = ctx.params.model.layers if ctx.params is not None else None
    if layers is None or sorted(shares) != list(range(ctx.pp)):
        return None
    try:
        now = layer_partition(layers, ctx.pp, ctx.layout.layer_partition)
    except ToolkitError:
        return None
    times = [shares[k] for k in range(ctx.pp)]
    rates = [t / n for t, n in zip(times, now, strict=True)]
    others = sum(rates[:-1]) / (ctx.pp - 1)
    fixed = [0.0] * (ctx.pp - 1) + [max(0.0, times[-1] - others * now[-1])]
    kept = [*rates[:-1], min(rates[-1], others)]
    split = _greedy(list(now), kept, fixed)
    if tuple(split) == tuple(now):
        return None
    before = max(times)
    trip = sum(times) / max(slots, 1.0)
    after_low = max(
        max(f + r * n for f, r, n in zip(fixed, kept, split, strict=True)), trip + hops[1]
    )
    after_high = max(max(r * n for r, n in zip(rates, split, strict=True)), trip + hops[0])
    low = (before - after_low) / 100
    high = (before - after_high) / 100
    if max(low, high) <= 0:
        return None
    return tuple(split), max(0.0, min(low, high)), max(low, high)


def _profiled_split(ctx: RunAnalysis, works: dict[int, float]) -> tuple[int, ...] | None:
    """The layer split the stages' profiled work per iteration calls for (each stage's work
    moving with its layers), or None without the layer counts or a better split."""
    layers = ctx.params.model.layers if ctx.params is not None else None
    if layers is None or sorted(works) != list(range(ctx.pp)):
        return None
    try:
        now = layer_partition(layers, ctx.pp, ctx.layout.layer_partition)
    except ToolkitError:
        return None
    rates = [works[k] / n for k, n in enumerate(now)]
    split = _greedy(list(now), rates, [0.0] * ctx.pp)
    return tuple(split) if tuple(split) != tuple(now) else None


def _greedy(counts: list[int], rates: list[float], fixed: list[float]) -> list[int]:
    """Move one layer at a time from the slowest stage to the one that is fastest after taking
    it, while the slowest stage's time shrinks; stages keep at least one layer."""

    def time(k: int, n: int) -> float:
        return fixed[k] + rates[k] * n

    for _ in range(sum(counts)):
        slow = max(range(len(counts)), key=lambda k: time(k, counts[k]))
        fast = min(range(len(counts)), key=lambda k: time(k, counts[k] + 1))
        if slow == fast or counts[slow] <= 1:
            break
        before = max(time(k, counts[k]) for k in range(len(counts)))
        counts[slow] -= 1
        counts[fast] += 1
        after = max(time(k, counts[k]) for k in range(len(counts)))
        if after >= before - 1e-9:
            counts[slow] += 1
            counts[fast] -= 1
            break
    return counts


def _split_text(ctx: RunAnalysis) -> str:
    """How the layers are split, in words: as set or measured, else SGLang's default."""
    split = ctx.layout.layer_partition
    if split is None:
        return (
            "The last stage also holds the lm_head, and the default partition gives the last "
            "stages the extra layers."
        )
    return (
        f"The layers are split {','.join(map(str, split))} ({split_source(ctx)}); the last "
        "stage also holds the lm_head."
    )


def split_source(ctx: RunAnalysis) -> str | None:
    """Where the layout's layer split comes from: the launch command, the stages' KV pools at
    startup (``RunAnalysis.layout``), or None (SGLang's default split)."""
    if ctx.layout.layer_partition is None:
        return None
    command = layer_partition_of(ctx.command[0]) if ctx.command else None
    return "launch command" if command is not None else "KV pool per stage at startup"


def _with_memory(ctx: RunAnalysis, busy: pl.DataFrame) -> pl.DataFrame:
    """``busy`` with the weights each stage loaded at startup (``weight_gb``), when logged."""
    memory = ctx.stage_memory.select(pl.col("pp").cast(busy.schema["pp"]), "weight_gb")
    return busy.join(memory, on="pp", how="left")


def _split_imbalance(ctx: RunAnalysis, full: list[dict[str, Any]]) -> Finding | None:
    """Without a measure of each stage's busy time: the layer split of the run's model (the
    last stage also holds the lm_head) says how much longer the slowest stage's step is. It
    costs only when the pipeline was full, and the gain of the split to try is modelled."""
    if ctx.params is None or not full:
        return None
    r = full[0]
    b = max(round(r["slot_req"] or 1), 1)
    try:
        clock = StageClock(ctx.layout, ctx.params)
    except ToolkitError:
        return None
    times = [clock.decode(k, b) for k in range(ctx.pp)]
    mean, top = sum(times) / len(times), max(times)
    if top <= 0 or top / mean < IMBALANCE:
        return None
    slowest = times.index(top)
    counts = [s.layers for s in clock.stages]
    partition = _rebalanced(ctx, slowest, times.index(min(times)))
    text = ",".join(map(str, partition)) if partition else None
    evidence = pl.DataFrame(
        {
            "pp": list(range(ctx.pp)),
            "layers": counts,
            "lm_head": [k == ctx.pp - 1 for k in range(ctx.pp)],
            "step_ms": [round(x * 1e3, 2) for x in times],
        }
    )
    where = ctx.load_of(max(full, key=load_of_row)["phase"])
    sized = _sized(ctx, full, partition, None, where, "model") if partition else None
    gain = (
        f" SGLANG_PP_LAYER_PARTITION={text} recovers {sized.words()} by the serving model."
        if sized is not None
        else ""
    )
    fields: dict[str, Any] = sized.fields() if sized is not None else {"severity": "info"}
    if fields["severity"] == "high":
        fields["severity"] = "medium"  # from the layer split only: a lead to measure
    return Finding(
        id="stage-imbalance",
        title=f"Stage {slowest} holds the slowest step ({top / mean:.2f}× the mean stage)",
        summary=(
            f"No trace measures each stage's busy time, but the layer split of "
            f"{ctx.model.describe()} over {ctx.pp} stages ({','.join(map(str, counts))}, the "
            f"last with the lm_head) makes stage {slowest}'s step {top / mean:.2f}× the mean "
            "(assuming SGLang ≥ 0.5.6's split, which gives one extra layer to each of the last "
            f"stages; older releases give the whole remainder to the last).{gain} Measure the "
            "stages (a GPU trace, or /metrics per pp_rank) before moving layers."
        ),
        evidence=evidence,
        remedy=(
            f"SGLANG_PP_LAYER_PARTITION={text} (fewer layers on stage {slowest})"
            if text
            else "SGLANG_PP_LAYER_PARTITION with fewer layers on the slowest stage"
        ),
        **fields,
    )


def _rebalanced(ctx: RunAnalysis, busiest: int, idlest: int) -> tuple[int, ...] | None:
    """The partition to try: the even split when the run's (set or measured) is uneven; the
    remainder layers on the first stages when the last stage is the busiest (it also has the
    lm_head); else one layer moved from the busiest stage to the idlest."""
    if ctx.params is None:
        return None
    layers = ctx.params.model.layers
    try:
        default = layer_partition(layers, ctx.pp, ctx.layout.layer_partition)
    except ToolkitError:
        return None
    if ctx.layout.layer_partition is not None:
        # A split set or measured unevenly: the even one, before moving single layers.
        even = layer_partition(layers, ctx.pp)
        if busiest == ctx.pp - 1:
            even = tuple(sorted(even, reverse=True))
        if max(default) > max(even):
            return even
    elif busiest == ctx.pp - 1:
        moved = tuple(sorted(default, reverse=True))
        if moved != default:
            return moved
    counts = list(default)
    if counts[busiest] <= 1 or busiest == idlest:
        return None
    counts[busiest] -= 1
    counts[idlest] += 1
    return tuple(counts)


def _partition_gain(
    ctx: RunAnalysis,
    row: dict[str, Any],
    partition: tuple[int, ...],
    params: Any = None,
) -> float | None:
    """Share of the model's tok/s the current partition loses against ``partition`` in a
    phase (under ``params``, by default the run's fit)."""
    phase = ctx.phase(row["phase"])
    c = load_of_row(row)
    isl, osl = phase.get("input_len"), phase.get("output_len")
    packed = {}
    if row["slot_req"]:
        packed = {"pp_max_micro_batch_size": max(round(row["slot_req"]), 1)}
    now = ctx.model_tok_s(ctx.with_layout(**packed), c, isl, osl, params=params)
    moved = ctx.model_tok_s(
        ctx.with_layout(layer_partition=partition, **packed), c, isl, osl, params=params
    )
    if now is None or moved is None:
        return None
    return max(0.0, 1 - now / moved)


def _busy_when_full(ctx: RunAnalysis, phases: list[int]) -> pl.DataFrame | None:
    """Per stage busy over the phases with a full pipeline (trace only), ``STAGE_BUSY``-like."""
    by_phase = certain_busy(ctx)
    if by_phase is None or not by_phase.height:
        return None
    rows = by_phase.filter(pl.col("phase").is_in(phases))
    if not rows.height:
        return None
    per_stage = rows.group_by("pp").agg(
        pl.col("gpus").first(),
        pl.col("busy_pct").mean(),
        pl.col("samples").sum(),
        pl.col("metric").first(),
    )
    mean = per_stage["busy_pct"].mean()
    log = ctx.busy.select("pp", "fwd_occupancy_pct")
    return (
        per_stage.join(log, on="pp", how="left")
        .with_columns(vs_mean=pl.col("busy_pct") / mean if mean else pl.lit(None, pl.Float64))
        .sort("pp")
    )
