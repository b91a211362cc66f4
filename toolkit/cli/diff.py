"""``ppscope diff``: two launches' ServerArgs side by side, parallel settings first.

Each differing setting comes with its meaning, then the values SGLang derives from the flags
(``pp_loop_size``, per-slot cap, KV pool, captured graph sizes). ``--json`` prints
``{"changed": {key: [a, b]}, "only_a": {key: a}, "only_b": {key: b},
"derived": {key: [a, b]}, "runtime": {"a": [...], "b": [...]}}``; ``runtime`` lists each side's
changes made while it ran (``/set_internal_state``, from its log or ``/server_info``
answers) with the phases each was in force in. A side whose log printed no ServerArgs dump is
said so.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.analyze.config import DERIVED_KEYS, config_diff, derived_settings
from toolkit.analyze.runtime_config import config_in_force
from toolkit.cli.options import add_json, add_output, add_quiet
from toolkit.cli.output import aligned, emit, to_json
from toolkit.cli.runs import damage_status, load_analyses
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["diff_report"]

NAME = "diff"
HELP = "two launches' ServerArgs side by side, with what SGLang derived from them"
EXAMPLES = """\
examples:
  ppscope diff runs/tp8 runs/pp8
  ppscope diff runs/pp8 runs/pp8-fixed --json
"""
OTHER_SHOWN = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", type=Path, metavar="RUN_A", help="run directory A")
    parser.add_argument("b", type=Path, metavar="RUN_B", help="run directory B")
    parser.set_defaults(stdin_as="run")  # '-': one log from standard input
    add_json(parser)
    add_output(parser)
    add_quiet(parser)


def run(args: argparse.Namespace) -> int:
    runs = load_analyses([args.a, args.b], quiet=args.quiet, title="diff")
    for path, ctx in zip((args.a, args.b), runs, strict=True):
        if ctx.launch is None:
            raise ToolkitError(f"{path}: no server launch found (no SGLang log)")
        if not ctx.server_args:
            raise ToolkitError(
                f"{path}: the log printed no server_args dump, so there is nothing to compare "
                f"(layout from {ctx.run.layout.layout_from}: {ctx.run.layout.describe()})"
            )
    report = diff_report(runs[0], runs[1])
    emit(to_json(report["json"]) if args.json else report["text"], args.output)
    return damage_status(runs)


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
    runtime = {side: _runtime(ctx) for side, ctx in (("a", a), ("b", b))}
    document = {
        "changed": changed,
        "only_a": only_a,
        "only_b": only_b,
        "derived": derived,
        "runtime": runtime,
    }
    return {"json": document, "text": _text(a, b, labels, rows, derived, runtime)}


def _runtime(ctx: RunAnalysis) -> list[dict[str, Any]]:
    """The run's runtime changes, each with the phases it was in force in."""
    changes = ctx.config_changes
    if not changes.height:
        return []
    in_force = config_in_force(ctx.server_args, changes, ctx.phases)
    out = []
    for r in changes.iter_rows(named=True):
        value = json.loads(r["value"])
        hit = in_force.filter(
            (pl.col("key") == r["key"])
            & ((pl.col("at_start") == r["value"]) | (pl.col("at_end") == r["value"]))
        )
        out.append(
            {
                "ts": r["ts"],
                "key": r["key"],
                "value": value,
                "status": r["status"],
                "source": r["source"],
                "note": r["note"],
                "phases": hit["phase"].to_list() if r["status"] == "set" else [],
            }
        )
    return out


def _text(
    a: RunAnalysis,
    b: RunAnalysis,
    labels: list[str],
    rows: list[tuple[str, str, str | None, str | None, str]],
    derived: dict[str, list[Any]],
    runtime: dict[str, list[dict[str, Any]]],
) -> str:
    lines = [f"a: {labels[0]}  ({a.run.path})", f"b: {labels[1]}  ({b.run.path})", ""]
    perf = [r for r in rows if r[1] != "other"]
    other = [r for r in rows if r[1] == "other"]
    if not rows:
        lines.append("the two launches have the same ServerArgs")
    if perf:
        body = [[key, _value(va), _value(vb), meaning] for key, _g, va, vb, meaning in perf]
        lines += aligned(["key", "a", "b", "meaning"], body)
    if other:
        lines += ["", f"other differences ({len(other)}):"]
        body = [[key, _value(va), _value(vb)] for key, _g, va, vb, _m in other[:OTHER_SHOWN]]
        lines += aligned(["key", "a", "b"], body, indent="  ")
        if len(other) > OTHER_SHOWN:
            lines.append(f"  ... {len(other) - OTHER_SHOWN} more (--json has them all)")
    lines += ["", "derived:"]
    body = [
        [key + ("" if va == vb else " *"), _value(json.dumps(va)), _value(json.dumps(vb)),
         DERIVED_KEYS[key]]
        for key, (va, vb) in derived.items()
    ]  # fmt: skip
    lines += aligned(["value", "a", "b", "meaning"], body, indent="  ")
    for side, changes in runtime.items():
        if changes:
            lines += ["", f"{side}: changed at runtime (the dump above is the launch's):"]
        for c in changes:
            when = f"{c['ts']:%H:%M:%S} " if c["ts"] is not None else ""
            phases = ", ".join(str(p) for p in c["phases"])
            where = f"; in force in phase {phases}" if phases else ""
            why = f" ({c['note']})" if c["note"] else ""
            value = json.dumps(c["value"])
            lines.append(f"  {when}{c['key']}={value} {c['status']}{why}, {c['source']}{where}")
    return "\n".join(lines)


def _value(text: str | None) -> str:
    if text is None:
        return "(absent)"
    shown = text.strip('"') if text.startswith('"') else text
    return shown if len(shown) <= 36 else shown[:35] + "…"
