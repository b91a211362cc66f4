"""What the run's profiler traces measure, for the stage rules: ``stage-imbalance``,
``unexplained-slowdown`` and ``gpu-idle-bubbles`` take their numbers from them where a
profile holds every stage (``analyze.stage_account``), with basis ``measured``.

Each loop iteration is one micro-batch turn. The pipeline runs at the pace of the stage that
waits least to receive; that stage's iteration is its work (kernels and transfers) plus what it
spends outside them: waiting in SendRecv kernels, GPU idle while the CPU loop schedules and
processes results, GPU idle while it blocks in a receive. Removing a part shortens the
iteration by it, so a part's share of the iteration is the throughput its remedy recovers
(``1 − now/after`` with ``after`` the iteration without it); the range is the part's spread
over the profiled iterations (its standard error, twice).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import polars as pl

from toolkit.analyze.model import StageClock
from toolkit.analyze.stage_account import StageSummary, stage_summary, stage_totals
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.sizing import Sizing, share
from toolkit.diagnose.thresholds import IMBALANCE, MIN_UNEXPLAINED
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "PARTS",
    "has_profile",
    "profiled",
    "profiled_bubbles",
    "profiled_imbalance",
    "profiled_residual",
]

PARTS: dict[str, tuple[str, str]] = {
    "transfer_ms": ("transfer", "moving proxy tensors between stages (SendRecv transfer)"),
    "idle_cpu_ms": ("CPU loop", "GPU idle while the CPU loop schedules and processes results"),
    "wait_ms": ("SendRecv wait", "communication kernels waiting for their peer"),
    "idle_recv_ms": ("receive wait", "GPU idle while the loop blocks in a receive"),
    "idle_other_ms": ("outside the loop", "GPU idle outside every loop range"),
}
"""Account column → (short name, what it is): the parts of a stage's time beyond its kernels."""


def has_profile(ctx: RunAnalysis) -> bool:
    """Whether the run's traces hold two or more stages of its pipeline."""
    return ctx.pp > 1 and profiled(ctx) is not None


def profiled(ctx: RunAnalysis) -> tuple[StageSummary, int | None, pl.DataFrame] | None:
    """The profile of the busiest profiled phase: its summary, the analysis phase it was taken
    in (None when the folder names none) and its per-iteration rows."""
    account = ctx.stage_account
    if account is None:
        return None
    best: tuple[float, StageSummary, int | None, pl.DataFrame] | None = None
    for name in account["phase"].unique().to_list():
        summary = stage_summary(account, name)
        if summary is None:
            continue
        index = ctx.profile_phase(name)
        offered = (ctx.phase(index).get("offered") or 0) if index is not None else -1
        rows = account.filter(
            pl.col("phase").is_null() if name is None else pl.col("phase") == name
        )
        if best is None or offered > best[0]:
            best = (offered, summary, index, rows)
    return best[1:] if best is not None else None


def _where(ctx: RunAnalysis, index: int | None) -> str:
    return ctx.load_of(index) if index is not None else "in the profiled window"


def _evidence(rows: pl.DataFrame) -> pl.DataFrame:
    totals = stage_totals(rows)
    shares = [c for c in totals.columns if c.endswith("_share")]
    return totals.select(
        "pp", "steps", pl.col("step_compute_ms", "step_work_ms").round(3),
        *(pl.col(c).round(3) for c in shares),
        "graph_launches", "transfer_basis",
    )  # fmt: skip


def _slowest(rows: pl.DataFrame, pp: int) -> pl.DataFrame:
    return rows.filter(pl.col("pp") == pp)


def _part_sizing(values: pl.Series, span: pl.Series, where: str, what: str) -> Sizing:
    """A part's share of the pace-setting stage's iterations, ± twice its standard error."""
    total = float(span.sum())
    central = float(values.sum()) / total if total > 0 else 0.0
    per = (values / span).drop_nans().drop_nulls()
    err = float(per.std() or 0.0) / math.sqrt(max(per.len(), 1)) if per.len() > 1 else 0.0
    return share(
        central,
        central - 2 * err,
        central + 2 * err,
        basis="measured",
        where=where,
        rests_on=(
            f"{what} over {per.len()} profiled iterations of the pace-setting stage ±2 s.e.",
        ),
        carried=False,
    )


