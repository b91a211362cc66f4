"""Bodies of ``ppscope diagnose``, ``ppscope diff`` and ``ppscope timeline``.

``diagnose RUN_DIR... [--json]`` prints the findings of each run, ranked, each with its
evidence in a few lines and the remedy. ``--json`` prints
``{"findings": [{"id", "severity", "run", "title", "summary", "evidence", "remedy"}...]}``
ordered by severity, then by the share of throughput each finding explains.

``diff RUN_A RUN_B [--json]`` prints two launches' ServerArgs side by side, parallel settings
first; ``--json`` prints ``{"changed": {key: [a, b]}, "only_a": {key: a},
"only_b": {key: b}, "derived": {key: [a, b]}}``.

``timeline RUN_DIR -o trace.json`` writes the stage timeline as Chrome trace JSON for
ui.perfetto.dev.

Exit codes: 0 done; 2 a run could not be read (the reason goes to stderr).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze.config import DERIVED_KEYS, config_diff, derived_settings
from toolkit.analyze.stages import stage_gpu_series
from toolkit.diagnose import Finding, RunAnalysis, diagnose
from toolkit.errors import ToolkitError
from toolkit.export.perfetto import chrome_trace, write_chrome_trace
from toolkit.load.bench import FORMATS as BENCH_FORMATS
from toolkit.load.gpu import trace_formats
from toolkit.schema.jsonable import to_json

__all__ = ["diff_report", "findings_text", "run_diagnose", "run_diff", "run_timeline"]

EVIDENCE_ROWS = 8  # rows of evidence printed per finding in the text report
WIDTH = 100


def run_diagnose(run_dirs: list[Path], as_json: bool) -> int:
    """Diagnose the runs, print the findings (text or JSON), return the exit code."""
    try:
        contexts = [RunAnalysis(p) for p in run_dirs]
        for path, ctx in zip(run_dirs, contexts, strict=True):
            inputs = {"sglang-log", *BENCH_FORMATS, *trace_formats()} & set(ctx.run.files)
            if not inputs:  # a wrong directory must not read as a healthy run
                raise ToolkitError(f"{path}: no SGLang log, benchmark result or GPU trace found")
        findings = diagnose(contexts)
    except ToolkitError as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 2
    if as_json:
        print(to_json({"findings": [f.to_dict() for f in findings]}))
    else:
        print(findings_text(findings, contexts))
    return 0


def run_diff(a: Path, b: Path, as_json: bool) -> int:
    """Print two runs' launch configurations side by side, return the exit code."""
    try:
        runs = [RunAnalysis(a), RunAnalysis(b)]
        for path, ctx in zip((a, b), runs, strict=True):
            if ctx.launch is None:
                raise ToolkitError(f"{path}: no server launch (server_args dump) found")
        report = diff_report(runs[0], runs[1])
    except ToolkitError as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 2
    print(to_json(report["json"]) if as_json else report["text"])
    return 0


def run_timeline(run_dir: Path, out: Path) -> int:
    """Write the run's stage timeline as Chrome trace JSON to ``out``; return the exit code."""
    try:
        ctx = RunAnalysis(run_dir)
        timeline = ctx.timeline
        if not timeline.height:
            raise ToolkitError(f"{run_dir}: no Prefill/Decode batch lines to put on a timeline")
        gpu = None
        if ctx.gpu_samples is not None:
            gpu = stage_gpu_series(ctx.gpu_samples, ctx.roles, every="100ms", max_points=200_000)
        trace = chrome_trace(timeline, gpu=gpu, label=ctx.label, log_interval=ctx.log_interval)
        write_chrome_trace(out, trace)
    except (ToolkitError, OSError) as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 2
    stages = timeline.select("dp", "pp").unique().height
    counters = sum(1 for e in trace["traceEvents"] if e["ph"] == "C")
    print(
        f"{out}: {len(trace['traceEvents'])} events, {stages} stage track(s), {counters} counter "
        "samples; open it in https://ui.perfetto.dev"
    )
    return 0


