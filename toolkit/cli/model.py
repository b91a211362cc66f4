"""``ppscope model``: the serving model fitted to the runs, expected against observed.

Fits the model to the runs' single-stream points, prints expected vs observed for every point
(the residual is what the model leaves unexplained) and, with ``--what-if``, the prediction
under changed SGLang flags or workload. ``--json`` prints one object:
``{"params": {...}, "points": [{"label", "concurrency", "observed_tok_s", "expected_tok_s",
"residual_pct", "active_slots", "gpu_idle_share"}...]}`` plus ``"what_if"`` when asked. A run
directory among several that cannot be read is reported and left out (exit code 1).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

import polars as pl

from toolkit.analyze.model import (
    Fit,
    Hardware,
    ModelSpec,
    ObservedPoint,
    expected_vs_observed,
    fit,
    observed_frame,
    what_if_table,
)
from toolkit.cli.options import add_json, add_output, add_quiet, add_run_dirs
from toolkit.cli.output import aligned, emit, number, to_json
from toolkit.cli.runs import damage_status, load_analyses, report_problems
from toolkit.errors import ToolkitError
from toolkit.run_analysis import model_groups

__all__ = ["parse_what_if", "run_model"]

NAME = "model"
HELP = "the serving model: expected vs observed throughput, and what-if"
EXAMPLES = """\
examples:
  ppscope model runs/tp8 runs/pp8
  ppscope model runs/pp8 --what-if pp_max_micro_batch_size=4
  ppscope model runs/pp8 --what-if concurrency=64 --json
"""

_POINT_KEYS = (
    "label",
    "concurrency",
    "observed_tok_s",
    "expected_tok_s",
    "residual_pct",
    "active_slots",
    "gpu_idle_share",
)
_WHAT_IF_KEYS = (
    "label",
    "concurrency",
    "expected_tok_s",
    "what_if_tok_s",
    "change_pct",
    "active_slots",
    "occupancy",
    "gpu_idle_share",
    "regime",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_dirs(parser)
    add_json(parser)
    add_output(parser)
    add_quiet(parser)
    parser.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an SGLang flag or workload change, e.g. pp_max_micro_batch_size=4 (repeatable)",
    )


def run(args: argparse.Namespace) -> int:
    """Each run's observed points against its own model and machine (runs that share both share
    one fit)."""
    problems: list[str] = []
    analyses = load_analyses(
        args.paths, quiet=args.quiet, problems=problems, title="model", empty_ok=True
    )
    for ctx in analyses:
        if not ctx.observed.height:
            raise ToolkitError(f"{ctx.run.path}: no benchmark results to compare the model with")
    unknown = [ctx for ctx in analyses if ctx.fit is None]
    groups = [(fitted, pl.concat([c.observed for c in members]))
              for fitted, members in model_groups(analyses)]  # fmt: skip
    if not groups:
        label = unknown[0].label
        raise ToolkitError(
            f"{label}: {unknown[0].model.describe()}; the serving model needs the architecture"
        )
    report = model_report(groups, parse_what_if(args.what_if))
    text = to_json(report["json"]) if args.json else report["text"]
    if unknown and not args.json:
        text += "\n\n" + "\n".join(f"{c.label}: {c.model.describe()}" for c in unknown)
    emit(text, args.output)
    return max(report_problems(problems), damage_status(analyses))


def parse_what_if(items: Iterable[str]) -> dict[str, int | None]:
    """``["pp_max_micro_batch_size=4", "concurrency=64"]`` → a change dict; ``auto`` → None.

    Dashes are read as underscores, so SGLang's flag spelling works too.
    """
    changes: dict[str, int | None] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        value = value.strip()
        if not sep or not key or not value:
            raise ToolkitError(f"what-if: expected KEY=VALUE, got {item!r}")
        if value.lower() in ("auto", "none"):
            changes[key] = None
            continue
        try:
            changes[key] = int(value)
        except ValueError:
            raise ToolkitError(f"what-if: {key} needs an integer or auto, got {value!r}") from None
    return changes


def run_model(
    points: pl.DataFrame | Sequence[ObservedPoint | Mapping[str, Any]],
    what_if: Mapping[str, int | None] | None = None,
    as_json: bool = False,
    *,
    model: ModelSpec,
    prior: Hardware,
    high_load: bool = False,
    out: TextIO | None = None,
) -> int:
    """Fit ``points`` of one model on one machine, then print expected vs observed (and the
    what-if); returns the exit code. Raises ``ToolkitError`` on bad input or an unknown what-if
    key, for the CLI to report."""
    out = out or sys.stdout
    frame = observed_frame(points)
    if frame.height == 0:
        raise ToolkitError("model: no observed points to fit")
    fitted = fit(frame, model=model, prior=prior, high_load=high_load)
    report = model_report([(fitted, frame)], dict(what_if or {}))
    out.write((to_json(report["json"]) if as_json else report["text"]) + "\n")
    return 0


def model_report(
    groups: Sequence[tuple[Fit, pl.DataFrame]], changes: Mapping[str, int | None]
) -> dict[str, Any]:
    """The JSON document and the text of ``ppscope model``: one fit per group of runs that
    share a model and a machine, every point against its group's fit."""
    fits, points, scenarios, texts = [], [], [], []
    for fitted, frame in groups:
        expected = expected_vs_observed(fitted, frame)
        scenario = what_if_table(fitted, frame, changes) if changes else None
        labels = frame["label"].unique(maintain_order=True).to_list()
        fits.append({"runs": labels, **fitted.summary()})
        points += [{k: row[k] for k in _POINT_KEYS} for row in expected.iter_rows(named=True)]
        if scenario is not None:
            scenarios += [
                {k: row[k] for k in _WHAT_IF_KEYS} for row in scenario.iter_rows(named=True)
            ]
        texts.append(_render(fitted, expected, changes, scenario))
    document: dict[str, Any] = {"fits": fits, "points": points}
    if changes:
        document["what_if"] = {"changes": dict(changes), "points": scenarios}
    return {"json": document, "text": "\n\n".join(texts)}