def profiled_imbalance(
    ctx: RunAnalysis, split: Callable[[dict[int, float]], tuple[int, ...] | None]
) -> Finding | None:
    """``stage-imbalance`` from the profile: the slowest stage's kernel time per iteration
    against the mean stage's (transfers aside: a slow link is no layer's cost). Balanced
    kernels are the most a new split recovers (the iteration shortens by the slowest stage's
    excess, less what it waited to receive); ``split`` gives the layer split to try from the
    stages' kernel times (None when the layer counts are unknown)."""
    found = profiled(ctx)
    if found is None:
        return None
    summary, index, rows = found
    if summary.imbalance < IMBALANCE:
        return None
    slow = _slowest(rows, summary.slowest_pp)
    excess = summary.slowest_compute_ms - summary.mean_compute_ms
    waited = float(slow["idle_recv_ms"].mean() or 0.0)  # a stage that waits is not the pace
    central = max(0.0, excess - waited) / summary.step_ms
    err = summary.imbalance_noise * summary.slowest_compute_ms / summary.step_ms
    where = _where(ctx, index)
    sized = share(
        central,
        central - 2 * err,
        central + 2 * err,
        basis="measured",
        where=where,
        rests_on=(
            f"kernel time per stage over {summary.steps} profiled iterations "
            "(±2 s.e.); balanced stages are the most a layer split reaches",
        ),
        carried=False,
    )
    works = stage_totals(rows)
    compute = {int(r["pp"]): float(r["step_compute_ms"]) for r in works.iter_rows(named=True)}
    partition = split(compute)
    text = ",".join(map(str, partition)) if partition else None
    remedy = (
        f"SGLANG_PP_LAYER_PARTITION={text} (fewer layers on stage {summary.slowest_pp})"
        if text
        else f"SGLANG_PP_LAYER_PARTITION with fewer layers on stage {summary.slowest_pp}"
    )
    return Finding(
        id="stage-imbalance",
        title=(
            f"Stage {summary.slowest_pp} computes {summary.imbalance:.2f}× as long per "
            "micro-batch as the mean stage (profiled)"
        ),
        summary=(
            f"The profiler traces {where} show stage {summary.slowest_pp} spending "
            f"{summary.slowest_compute_ms:.2f} ms per loop iteration in its kernels against a "
            f"mean of {summary.mean_compute_ms:.2f} ms over {summary.stages} stages (iterations "
            f"of {summary.step_ms:.2f} ms; it waited {waited:.2f} ms per iteration to receive). "
            + (
                f"Balancing the stages' kernel time recovers {sized.words()}."
                if central > 0
                else "It waits to receive longer than its excess: it does not set the pace "
                "(the pipeline is not full), so a new split recovers nothing at this load yet."
            )
        ),
        evidence=_evidence(rows),
        remedy=remedy + "; profile again after moving layers.",
        phase=index,
        **sized.fields(),
    )


def profiled_residual(ctx: RunAnalysis) -> Finding | None:
    """``unexplained-slowdown`` from the profile: the pace-setting stage's iteration beyond its
    kernels, named by part (transfer, CPU loop, waits), and its kernels against the serving
    model's stage time where the model is known."""
    found = profiled(ctx)
    if found is None:
        return None
    summary, index, rows = found
    slow = _slowest(rows, summary.pace_pp)
    span = slow["span_ms"]
    outside = span - slow["compute_ms"]
    where = _where(ctx, index)
    sized = _part_sizing(outside, span, where, "time outside kernels")
    if sized.impact < MIN_UNEXPLAINED or sized.range[0] <= 0:
        return None
    total = float(span.sum())
    parts = sorted(
        ((float(slow[c].sum()) / total, name, what) for c, (name, what) in PARTS.items()),
        reverse=True,
    )
    named = "; ".join(f"{name} {s:.0%} ({what})" for s, name, what in parts if s >= 0.005)
    kernels = _kernel_excess(ctx, index, summary, slow) + _link_words(ctx, slow)
    step = summary.step_ms
    return Finding(
        id="unexplained-slowdown",
        title=(
            f"{sized.impact * step:.1f} ms per iteration of the pace-setting stage outside its "
            f"kernels, mostly {parts[0][1]} (profiled)"
        ),
        summary=(
            f"The profiler traces {where} put stage {summary.pace_pp} (the pipeline's pace: it "
            f"waits least to receive) in its kernels {1 - sized.impact:.0%} of each {step:.2f} "
            f"ms loop iteration; the rest is {named}. Removing it recovers {sized.words()}. "
            f"Transfers: {summary.transfer_basis}.{kernels}"
        ),
        evidence=_evidence(rows),
        remedy=_residual_remedy(parts[0][1]),
        phase=index,
        **sized.fields(),
    )