# ----------------------------------------------------------------------------- diagnose text
def findings_text(findings: Sequence[Finding], runs: Sequence[RunAnalysis]) -> str:
    """The text report: per run, its findings ranked, with evidence and remedy."""
    width = min(WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)
    lines: list[str] = []
    for ctx in runs:
        mine = [f for f in findings if f.run == ctx.label]
        counts = {s: sum(1 for f in mine if f.severity == s) for s in ("high", "medium", "low")}
        tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no faults"
        lines.append(f"{ctx.label}  ({ctx.run.path})  {tally}")
        if not mine:
            lines += ["  nothing found: no rule fired", ""]
            continue
        for f in mine:
            lines.append(f"  {f.severity.upper():<6} {f.id}: {f.title}")
            lines += _wrapped(f.summary, width, "         ")
            if f.severity != "info" and f.evidence.height:
                lines.append("         evidence:")
                lines += ["           " + row for row in _table(f.evidence, EVIDENCE_ROWS)]
            if f.severity != "info":
                lines += _wrapped("remedy: " + f.remedy, width, "         ")
            lines.append("")
    return "\n".join(lines).rstrip()


def _wrapped(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(
        text, width=width, initial_indent=indent, subsequent_indent=indent + "  "
    ) or [indent]


def _table(frame: pl.DataFrame, rows: int) -> list[str]:
    """A frame as aligned text, at most ``rows`` rows (plus a note on the rest)."""
    shown = frame.head(rows)
    cells = [[str(c) for c in shown.columns]]
    for row in shown.iter_rows():
        cells.append([_cell(v) for v in row])
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    out = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    if frame.height > rows:
        out.append(f"... {frame.height - rows} more rows (--json has them all)")
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    if isinstance(value, list):
        return ",".join(map(str, value))
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


# ----------------------------------------------------------------------------- diff
def diff_report(a: RunAnalysis, b: RunAnalysis) -> dict[str, Any]:
    """The JSON document and the text of ``ppscope diff`` for two runs."""
    labels = [a.label, b.label]
    if labels[0] == labels[1]:
        labels = [f"{labels[0]} (a)", f"{labels[1]} (b)"]
    frame = config_diff(a.launch, b.launch, labels=labels, only_changed=True)
    changed: dict[str, list[Any]] = {}
    only_a: dict[str, Any] = {}
    only_b: dict[str, Any] = {}
    rows = []
    for (key,), group in frame.filter(pl.col("group") != "derived").group_by(
        "key", maintain_order=True
    ):
        va, vb = group["value"].to_list()
        meaning = group["meaning"][0]
        if va is not None and vb is not None:
            changed[str(key)] = [json.loads(va), json.loads(vb)]
        elif va is not None:
            only_a[str(key)] = json.loads(va)
        else:
            only_b[str(key)] = json.loads(vb)
        rows.append((str(key), group["group"][0], va, vb, meaning))
    da = derived_settings(a.server_args, a.facts)
    db = derived_settings(b.server_args, b.facts)
    derived = {k: [da[k], db[k]] for k in DERIVED_KEYS}
    document = {"changed": changed, "only_a": only_a, "only_b": only_b, "derived": derived}
    return {"json": document, "text": _diff_text(a, b, labels, rows, derived)}


def _diff_text(
    a: RunAnalysis,
    b: RunAnalysis,
    labels: list[str],
    rows: list[tuple[str, str, str | None, str | None, str]],
    derived: dict[str, list[Any]],
) -> str:
    lines = [f"a: {labels[0]}  ({a.run.path})", f"b: {labels[1]}  ({b.run.path})", ""]
    perf = [r for r in rows if r[1] != "other"]
    other = [r for r in rows if r[1] == "other"]
    if not rows:
        lines.append("the two launches have the same ServerArgs")
    table = [["key", "a", "b", "meaning"]]
    for key, _group, va, vb, meaning in perf:
        table.append([key, _value(va), _value(vb), meaning])
    if len(table) > 1:
        lines += _columns(table)
    if other:
        lines.append("")
        lines.append(f"other differences ({len(other)}):")
        shown = [[key, _value(va), _value(vb)] for key, _g, va, vb, _m in other[:20]]
        lines += ["  " + r for r in _columns([["key", "a", "b"], *shown])]
        if len(other) > 20:
            lines.append(f"  ... {len(other) - 20} more (--json has them all)")
    lines.append("")
    lines.append("derived:")
    table = [["value", "a", "b", "meaning"]]
    for key, (va, vb) in derived.items():
        mark = "" if va == vb else " *"
        table.append([key + mark, _value(json.dumps(va)), _value(json.dumps(vb)),
                      DERIVED_KEYS[key]])  # fmt: skip
    lines += ["  " + r for r in _columns(table)]
    return "\n".join(lines)


def _value(text: str | None) -> str:
    if text is None:
        return "(absent)"
    shown = text.strip('"') if text.startswith('"') else text
    return shown if len(shown) <= 36 else shown[:35] + "…"


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


# ----------------------------------------------------------------------------- json
