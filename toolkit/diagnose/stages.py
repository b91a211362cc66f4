"""Stage rules: ``pp-lockstep-logging`` (info), ``stage-desync``, ``stage-imbalance``,
``gpu-idle-bubbles``.

All PP stages print the same micro-batch at the same log ordinal by design (every stage runs the
same scheduler on the same requests): identical lines are the baseline and get an info note. Stages
that disagree at an ordinal scheduled different batches, a correctness bug. GPU busy per stage
comes from the GPU trace (``sm_active`` preferred over ``util_pct``, which counts a NCCL kernel
waiting for its peer as busy) or from the log's ``fwd occupancy``.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from toolkit.analyze.config import layer_partition_of
from toolkit.analyze.model import StageClock, Workload, layer_partition, predict
from toolkit.analyze.stages import desync_share
from toolkit.diagnose.finding import Finding, severity_of
from toolkit.diagnose.slots import SLOT_TOLERANCE, certain_busy
from toolkit.diagnose.thresholds import MIN_BUSY_SAMPLES
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "certain_busy",
    "gpu_idle_bubbles",
    "pp_lockstep_logging",
    "split_source",
    "stage_desync",
    "stage_imbalance",
]

_DESYNC_EVIDENCE = ["kind", "ordinal", "ts", "running_req_min", "running_req_max", "token_min",
                    "token_max", "spread_s"]  # fmt: skip
IMBALANCE = 1.15  # busiest stage over the mean that counts as imbalance
IDLE = 0.40  # idle share of a decoding GPU worth explaining
UNEXPLAINED = 0.15  # idle share beyond the model's that is a fault of its own


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
    partition = _rebalanced(ctx, top["pp"], low["pp"])
    text = ",".join(map(str, partition)) if partition else None
    impact: float | None = None
    basis: str | None = None
    if full:
        # With every stage holding a micro-batch the slowest stage sets the round: the others
        # wait the difference, a share 1 − mean/max of each round.
        impact, basis = max(0.0, 1 - mean / float(top[measure])), "measured"
        when = (
            f"With the pipeline full the slowest stage sets the round: the others wait, "
            f"{impact:.0%} of each round on average."
        )
        gains = [_partition_gain(ctx, r, partition) for r in full] if partition else []
        known = [g for g in gains if g is not None]
        if known:
            when += (
                f" The serving model expects +{max(known):.0%} throughput with "
                f"SGLANG_PP_LAYER_PARTITION={text}."
            )
    else:
        when = (
            "The pipeline was never full, so the slowest stage did not yet set the pace; it "
            "will once the slots are filled."
        )
    remedy = (
        f"SGLANG_PP_LAYER_PARTITION={text} (fewer layers on stage {top['pp']})"
        if text
        else "SGLANG_PP_LAYER_PARTITION with fewer layers on the busiest stage"
    )
    return Finding(
        id="stage-imbalance",
        severity=severity_of(impact) if full else "low",
        title=f"Stage {top['pp']} is {ratio:.2f}× as busy as the mean stage",
        summary=(
            f"While decoding{' with the pipeline full' if full else ''}, stage {top['pp']} ran "
            f"{top[measure]:.0f} % busy against a mean of {mean:.0f} % ({values['metric'][0]}). "
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
        impact=impact,
        basis=basis,
    )


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
    last stage also holds the lm_head) says how much longer the slowest stage's step is.
    It costs only when the pipeline was full."""
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
    impact = 1 - mean / top
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
    # Modelled from the layer split only: a lead to measure, never proof enough for high.
    severity = "medium" if severity_of(impact) == "high" else severity_of(impact)
    return Finding(
        id="stage-imbalance",
        severity=severity,
        title=f"Stage {slowest} holds the slowest step ({top / mean:.2f}× the mean stage)",
        summary=(
            f"No trace measures each stage's busy time, but the layer split of "
            f"{ctx.model.describe()} over {ctx.pp} stages ({','.join(map(str, counts))}, the "
            f"last with the lm_head) makes stage {slowest}'s step {top / mean:.2f}× the mean. "
            f"With the pipeline full the slowest stage sets the round: the others wait "
            f"{impact:.0%} of it (assuming SGLang ≥ 0.5.6's split, which gives one extra layer "
            "to each of the last stages; older releases give the whole remainder to the last)."
        ),
        evidence=evidence,
        remedy=(
            f"SGLANG_PP_LAYER_PARTITION={text} (fewer layers on stage {slowest})"
            if text
            else "SGLANG_PP_LAYER_PARTITION with fewer layers on the slowest stage"
        ),
        impact=impact,
        basis="modelled",
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
    ctx: RunAnalysis, row: dict[str, Any], partition: tuple[int, ...]
) -> float | None:
    """Share of model tok/s the current partition loses against ``partition`` in a phase."""
    phase = ctx.phase(row["phase"])
    c = row["offered"] or max(round(row["running_est"]), 1)
    isl, osl = phase.get("input_len"), phase.get("output_len")
    packed = {}
    if row["slot_req"]:
        packed = {"pp_max_micro_batch_size": max(round(row["slot_req"]), 1)}
    now = ctx.model_tok_s(ctx.with_layout(**packed), c, isl, osl)
    moved = ctx.model_tok_s(ctx.with_layout(layer_partition=partition, **packed), c, isl, osl)
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
    unexplained = [r for r in idle if (r["unexplained"] or 0.0) >= UNEXPLAINED]
    if unexplained and not causes:
        worst = max(unexplained, key=lambda r: r["unexplained"])
        busy, expected_busy = worst["busy"], 1 - worst["expected_idle"]
        impact = max(0.0, 1 - busy / expected_busy) if expected_busy > 0 else None
        return Finding(
            id="gpu-idle-bubbles",
            severity=severity_of(impact, floor="medium"),
            title=f"GPUs idle {worst['idle']:.0%} while decoding at {worst['offered']} requests",
            summary=(
                f"In phase {worst['phase']} the GPUs were busy {busy:.0%} of the time "
                f"({worst['metric']}), while the occupancy (~{worst['active_slots_est']:.0f} "
                f"active slots) lets the serving model expect {expected_busy:.0%}: "
                f"{worst['unexplained']:.0%} of each GPU's time is bubbles the slots do not "
                "explain (communication fences, a CPU-bound loop, or slow kernels), and no "
                f"finding here accounts for them.{unsure_note}"
            ),
            evidence=evidence,
            remedy=(
                "Profile one stage (POST /start_profile): long recv_requests / "
                "process_batch_result point at the CPU loop, SendRecv kernels before run_batch "
                "at communication fences; SGLANG_PP_COMM_OVERLAP=1 (≥0.5.23) moves PP "
                "communication off the compute stream."
            ),
            impact=impact,
            basis="modelled",
            phase=worst["phase"],
        )
    worst = max(idle, key=lambda r: r["idle"])
    expected = worst["expected_idle"]
    model = (
        f"; with ~{worst['active_slots_est']:.0f} active slots for {ctx.pp} stages the serving "
        f"model expects {expected:.0%} idle"
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
            f"In phase {worst['phase']} the GPUs were busy {worst['busy']:.0%} "
            f"({worst['metric']}){model}. {why}{unsure_note}"
        ),
        evidence=evidence,
        remedy="Act on the findings that explain the idle time, then look again.",
        phase=worst["phase"],
    )


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


def _expected_busy(ctx: RunAnalysis, s: dict[str, Any], offered: int) -> float | None:
    """Mean stage busy share the serving model expects for the phase as packed."""
    if ctx.params is None:
        return None
    phase = ctx.phase(s["phase"])
    isl = round(phase.get("input_len") or 1000)
    osl = round(phase.get("output_len") or isl)
    layout = ctx.layout
    if ctx.pp > 1 and s["slot_req"]:
        layout = ctx.with_layout(pp_max_micro_batch_size=max(round(s["slot_req"]), 1))
    try:
        pred = predict(layout, Workload(offered, max(isl, 1), max(osl, 1)), ctx.params)
    except (ToolkitError, ZeroDivisionError, ValueError):  # a launch the model cannot represent
        return None
    busy = pred.stage_busy
    return sum(busy) / len(busy) if busy else None
