"""Throughput, efficiency, latency and the frontier against concurrency, per layout."""

from __future__ import annotations

from typing import Any

from toolkit.analyze.scaling import crossover, frontier, knee, scaling_gap, scaling_table
from toolkit.chart.scaling import efficiency_chart, frontier_chart, latency_chart, throughput_chart
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import no_bench
from toolkit.report.view import (
    View,
    note,
)

__all__ = ["efficiency", "frontier_view", "latency", "scaling"]


def scaling(runs: RunSet, a: str = "", b: str = "") -> View:
    """Throughput against concurrency per layout and the gap between ``a`` and ``b``.

    ``a`` and ``b`` default to the first two layouts with throughput data; a label may be
    given in any case or by a unique prefix (``RunSet.label``).
    """
    bench = runs.bench()
    if bench is None:
        return no_bench("gap")
    table = scaling_table(bench)
    if not table.height:
        return View("gap", [note("No run has both a concurrency and an output tok/s.")])
    labels = table["label"].unique(maintain_order=True).to_list()
    a = runs.label(a) if a else labels[0]
    b = runs.label(b) if b else next((x for x in labels if x != a), "")
    gap = scaling_gap(bench, a, b) if b and b != a else None
    differ = runs.unlike()
    items: list[Any] = [note(" ".join(differ))] if differ else []
    verdict = runs.headline(a, b).verdict if gap is not None else None
    items.append(throughput_chart(table, gap, verdict))
    record: dict[str, Any] = {
        "unlike": differ,
        "scaling": table.select(
            "label", "concurrency", "n_runs", "output_tok_s", "efficiency"
        ).to_dicts(),
        "gap": None,
        "knee": knee(table),
    }
    if gap is not None:
        shown = gap.select(
            "concurrency", "a_tok_s", "b_tok_s", "ratio", "leader", "advantage"
        ).rename({"a_tok_s": f"{a} tok/s", "b_tok_s": f"{b} tok/s", "ratio": f"{a}/{b}"})
        items.append(shown)
        record["gap"] = gap.to_dicts()
        record["verdict"] = verdict
        record["crossover"] = crossover(gap)
    elif b == a:
        items.append(note(f"Layout A and B are both {a}: pick two layouts to see the gap."))
    else:
        items.append(note("Only one layout has throughput data: no gap to show."))
    return View("gap", items, record)


def efficiency(runs: RunSet, threshold: float = 0.5) -> View:
    """Scaling efficiency per layout (1 = linear) with the knee threshold."""
    bench = runs.bench()
    if bench is None:
        return no_bench("efficiency")
    table = scaling_table(bench)
    return View(
        "efficiency", [efficiency_chart(table, threshold)], {"knee": knee(table, threshold)}
    )


def latency(runs: RunSet, metric: str = "tpot_median_ms") -> View:
    """One latency (TPOT, TTFT, ITL, E2E) against concurrency per layout."""
    bench = runs.bench()
    if bench is None:
        return no_bench("latency")
    table = scaling_table(bench)
    if table[metric].is_null().all():
        return View("latency", [note(f"No {metric} in these benchmark results.")])
    return View("latency", [latency_chart(table, metric)])


def frontier_view(runs: RunSet) -> View:
    """Throughput against per-token latency: the trade-off each layout offers."""
    bench = runs.bench()
    if bench is None:
        return no_bench("frontier")
    points = frontier(bench)
    if not points.height:
        return View("frontier", [note("No per-token latency in these results: no frontier.")])
    return View("frontier", [frontier_chart(points)])
