"""Where each stage's loop iteration goes, at each profiled load (PyTorch profiler traces)."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.analyze.stage_account import round_waterfall, stage_summary, stage_totals
from toolkit.chart.stage_round import stage_round_chart
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import titled
from toolkit.report.view import View, note

__all__ = ["stage_rounds"]

_HOW = (
    "No profiler traces in these runs. Record them with ppscope capture --profile STEPS, or "
    "POST /start_profile to the server while it decodes and copy the traces into the run's "
    "profile/ folder."
)


def stage_rounds(runs: RunSet) -> View:
    """Per run with profiler traces: a waterfall of one loop iteration per stage at each
    profiled load, and each stage's shares (``analyze.stage_account``)."""
    items: list[Any] = []
    records = []
    for run, label in zip(runs, runs.labels, strict=True):
        ctx = runs.analysis(run)
        account = ctx.stage_account
        if account is None:
            continue
        names = account["phase"].unique().to_list()
        loads = {n: _load(ctx, n) for n in names}
        frame = round_waterfall(account).with_columns(
            load=pl.col("phase").replace_strict(loads, default="profile", return_dtype=pl.String)
        )
        items.append(titled(stage_round_chart(frame), label))
        totals = stage_totals(account)
        shares = [c for c in totals.columns if c.endswith("_share")]
        items.append(
            totals.select(
                "phase",
                "pp",
                "steps",
                pl.col("step_compute_ms").round(2),
                *(pl.col(c).round(3) for c in shares),
                "transfer_basis",
            )
        )
        summaries = [stage_summary(account, n) for n in names]
        records.append({"run": label, "phases": [vars(s) for s in summaries if s is not None]})
    if not records:
        items.append(note(_HOW))
    return View("stage rounds", items, {"stage_rounds": records})


def _load(ctx: Any, name: str | None) -> str:
    index = ctx.profile_phase(name)
    if index is not None:
        return ctx.load_of(index)
    return f"profile {name}" if name else "profile"
