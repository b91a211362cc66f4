"""Micro-batch slot occupancy of each pipeline-parallel run, phase by phase."""

from __future__ import annotations

from typing import Any

from toolkit.analyze.occupancy import peak_headline
from toolkit.analyze.series import thin
from toolkit.chart.occupancy import occupancy_chart
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import MAX_POINTS, by_concurrency, phase_labels, titled
from toolkit.report.view import (
    Table,
    View,
    note,
)

_KEY = (
    "concurrency",
    "phase",
    "running_est",
    "slot_req",
    "active_slots_est",
    "stages",
    "slots",
    "gen_tok_s",
)

__all__ = ["occupancy"]


def occupancy(runs: RunSet, max_points: int = MAX_POINTS) -> View:
    """Per pipeline-parallel run: requests offered, running and per slot, and the slots they
    fill against the stages (``analyze.occupancy``), phase by phase."""
    items: list[Any] = []
    records = []
    for run, label in zip(runs, runs.labels, strict=True):
        ctx = runs.analysis(run)
        if ctx.pp <= 1:
            continue
        if not ctx.occupancy.height:
            items.append(note(f"{label}: no Decode batch lines to estimate occupancy from."))
            continue
        # the chart draws every row in two panels
        rows = thin(ctx.occupancy, max_points // 2)
        phases = phase_labels(runs, run, rows["ts"])
        summary = ctx.phase_summary
        headline = peak_headline(ctx.occupancy, summary)
        items.append(titled(occupancy_chart(rows, phases, headline), label))
        records.append({"run": label, "phases": summary})
        if summary.height:
            items.append(Table(by_concurrency(summary), key=_KEY))
    if not items:
        items.append(note("No pipeline-parallel run here: every request shares one batch."))
    return View("occupancy", items, {"occupancy": records})
