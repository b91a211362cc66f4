"""What SGLang's ``/metrics`` measured per stage, added to the findings it bears on.

``pp-underfilled-slots`` and ``gpu-idle-bubbles`` say stages sit idle; when the run has
``/metrics`` series labelled by ``pp_rank`` (``RunAnalysis.stage_shares``), their summary gains
one sentence with each stage's measured GPU busy share, idle share and the share its scheduler
spent in ``recv_requests``, for the finding's phase (else over all the metrics cover). The
finding's own numbers, severity and evidence table are left as the rule made them.
"""

from __future__ import annotations

from dataclasses import replace

import polars as pl

from toolkit.analyze.stage_wait import stage_wait_share
from toolkit.diagnose.finding import Finding
from toolkit.run_analysis import RunAnalysis

__all__ = ["MEASURED_ON", "measured_stage_note", "with_measured_stages"]

MEASURED_ON: tuple[str, ...] = ("pp-underfilled-slots", "gpu-idle-bubbles")
"""Findings that gain the sentence."""

_SHOWN = (
    ("gpu_busy", None, "GPU busy"),
    ("scheduler_idle", None, "scheduler idle"),
    ("scheduler_stage", "recv_requests", "scheduler waiting in recv_requests"),
)


def measured_stage_note(ctx: RunAnalysis, phase: int | None) -> str | None:
    """One sentence of the measured per-stage shares of ``phase`` (None: all the metrics
    cover), naming the metrics; None when the run has none."""
    metrics = ctx.run.metrics
    if metrics is None:
        return None
    if phase is not None:
        shares = ctx.stage_shares.filter(pl.col("phase") == phase)
    else:
        shares = stage_wait_share(metrics.samples)
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
    where = f"in phase {phase}" if phase is not None else "over the scrapes"
    return f"SGLang's /metrics measured {where}: " + "; ".join(parts) + "."


def with_measured_stages(ctx: RunAnalysis, finding: Finding) -> Finding:
    """``finding`` with the measured sentence added to its summary, when it bears on it."""
    if finding.id not in MEASURED_ON or ctx.run.metrics is None:
        return finding
    note = measured_stage_note(ctx, finding.phase)
    if note is None:
        return finding
    return replace(finding, summary=f"{finding.summary} {note}")
