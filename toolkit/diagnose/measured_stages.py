"""What SGLang's ``/metrics`` measured per stage, added to the findings it bears on.

``pp-underfilled-slots`` and ``gpu-idle-bubbles`` say stages sit idle; when the run has
``/metrics`` series labelled by ``pp_rank`` (``stage_shares``), their summary gains
one sentence with each stage's measured GPU busy share, idle share and the share its scheduler
spent in ``recv_requests``, for the finding's phase (else over all the metrics cover). The
finding's own numbers, severity and evidence table are left as the rule made them. A metrics
file that cannot be read adds nothing here (``ppscope parse`` names its error).
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from toolkit.analyze.stage_wait import STAGE_SHARES, stage_wait_share
from toolkit.diagnose.finding import Finding
from toolkit.load.prometheus import Metrics
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "MEASURED_ON",
    "measured_stage_note",
    "run_metrics",
    "stage_shares",
    "with_measured_stages",
]

MEASURED_ON: tuple[str, ...] = ("pp-underfilled-slots", "gpu-idle-bubbles")
"""Findings that gain the sentence."""

_SHOWN = (
    ("gpu_busy", None, "GPU busy"),
    ("scheduler_idle", None, "scheduler idle"),
    ("scheduler_stage", "recv_requests", "scheduler waiting in recv_requests"),
)


def run_metrics(ctx: RunAnalysis) -> Metrics | None:
    """The run's ``/metrics`` series on the log's clock (``RunAnalysis.metrics``), or None,
    also when they cannot be read or their clock cannot be placed."""
    return ctx.metrics


def stage_shares(ctx: RunAnalysis, *, by_phase: bool = True) -> pl.DataFrame:
    """``stage_wait_share`` of the run's metrics, per phase of its log (``by_phase`` and a
    log), else over all the metrics cover; empty without metrics."""
    metrics = run_metrics(ctx)
    if metrics is None:
        return pl.DataFrame(schema=STAGE_SHARES)
    phases = ctx.phases if by_phase and ctx.run.log is not None else None
    return stage_wait_share(metrics.samples, phases)


def measured_stage_note(ctx: RunAnalysis, phase: int | None) -> str | None:
    """One sentence of the measured per-stage shares of ``phase`` (None: all the metrics
    cover), naming the metrics; None when the run has none."""
    if phase is None:
        shares = stage_shares(ctx, by_phase=False)
    else:
        shares = stage_shares(ctx).filter(pl.col("phase") == phase)
    parts = []
    for measure, category, name in _SHOWN:
        rows = shares.filter(pl.col("measure") == measure)
        if category is not None:
            rows = rows.filter(pl.col("category") == category)
        rows = rows.filter(pl.col("share").is_not_null()).sort("pp_rank")
        if not rows.height:
            continue
        values = ", ".join(f"PP{r} {s:.0%}" for r, s in rows.select("pp_rank", "share").iter_rows())
        parts.append(f"{name} {values} ({rows['metric'][0]})")
    if not parts:
        return None
    where = ctx.load_of(phase) if phase is not None else "over the scrapes"
    return f"SGLang's /metrics measured {where}: " + "; ".join(parts) + "."


def with_measured_stages(ctx: RunAnalysis, finding: Finding) -> Finding:
    """``finding`` with the measured sentence added to its summary, when it bears on it."""
    if finding.id not in MEASURED_ON or run_metrics(ctx) is None:
        return finding
    note = measured_stage_note(ctx, finding.phase)
    if note is None:
        return finding
    return replace(finding, summary=f"{finding.summary} {note}")
