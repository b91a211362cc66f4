"""Decode lines on a captured CUDA graph or eager, against the capture list."""

from __future__ import annotations

from typing import Any

import altair as alt

from toolkit.chart.cudagraph import graph_coverage_chart
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import titled
from toolkit.report.view import (
    View,
    note,
)

__all__ = ["cuda_graphs"]


def cuda_graphs(runs: RunSet) -> View:
    """Per run: decode lines by batch size, on a captured CUDA graph or eager, against the
    capture list (``analyze.cudagraph``)."""
    charts: list[Any] = []
    records = []
    for run, label in zip(runs, runs.labels, strict=True):
        ctx = runs.analysis(run)
        coverage = ctx.coverage
        if not coverage.height:
            continue
        summary = ctx.graphs
        charts.append(titled(graph_coverage_chart(coverage, summary.get("max_captured")), label))
        records.append({"run": label, **summary})
    if not records:
        text = "These logs do not say whether decode ran on CUDA graphs (SGLang ≥ 0.4.6 does)."
        return View("cuda_graph", [note(text)], {"cuda_graph": records})
    # side by side, three to a row: each is a handful of bars
    rows = [alt.hconcat(*charts[i : i + 3]) for i in range(0, len(charts), 3)]
    chart = rows[0] if len(rows) == 1 else alt.vconcat(*rows)
    return View("cuda_graph", [chart], {"cuda_graph": records})
