"""The report's header: which runs, on what hardware, and a banner for synthetic data."""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.load.run import Run
from toolkit.report.redact import escape
from toolkit.report.runs import RunSet
from toolkit.report.view import (
    STYLE,
    Table,
    View,
    clean,
    para,
)

__all__ = ["header"]

_KEY = ("run", "layout", "hardware", "interconnect", "GPUs", "log span")


def _sglang_version(run: Run) -> str | None:
    launch = run.launch
    if launch is None:
        return None
    # SGLang does not print its version in the server log; a loader that finds it elsewhere
    # (a banner, pip freeze) reports it as a startup fact
    for key in ("sglang_version", "version"):
        value = launch.facts().get(key)
        if isinstance(value, str | int | float):
            return str(value)
    return None


def header(runs: RunSet) -> View:
    """Which runs, on what hardware and interconnect, which SGLang; a banner for synthetic data."""
    rows = []
    for run, label, given in zip(runs, runs.labels, runs.shown_paths, strict=True):
        ctx = runs.analysis(run)
        machine, model = ctx.machine, ctx.model
        span = None
        if run.log is not None and run.log.batches.height:
            ts = run.log.batches["ts"].drop_nulls()
            if ts.len():
                span = f"{ts.min()} – {ts.max()}"
        rows.append(
            {
                "run": label,
                "directory": given,
                "layout": run.layout.describe(),
                "layout from": run.layout.layout_from,
                "hardware": machine.gpu,
                "hardware from": machine.gpu_from,
                "interconnect": machine.interconnect,
                "interconnect from": machine.interconnect_from,
                "GPUs": machine.gpus,  # the count every other place states
                "SGLang": _sglang_version(run) or "not in the log",
                "model": clean(model.id) if model.id else None,
                "architecture": clean(model.describe()) if model.id else model.describe(),
                "log span": span,
                "synthetic": run.config.synthetic,
            }
        )
    frame = pl.DataFrame(rows, infer_schema_length=None)
    notes = [(label, run.config.notes) for run, label in zip(runs, runs.labels, strict=True)]
    items: list[Any] = [STYLE]
    synthetic = [r["run"] for r in rows if r["synthetic"]]
    if synthetic:
        items.append(
            '<div class="ppscope-banner">Synthetic data: '
            f"{escape(', '.join(synthetic))} "
            f"{'was' if len(synthetic) == 1 else 'were'} generated, not measured. "
            "Numbers illustrate the method; they describe no real machine.</div>"
        )
    hardware = sorted({r["hardware"] for r in rows if r["hardware"]})
    link = sorted({r["interconnect"] for r in rows if r["interconnect"]})
    items.append(
        para(
            f"{', '.join(runs.labels)}"
            + (f" on {', '.join(hardware)}" if hardware else "")
            + (f" ({', '.join(link)})" if link else "")
            + "."
        )
    )
    items.append(Table(frame.drop("synthetic"), key=_KEY))
    for label, text in notes:
        if text:
            items.append(
                f"<details><summary>notes on {escape(label)} (run.toml)</summary>"
                f"<p>{escape(clean(text))}</p></details>"
            )
    records = [
        r | {"notes": clean(t) if t else None} for r, (_, t) in zip(rows, notes, strict=True)
    ]
    return View("header", items, {"runs": records})
