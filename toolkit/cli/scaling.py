"""``ppscope scaling``: throughput against concurrency per layout, and the gap between them.

The JSON has exactly the keys users script against::

    {"verdict": sentence | null,
     "layouts": {label: [{"concurrency", "output_tok_s", "efficiency"}, ...]},
     "gap": [{"concurrency", "ratio", "leader"}, ...],
     "crossover": c | null,
     "knee": {label: c | null},
     "notes": [sentence, ...],
     "inputs": {"files": [...], "skipped": [...], "rate_driven": [...], "groups": [...]}}

``ratio`` there is the leader's throughput over the other layout's (≥ 1); the gap compares the
first two layouts in the order they were loaded; ``notes`` say when the layouts also differ in
the model the results or run directories name, or in the kind of machine a run directory
records (the gap then compares those too), and ``verdict`` (also the text's first line) is the
sentence the report leads with, that caveat inside it. Non-finite numbers become null.

Every input is accounted for (``inputs``, see ``toolkit.cli.accounting``): a run without a cap
is a rate-driven point at the mean number of requests it measured in flight; a run that yields
no point is listed with the reason and the flag that gives it one; runs under one label that
name different servers (model, parallel sizes) are kept apart (``unknown (Llama-3-8B)``), so
that no curve and no efficiency spans two servers. A path among several that does not exist is
reported and the others are read (exit code 1).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze.headline import gap_verdict
from toolkit.analyze.scaling import (
    caveat,
    crossover,
    failed_runs,
    knee,
    scaling_gap,
    scaling_table,
    unlike,
)
from toolkit.analyze.servers import split_servers
from toolkit.cli.accounting import account, account_lines
from toolkit.cli.options import add_json, add_output, add_quiet
from toolkit.cli.output import Progress, aligned, emit, number, to_json, wrapped
from toolkit.cli.runs import PARTLY_FAILED, bench_damage_status
from toolkit.errors import ToolkitError
from toolkit.load.bench.results import BenchResults, load_bench
from toolkit.load.limits import check

KNEE_THRESHOLD = 0.5


NAME = "scaling"
HELP = "throughput vs concurrency per layout: the gap, the crossover, the knee"
EXAMPLES = """\
examples:
  ppscope scaling runs/tp8 runs/pp8           results found in two run directories
  ppscope scaling sweep.csv --json            a sweep of your own, as JSON
  ppscope scaling a.jsonl b.jsonl --concurrency a.jsonl=32
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="+", type=Path, metavar="PATH",
        help="result files or run directories ('-': a result file from standard input)",
    )  # fmt: skip
    parser.set_defaults(stdin_as="file")
    add_json(parser)
    add_output(parser)
    parser.add_argument(
        "--concurrency",
        action="append",
        default=[],
        metavar="FILE=N",
        help="the concurrency of a result file that set no cap (repeatable); without it such "
        "a run takes the mean number of requests in flight it measured",
    )
    add_quiet(parser)


def run(args: argparse.Namespace) -> int:
    """Load the results under the paths, print the gap table (or JSON)."""
    given: dict[str, int] = {}
    for item in args.concurrency:
        name, sep, value = item.rpartition("=")
        if not sep or not name or not value.strip().isdigit() or int(value[:20]) < 1:
            raise ToolkitError(f"--concurrency: expected FILE=N with N ≥ 1, got {item[:60]!r}")
        check("concurrency", int(value) if len(value) < 20 else math.inf, "--concurrency")
        given[name] = int(value)
    found = [p for p in args.paths if p.exists()]
    missing = [str(p) for p in args.paths if not p.exists()]
    if not found:
        raise ToolkitError("; ".join(f"{p}: no such file or directory" for p in missing))
    with Progress(len(found), quiet=args.quiet, title="scaling") as progress:
        results = load_bench(found, concurrency=given, step=progress.step)
    report = scaling_report(results, missing, _run_facts(found))
    emit(to_json(report["json"]) if args.json else report["text"], args.output)
    for path in missing:
        print(f"ppscope: skipped {path}: no such file or directory", file=sys.stderr)
    return max(PARTLY_FAILED if missing else 0, bench_damage_status(results.damaged))


def _run_facts(paths: list[Path]) -> dict[str, dict[str, str | None]]:
    """Per run directory among ``paths``, by its label, what it is besides its layout
    (``like_facts``: the model and the kind of machine, as the report reads them), so the
    verdict's caveat is the report's."""
    from toolkit.run_analysis import RunAnalysis  # run directories only: files need none

    facts = {}
    for path in paths:
        if str(path) != "-" and path.is_dir():
            ctx = RunAnalysis(path)
            facts[ctx.label] = ctx.like_facts()
    return facts


