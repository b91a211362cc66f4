"""The serving model against the measurements, and what it predicts under a change.

Each run is compared with the model of its own model on its own machine; runs that share both
share one fit (``run_analysis.model_groups``), and the view says which constants were fitted,
taken from a datasheet, or assumed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from toolkit.analyze.model import Fit, expected_vs_observed, what_if_table
from toolkit.chart.model import model_chart, what_if_chart
from toolkit.errors import ToolkitError
from toolkit.report.redact import escape
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import no_bench
from toolkit.report.view import Table, View, note
from toolkit.run_analysis import RunAnalysis, model_groups

__all__ = ["model", "what_if"]


def _groups(runs: RunSet) -> tuple[list[tuple[Fit, pl.DataFrame]], list[RunAnalysis]]:
    """(fit, observed points) per group of runs sharing a model and a machine, and the runs
    whose model is unknown."""
    with_points = [ctx for ctx in runs.analyses if ctx.observed.height]
    groups = [
        (fitted, pl.concat([c.observed for c in members]))
        for fitted, members in model_groups(with_points)
    ]
    return groups, [ctx for ctx in with_points if ctx.fit is None]


def _unknown(unknown: list[RunAnalysis]) -> list[str]:
    return [note(f"{ctx.label}: {ctx.model.describe()}.") for ctx in unknown]


def _constants(fitted: Fit, labels: list[str]) -> str:
    rows = "".join(
        f"<li>{escape(name)}: {escape(source)}</li>" for name, source in fitted.sources.items()
    )
    return (
        f"<details><summary>Model of {escape(', '.join(labels))}: "
        f"{escape(fitted.params.model.name)} on {escape(fitted.params.hardware.name)}</summary>"
        f"<ul>{rows}</ul></details>"
    )


def model(runs: RunSet) -> View:
    """The serving model fitted to the runs: expected against observed tok/s, and residuals."""
    groups, unknown = _groups(runs)
    if not groups and not unknown:
        return no_bench("model")
    items: list[Any] = _unknown(unknown)
    frames, fits = [], []
    for fitted, observed in groups:
        try:
            points = expected_vs_observed(fitted, observed)
        except ToolkitError as e:
            items.append(note(f"The model cannot be fitted to these runs: {e}"))
            continue
        labels = observed["label"].unique(maintain_order=True).to_list()
        items.append(_constants(fitted, labels))
        frames.append(points)
        fits.append({"runs": labels, **fitted.summary()})
    if not frames:
        return View("model", items or [note("No run has a model to compare with.")])
    points = pl.concat(frames)
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
    items += [model_chart(points), Table(shown, key=key)]
    return View("model", items, {"model": {"fits": fits, "points": shown}})


def what_if(runs: RunSet, changes: Mapping[str, int | None]) -> View:
    """The model's prediction for every measured point under changed flags or workload."""
    groups, unknown = _groups(runs)
    if not groups and not unknown:
        return no_bench("what_if")
    changes = dict(changes)
    if not changes:
        return View("what_if", [note("No change chosen: move a slider to ask the model.")])
    items: list[Any] = _unknown(unknown)
    try:
        table = pl.concat([what_if_table(f, observed, changes) for f, observed in groups])
    except (ToolkitError, ValueError) as e:
        return View("what_if", [*items, note(f"The model cannot answer: {e}")])
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
        [*items, what_if_chart(table, text), shown],
        {"what_if": {"changes": changes, "points": shown}},
    )
