"""The serving model against the measurements, and what it predicts under a change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolkit.analyze.model import expected_vs_observed, fit, what_if_table
from toolkit.chart.model import model_chart, what_if_chart
from toolkit.errors import ToolkitError
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import no_bench
from toolkit.report.view import (
    Table,
    View,
    note,
)

__all__ = ["model", "what_if"]


def model(runs: RunSet) -> View:
    """The serving model fitted to the runs: expected against observed tok/s, and residuals."""
    observed = runs.observed()
    if observed is None or not observed.height:
        return no_bench("model")
    try:
        fitted = fit(observed)
        points = expected_vs_observed(fitted, observed)
    except ToolkitError as e:
        return View("model", [note(f"The model cannot be fitted to these runs: {e}")])
    shown = points.select(
        "label",
        "concurrency",
        "observed_tok_s",
        "expected_tok_s",
        "residual_pct",
        "occupancy",
        "gpu_idle_share",
        "regime",
        "unexplained_round_ms",
        "calibration",
    )
    key = ("label", "concurrency", "observed_tok_s", "expected_tok_s", "residual_pct", "regime")
    items: list[Any] = [model_chart(points), Table(shown, key=key)]
    return View("model", items, {"model": {"params": fitted.summary(), "points": shown}})


def what_if(runs: RunSet, changes: Mapping[str, int | None]) -> View:
    """The model's prediction for every measured point under changed flags or workload."""
    observed = runs.observed()
    if observed is None or not observed.height:
        return no_bench("what_if")
    changes = dict(changes)
    if not changes:
        return View("what_if", [note("No change chosen: move a slider to ask the model.")])
    try:
        fitted = fit(observed)
        table = what_if_table(fitted, observed, changes)
    except ToolkitError as e:
        return View("what_if", [note(f"The model cannot answer: {e}")])
    text = ", ".join(f"{k}={'auto' if v is None else v}" for k, v in changes.items())
    shown = table.select(
        "label",
        "base_concurrency",
        "concurrency",
        "expected_tok_s",
        "what_if_tok_s",
        "change_pct",
        "occupancy",
        "regime",
    )
    return View(
        "what_if",
        [what_if_chart(table, text), shown],
        {"what_if": {"changes": changes, "points": shown}},
    )