def scaling_report(
    results: BenchResults,
    missing: Sequence[str] = (),
    facts: dict[str, dict[str, str | None]] | None = None,
) -> dict[str, Any]:
    """The JSON document and the text of ``ppscope scaling`` for loaded results (``missing``:
    paths given that did not exist); ``facts`` (per label, ``like_facts``) add what the results
    do not name to what they do."""
    runs, groups = split_servers(results.runs)
    results = replace(results, runs=runs)
    table = scaling_table(runs)
    inputs = account(results, groups, missing)
    if not table.height:
        why = "; ".join(account_lines(inputs)) or "nothing to plot"
        raise ToolkitError(f"no run has both a concurrency and an output tok/s: {why}")
    labels = table["label"].unique(maintain_order=True).to_list()
    gap = scaling_gap(runs, labels[0], labels[1]) if len(labels) > 1 else None
    cross = crossover(gap) if gap is not None else None
    knees = knee(table, KNEE_THRESHOLD)
    known = {k: dict(v) for k, v in (facts or {}).items()}
    for label, said in _facts(runs).items():  # the model the results name, where they do
        known.setdefault(label, {}).update({k: v for k, v in said.items() if v})
    measured = gap.filter(~pl.col("interpolated")) if gap is not None else None
    verdict = (
        gap_verdict(measured, caveat(known)) if measured is not None and measured.height else None
    )
    document = {
        "verdict": verdict,
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
        "notes": unlike(known) + _failed_note(runs),
        "inputs": inputs,
    }
    head = [f"verdict: {verdict}"] if verdict else []
    body = _text(results, table, gap, cross, knees, inputs)
    text = "\n".join([*head, body, *document["notes"]])
    return {"json": document, "text": text}


def _failed_note(runs: pl.DataFrame) -> list[str]:
    """A note naming the runs left out because no request completed in them."""
    failed = failed_runs(runs)
    if not failed.height:
        return []
    where = ", ".join(
        f"{r['source']}:{r['lineno']}" if r.get("lineno") is not None else str(r["source"])
        for r in failed.iter_rows(named=True)
    )
    return [f"left out {_plural(failed.height, 'run')} in which no request completed: {where}"]


def _facts(runs: pl.DataFrame) -> dict[str, dict[str, str | None]]:
    """Per layout, the model its results name (when they name one)."""
    if "model" not in runs.columns:
        return {}
    named = runs.filter(pl.col("label").is_not_null() & pl.col("model").is_not_null())
    return {
        label: {"model": str(models[0]) if len(models) == 1 else ", ".join(map(str, models))}
        for label, models in named.group_by("label", maintain_order=True)
        .agg(pl.col("model").unique(maintain_order=True))
        .iter_rows()
    }


def _round(x: float | None, digits: int) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


# ----------------------------------------------------------------------------- text
def _text(
    results: BenchResults,
    table: pl.DataFrame,
    gap: pl.DataFrame | None,
    cross: float | None,
    knees: dict[str, int | None],
    inputs: dict[str, Any],
) -> str:
    labels = table["label"].unique(maintain_order=True).to_list()
    counts = ", ".join(
        f"{label} ({_plural(table.filter(pl.col('label') == label).height, 'point')})"
        for label in labels
    )
    lines = [
        f"{_plural(results.runs.height, 'run')} from {_plural(len(results.files), 'file')}; "
        f"layouts: {counts}",
    ]
    sources = {
        "observed": "the mean in flight it measured (no cap set)",
        "argument": "--concurrency",
    }
    for origin, words in sources.items():
        picked = results.runs.filter(pl.col("concurrency_from") == origin)
        if picked.height:
            lines.append(f"concurrency of {_plural(picked.height, 'run')} from {words}")
    lines += [w for line in account_lines(inputs) for w in wrapped(line)]
    lines.append("")
    cell = {(r["label"], r["concurrency"]): r for r in table.iter_rows(named=True)}
    gaps = {} if gap is None else {r["concurrency"]: r for r in gap.iter_rows(named=True)}
    header = ["concurrency", *(f"{label} tok/s" for label in labels)]
    if gap is not None:
        header += [f"gap {labels[0]}:{labels[1]}", "leader"]
    header += [f"{label} eff" for label in labels]
    rows = []
    for c in sorted({r["concurrency"] for r in table.iter_rows(named=True)}):
        row = [str(c)]
        row += [number(cell.get((label, c), {}).get("output_tok_s"), ".1f") for label in labels]
        if gap is not None:
            g = gaps.get(c, {})
            advantage = g.get("advantage")
            row += ["-" if advantage is None else f"{advantage:.2f}×", g.get("leader") or "-"]
        row += [number(cell.get((label, c), {}).get("efficiency"), ".2f") for label in labels]
        rows.append(row)
    lines += aligned(header, rows)
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