def _kernel_excess(
    ctx: RunAnalysis, index: int | None, summary: StageSummary, pace: pl.DataFrame
) -> str:
    """The pace-setting stage's kernels against the serving model's stage time, in words."""
    if ctx.params is None or index is None:
        return ""
    row = ctx.phase_summary.filter(pl.col("phase") == index)
    b = float(row["slot_req"][0] or 1.0) if row.height else 1.0
    try:
        model_ms = StageClock(ctx.layout, ctx.params).decode(summary.pace_pp, b) * 1e3
    except (ToolkitError, ZeroDivisionError, ValueError, IndexError):
        return ""
    measured = float(pace["compute_ms"].mean() or 0.0)
    if not math.isfinite(model_ms) or model_ms <= 0:
        return ""
    return (
        f" Its kernels take {measured:.2f} ms per micro-batch against the serving model's "
        f"{model_ms:.2f} ms ({measured / model_ms:.2f}×: kernels slower than the model when "
        "well above 1)."
    )


def _link_words(ctx: RunAnalysis, pace: pl.DataFrame) -> str:
    """The pace-setting stage's measured transfers against the bytes they carry over the
    link's plausible bandwidth (the serving model's, its source named): a slow link shows as
    measured time far above it."""
    sent = pace["comm_bytes"].drop_nulls()
    if ctx.params is None or not sent.len() or not math.isfinite(ctx.params.hardware.p2p_bytes_s):
        return ""
    bandwidth = ctx.params.hardware.p2p_bytes_s
    source = ctx.fit.sources.get("p2p_bytes_s") if ctx.fit is not None else None
    source = source or f"assumed for {ctx.machine.interconnect or 'pcie'}"
    per_step = float(sent.mean() or 0.0)
    modelled = per_step / bandwidth * 1e3
    measured = float(pace["transfer_ms"].mean() or 0.0)
    return (
        f" Its sends carry {per_step / 1e6:.2f} MB per iteration: {measured:.2f} ms measured, "
        f"{modelled:.2f} ms at {bandwidth / 1e9:.0f} GB/s (modelled; {source})."
    )


def _residual_remedy(part: str) -> str:
    remedies: dict[str, Any] = {
        "transfer": "A slow stage-to-stage link: check the GPUs' placement (nvidia-smi topo "
        "-m: stages on one PCIe switch or NVLink) and NCCL's transport (NCCL_P2P_LEVEL).",
        "CPU loop": "A CPU-bound scheduler loop: fewer, fuller micro-batches "
        "(--pp-async-batch-depth lower), faster host cores, and SGLANG_PP_COMM_OVERLAP=1.",
        "SendRecv wait": "Sends waiting for their peer: communication fences between stages; "
        "SGLANG_PP_COMM_OVERLAP=1 (≥0.5.23) moves PP communication off the compute stream.",
        "receive wait": "The pace-setting stage waits for the stage before it: fill more micro-"
        "batch slots so every stage has work (pp-underfilled-slots), or rebalance the stages.",
    }
    return remedies.get(part, "Profile the stages again and compare the loop ranges.")


def profiled_bubbles(ctx: RunAnalysis) -> Finding | None:
    """``gpu-idle-bubbles`` from the profile: every stage's GPU idle or waiting, measured;
    sized on the pace-setting stage (the others' idle is its pace), and ``info`` when a profiled
    imbalance or residual found before accounts for it."""
    found = profiled(ctx)
    if found is None:
        return None
    summary, index, rows = found
    if summary.bubble_share < 0.05:
        return None
    slow = _slowest(rows, summary.pace_pp)
    span = slow["span_ms"]
    idle = span - slow["compute_ms"] - slow["transfer_ms"]
    where = _where(ctx, index)
    sized = _part_sizing(idle, span, where, "idle and waiting time")
    causes = [f.id for f in ctx.found if f.id in ("stage-imbalance", "unexplained-slowdown")]
    causes += [f.id for f in ctx.found if f.id == "pp-underfilled-slots" and f.severity != "info"]
    parts = (
        f"waiting to receive {summary.recv_share:.0%}, CPU loop {summary.cpu_share:.0%}, "
        f"SendRecv waits and idle elsewhere "
        f"{summary.bubble_share - summary.recv_share - summary.cpu_share:.0%}"
    )
    fields: dict[str, Any] = {"severity": "info"} if causes else sized.fields()
    why = (
        f" Accounted for by {', '.join(causes)} (their impact is the cost)."
        if causes
        else f" On the pace-setting stage it costs {sized.words()}."
    )
    return Finding(
        id="gpu-idle-bubbles",
        title=f"GPUs idle or waiting {summary.bubble_share:.0%} of the time (profiled)",
        summary=(
            f"The profiler traces {where} show the {summary.stages} stages computing "
            f"{summary.compute_share:.0%} of their time and transferring "
            f"{summary.transfer_share:.0%}; the other {summary.bubble_share:.0%} is bubbles: "
            f"{parts}.{why}"
        ),
        evidence=_evidence(rows),
        remedy="Act on the findings that explain the idle time, then profile again.",
        phase=index,
        **fields,
    )
