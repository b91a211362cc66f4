"""``ppscope scaling PATH... [--json]``: the gap between layouts, as text or JSON.

The JSON has exactly the keys users script against::

    {"layouts": {label: [{"concurrency", "output_tok_s", "efficiency"}, ...]},
     "gap": [{"concurrency", "ratio", "leader"}, ...],
     "crossover": c | null,
     "knee": {label: c | null}}

``ratio`` there is the leader's throughput over the other layout's (≥ 1); the gap compares the
first two layouts in the order they were loaded. Non-finite numbers become null.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze.scaling import crossover, knee, scaling_gap, scaling_table
from toolkit.errors import ToolkitError
from toolkit.load.bench.results import BenchResults, load_bench
from toolkit.schema.jsonable import to_json

KNEE_THRESHOLD = 0.5


def run_scaling(paths: list[Path], as_json: bool) -> int:
    """Load the results under ``paths``, print the gap table (or JSON), return the exit code.

    Exit codes: 0 printed; 2 nothing readable or a broken file (the reason goes to stderr).
    """
    try:
        results = load_bench(paths)
        report = scaling_report(results)
    except ToolkitError as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 2
    if as_json:
        print(to_json(report["json"]))
    else:
        print(report["text"])
    return 0


def scaling_report(results: BenchResults) -> dict[str, Any]:
    """The JSON document and the text of ``ppscope scaling`` for loaded results."""
    runs = results.runs
    table = scaling_table(runs)
    if not table.height:
        raise ToolkitError(
            "no run has both a concurrency and an output tok/s; "
            "set max_concurrency, a `concurrency` column, or a label such as 'c32'"
        )
    labels = table["label"].unique(maintain_order=True).to_list()
    gap = scaling_gap(runs, labels[0], labels[1]) if len(labels) > 1 else None
    cross = crossover(gap) if gap is not None else None
    knees = knee(table, KNEE_THRESHOLD)
    document = {
        "layouts": {
            label: [
                {
                    "concurrency": r["concurrency"],
                    "output_tok_s": _round(r["output_tok_s"], 3),
                    "efficiency": _round(r["efficiency"], 4),
                }
                for r in table.filter(pl.col("label") == label).iter_rows(named=True)
            ]
            for label in labels
        },
        "gap": []
        if gap is None
        else [
            {
                "concurrency": r["concurrency"],
                "ratio": _round(r["advantage"], 4),
                "leader": r["leader"],
            }
            for r in gap.iter_rows(named=True)
        ],
        "crossover": _round(cross, 2),
        "knee": knees,
    }
    return {"json": document, "text": _text(results, table, gap, cross, knees)}


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


# ----------------------------------------------------------------------------- text
def _text(
    results: BenchResults,
    table: pl.DataFrame,
    gap: pl.DataFrame | None,
    cross: float | None,
    knees: dict[str, int | None],
) -> str:
    labels = table["label"].unique(maintain_order=True).to_list()
    counts = ", ".join(
        f"{label} ({_plural(table.filter(pl.col('label') == label).height, 'point')})"
        for label in labels
    )
    lines = [
        f"{_plural(results.runs.height, 'run')} from {_plural(len(results.files), 'file')}; "
        f"layouts: {counts}",
        "",
    ]
    cell = {(r["label"], r["concurrency"]): r for r in table.iter_rows(named=True)}
    gaps = {} if gap is None else {r["concurrency"]: r for r in gap.iter_rows(named=True)}
    header = ["concurrency", *(f"{label} tok/s" for label in labels)]
    if gap is not None:
        header += [f"gap {labels[0]}:{labels[1]}", "leader"]
    header += [f"{label} eff" for label in labels]
    rows = []
    for c in sorted({r["concurrency"] for r in table.iter_rows(named=True)}):
        row = [str(c)]
        row += [_fmt(cell.get((label, c), {}).get("output_tok_s"), ".1f") for label in labels]
        if gap is not None:
            g = gaps.get(c, {})
            advantage = g.get("advantage")
            row += ["-" if advantage is None else f"{advantage:.2f}×", g.get("leader") or "-"]
        row += [_fmt(cell.get((label, c), {}).get("efficiency"), ".2f") for label in labels]
        rows.append(row)
    lines += _aligned([header, *rows])
    repeats = [
        f"{r['label']} at {r['concurrency']} ({r['n_runs']} runs)"
        for r in table.iter_rows(named=True)
        if r["n_runs"] > 1
    ]
    if repeats:
        lines.append("medians of repeated runs: " + ", ".join(repeats))
    lines.append("")
    if gap is not None:
        lines.append("crossover: " + _crossover_text(gap, cross))
    knee_text = "; ".join(
        f"{label} at {c}" if c is not None else f"{label} none" for label, c in knees.items()
    )
    lines.append(f"knee (efficiency < {KNEE_THRESHOLD:.0%}): {knee_text}")
    if len(labels) > 2:
        others = ", ".join(labels[2:])
        lines.append(f"gap shown for {labels[0]} vs {labels[1]}; other layouts: {others}")
    return "\n".join(lines)


def _crossover_text(gap: pl.DataFrame, cross: float | None) -> str:
    if cross is None:
        leaders = [x for x in gap["leader"].unique(maintain_order=True).to_list() if x]
        if len(leaders) == 1:
            return f"none ({leaders[0]} leads at every measured concurrency)"
        return "none"
    cs = gap["concurrency"].to_list()
    below = max((c for c in cs if c <= cross), default=None)
    above = min((c for c in cs if c >= cross), default=None)
    if below == above:
        return f"at {below} concurrent requests (a tie)"
    return f"between {below} and {above} concurrent requests (≈{cross:.1f}, log-interpolated)"


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None or not math.isfinite(x) else format(x, spec)


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for r in rows:
        cells = [r[0].rjust(widths[0])]
        for i, text in enumerate(r[1:], start=1):
            numeric = text == "-" or text.rstrip("×").replace(".", "", 1).isdigit()
            cells.append(text.rjust(widths[i]) if numeric else text.ljust(widths[i]))
        out.append("  ".join(cells).rstrip())
    return out


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
