"""A finding's promise checked against the runs that applied its remedy.

A remedy changes one launch setting (``pp_max_micro_batch_size``, ``cuda_graph_max_bs``, ...).
A peer run diagnosed in the same call that served the same model on the same kind of machine
with the same parallel sizes, and whose launch differs from this run's in that setting, applied
it: at each load both runs measured, the throughput the finding promised for that setting
stands beside the one the peer measured. The table (``PROMISE``) is the finding's ``promise``;
a measured load replaces the promise at that load, and the ratio of measured to promised there
rescales the promises at the loads the peer did not measure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import polars as pl

from toolkit.run_analysis import RunAnalysis

__all__ = [
    "PROMISE",
    "Promised",
    "Remedied",
    "measured_after",
    "promise_table",
    "remedy_runs",
]

PROMISE = {
    "run": pl.String,
    "setting": pl.String,
    "concurrency": pl.Int64,
    "now_tok_s": pl.Float64,
    "promised_tok_s": pl.Float64,
    "promised_low": pl.Float64,
    "promised_high": pl.Float64,
    "measured_tok_s": pl.Float64,
    "verdict": pl.String,
}
"""One row per remedy run and shared load: what was promised and what it measured."""


@dataclass(frozen=True)
class Promised:
    """The throughput a remedy is expected to give at one load, with its range."""

    tok_s: float
    low: float
    high: float


@dataclass(frozen=True)
class Remedied:
    """A peer run that applied a remedy: the run, and the value of the setting it ran with."""

    ctx: RunAnalysis
    value: Any


_SETTINGS = (
    "tp",
    "pp",
    "dp",
    "pp_async_batch_depth",
    "pp_max_micro_batch_size",
    "max_running_requests",
    "chunked_prefill_size",
    "max_total_num_tokens",
    "layer_partition",
)
"""The launch settings a remedy run must share with the run, but for the one it changed."""


def remedy_runs(
    ctx: RunAnalysis, setting: str, value_of: Callable[[RunAnalysis], Any]
) -> list[Remedied]:
    """The peers of ``ctx`` that changed ``setting`` and nothing else that shapes the
    schedule: same model and kind of machine, the same ``_SETTINGS`` but ``setting``, and
    ``value_of(peer) != value_of(ctx)``. A peer that changed two settings measured neither
    alone."""
    mine = value_of(ctx)
    others = [name for name in _SETTINGS if name != setting]
    out = []
    for peer in ctx.peers:
        if not ctx.shares_machine(peer):
            continue
        if any(getattr(peer.layout, n) != getattr(ctx.layout, n) for n in others):
            continue
        theirs = value_of(peer)
        if theirs is not None and theirs != mine:
            out.append(Remedied(peer, theirs))
    return out


def promise_table(
    ctx: RunAnalysis,
    setting: str,
    remedies: list[Remedied],
    promised: Callable[[int, Any], Promised | None],
) -> pl.DataFrame:
    """Per remedy run and load both runs measured: this run's tok/s, the promise for the value
    the remedy run used (``promised(concurrency, value)``), and what it measured, with a
    verdict (``within``, ``below`` or ``above`` the promised range)."""
    rows = []
    mine = ctx.throughput_curve
    for remedy in remedies:
        theirs = remedy.ctx.throughput_curve
        for c in sorted(set(mine) & set(theirs)):
            p = promised(c, remedy.value)
            if p is None:
                continue
            measured = theirs[c]
            verdict = (
                "within"
                if p.low <= measured <= p.high
                else ("below" if measured < p.low else "above")
            )
            rows.append(
                {
                    "run": remedy.ctx.label,
                    "setting": f"{setting}={remedy.value}",
                    "concurrency": c,
                    "now_tok_s": round(mine[c], 1),
                    "promised_tok_s": round(p.tok_s, 1),
                    "promised_low": round(p.low, 1),
                    "promised_high": round(p.high, 1),
                    "measured_tok_s": round(measured, 1),
                    "verdict": verdict,
                }
            )
    return pl.DataFrame(rows, schema=PROMISE, orient="row")


def measured_after(table: pl.DataFrame, concurrency: int) -> tuple[float, str] | None:
    """The remedied throughput a remedy run measured at ``concurrency`` (the first such run),
    with its name; None when none measured that load."""
    rows = table.filter(pl.col("concurrency") == concurrency)
    if not rows.height:
        return None
    row = rows.row(0, named=True)
    value = row["measured_tok_s"]
    return (float(value), str(row["run"])) if value and math.isfinite(value) else None