# ── text ──────────────────────────────────────────────────────────────────────────────────────


def _arrow(before: int, after: int) -> str:
    return str(after) if before == after else f"{before}→{after}"


def _render(
    fitted: Fit,
    points: pl.DataFrame,
    changes: Mapping[str, int | None],
    scenario: pl.DataFrame | None,
) -> str:
    hw, m = fitted.params.hardware, fitted.params.model
    used = ", ".join(f"{lab} c={c}" for lab, c in fitted.calibration) or "none"
    status = {name: "fitted" for name in fitted.fitted} | {name: "prior" for name in fitted.fixed}
    status |= fitted.sources
    routing = "uniform routing (assumed)" if m.experts and m.e_eff == m.experts else "model"
    lines = [
        f"model: {m.name}",
        f"hardware: {hw.name}",
        f"fit from {len(fitted.calibration)} point(s): {used}",
        *aligned(
            ("  parameter", "value", "source"),
            [
                ("  HBM bandwidth β", f"{hw.hbm_bytes_s / 1e12:.2f} TB/s", status["hbm_bytes_s"]),
                ("  PP hop", f"{hw.hop_s * 1e3:.2f} ms", status["hop_s"]),
                ("  all-reduce α_AR", f"{hw.allreduce_s * 1e6:.0f} µs", status["allreduce_s"]),
                ("  overhead per step", f"{hw.overhead_s * 1e3:.2f} ms", status["overhead_s"]),
                ("  effective experts E_eff", f"{m.e_eff:.0f}", routing),
            ],
            keys=1,
        ),
        "",
    ]
    rows = []
    for r in points.iter_rows(named=True):
        rows.append(
            (
                r["label"],
                str(r["concurrency"]),
                number(r["observed_tok_s"], ".1f"),
                number(r["expected_tok_s"], ".1f"),
                number(r["residual_pct"], "+.1f") + " %",
                str(r["active_slots"]),
                r["occupancy"],
                number(100 * r["gpu_idle_share"], ".0f") + " %",
                r["regime"],
                number(r["observed_round_ms"], ".1f")
                + " / "
                + number(r["expected_round_ms"], ".1f"),
                "fit" if r["calibration"] else "",
            )
        )
    header = (
        "label",
        "c",
        "observed tok/s",
        "expected tok/s",
        "residual",
        "slots",
        "occupancy",
        "GPU idle",
        "regime",
        "round obs/exp ms",
        "",
    )
    lines += aligned(header, rows, keys=2)
    lines.append("residual = (observed − expected) / expected; 'fit' rows calibrated the model.")
    for r in points.iter_rows(named=True):
        gap, slots, pp = r["unexplained_round_ms"], r["active_slots"], r["pp"]
        if r["calibration"] or gap is None or not math.isfinite(gap) or abs(r["residual_pct"]) < 5:
            continue
        where = f"{r['label']} c={r['concurrency']}"
        if gap > 0:
            per = f" ({gap / slots:.1f} ms per active micro-batch" if slots else " ("
            per += f", {gap / pp:.1f} ms per stage pass)" if pp > 1 else ")"
            lines.append(f"{where}: {gap:.1f} ms per round unexplained{per}.")
        else:
            lines.append(f"{where}: {-gap:.1f} ms per round faster than the model predicts.")
    if scenario is not None:
        shown = ", ".join(f"{k}={'auto' if v is None else v}" for k, v in changes.items())
        lines += ["", f"what-if {shown}:"]
        rows = [
            (
                r["label"],
                _arrow(r["base_concurrency"], r["concurrency"]),
                number(r["expected_tok_s"], ".1f"),
                number(r["what_if_tok_s"], ".1f"),
                number(r["change_pct"], "+.1f") + " %",
                str(r["active_slots"]),
                r["occupancy"],
                number(100 * r["gpu_idle_share"], ".0f") + " %",
                r["regime"],
                number(r["round_ms"], ".1f"),
            )
            for r in scenario.iter_rows(named=True)
        ]
        header = (
            "label",
            "c",
            "expected tok/s",
            "what-if tok/s",
            "change",
            "slots",
            "occupancy",
            "GPU idle",
            "regime",
            "TPOT ms",
        )
        lines += aligned(header, rows, keys=2)
        lines.append("what-if values are the model's; add the residual above to compare with runs.")
    return "\n".join(lines)
