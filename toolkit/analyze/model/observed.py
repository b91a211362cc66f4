"""Observed points: measured throughput of a layout under a workload, the model's input."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import polars as pl

from toolkit.analyze.model.spec import DEFAULT_CHUNKED_PREFILL, Layout, Workload
from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = [
    "OBSERVED",
    "ObservedPoint",
    "Points",
    "incident_points",
    "observed_frame",
    "point_layout",
    "point_workload",
]

_I, _F, _S = pl.Int64(), pl.Float64(), pl.String()

OBSERVED_COLUMNS: tuple[Column, ...] = (
    Column("label", _S, "layout label"),
    Column("tp", _I, "tensor parallel size"),
    Column("pp", _I, "pipeline parallel size"),
    Column("dp", _I, "data parallel size"),
    Column("pp_async_batch_depth", _I, "extra PP micro-batch slots"),
    Column("pp_max_micro_batch_size", _I, "per-slot request cap; null = auto"),
    Column("max_running_requests", _I, "request limit; null = SGLang's default"),
    Column("chunked_prefill_size", _I, "prefill chunk budget, tokens"),
    Column("max_total_num_tokens", _I, "KV pool, tokens; null = not limiting"),
    Column("concurrency", _I, "requests in flight"),
    Column("input_len", _I, "prompt tokens per request"),
    Column("output_len", _I, "generated tokens per request"),
    Column("output_tok_s", _F, "observed generated tokens per second (all streams)"),
)
OBSERVED = schema_of(OBSERVED_COLUMNS)

_OBSERVED_DEFAULTS: dict[str, Any] = {
    "dp": 1,
    "pp_async_batch_depth": 0,
    "pp_max_micro_batch_size": None,
    "max_running_requests": None,
    "chunked_prefill_size": DEFAULT_CHUNKED_PREFILL,
    "max_total_num_tokens": None,
    "input_len": 1000,
    "output_len": 1000,
}
_OBSERVED_REQUIRED = ("label", "tp", "pp", "concurrency", "output_tok_s")


@dataclass(frozen=True)
class ObservedPoint:
    """One measured point: a layout, a workload and its output throughput."""

    label: str
    tp: int
    pp: int
    concurrency: int
    output_tok_s: float
    pp_async_batch_depth: int = 0
    pp_max_micro_batch_size: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int = DEFAULT_CHUNKED_PREFILL
    max_total_num_tokens: int | None = None
    input_len: int = 1000
    output_len: int = 1000
    dp: int = 1


Points = pl.DataFrame | Iterable[ObservedPoint | Mapping[str, Any]]
"""What the model's functions accept as observed points."""


def observed_frame(points: Points) -> pl.DataFrame:
    """Observed points as an ``OBSERVED`` frame: missing optional columns get SGLang defaults.

    Accepts a frame (e.g. ``load_bench``'s runs: extra columns are dropped, mean lengths are
    rounded) or a sequence of ``ObservedPoint`` / mappings.
    """
    if not isinstance(points, pl.DataFrame):
        rows = [
            {f.name: getattr(p, f.name) for f in fields(ObservedPoint)}
            if isinstance(p, ObservedPoint)
            else dict(p)
            for p in points
        ]
        if not rows:
            return pl.DataFrame(schema=OBSERVED)
        points = pl.DataFrame(rows, infer_schema_length=None)
    if points.width == 0:
        return pl.DataFrame(schema=OBSERVED)
    missing = [c for c in _OBSERVED_REQUIRED if c not in points.columns]
    if missing:
        raise ToolkitError(f"observed points: missing column(s) {', '.join(missing)}")
    exprs = []
    for col in OBSERVED_COLUMNS:
        default = _OBSERVED_DEFAULTS.get(col.name)
        if col.name in points.columns:
            e = pl.col(col.name)
            if col.dtype == _I and points.schema[col.name].is_float():
                e = e.round(0)
            e = e.cast(col.dtype, strict=False)
            if col.name in ("tp", "pp"):
                e = e.fill_null(1)
            elif default is not None:
                e = e.fill_null(default)
        else:
            e = pl.lit(default, dtype=col.dtype)
        exprs.append(e.alias(col.name))
    frame = points.select(exprs)
    bad = frame.filter(
        pl.col("output_tok_s").is_null()
        | ~pl.col("output_tok_s").is_finite()
        | (pl.col("output_tok_s") <= 0)
        | (pl.col("concurrency").fill_null(0) < 1)
    )
    if bad.height:
        row = bad.row(0, named=True)
        raise ToolkitError(
            f"observed point {row['label']!r} c={row['concurrency']}: needs concurrency ≥ 1 and "
            f"a positive output_tok_s, got {row['output_tok_s']}"
        )
    return frame


def incident_points() -> pl.DataFrame:
    """The incident's four numbers: PP8 d=8 vs TP8 at c=1 and c=32, ISL ≈ 1000.

    Kimi K2.6 on 8× RTX PRO 6000 Blackwell (PCIe): PP8 with ``--pp-async-batch-depth 8`` gave
    34.3 tok/s at c=1 (TP8 26.3) but 248.1 at c=32 (TP8 577.8). The output length was not
    reported; 1000 is assumed (it only matters for KV reservation).
    """
    common = {"chunked_prefill_size": 8192, "input_len": 1000, "output_len": 1000}
    pp8 = {"label": "PP8", "tp": 1, "pp": 8, "pp_async_batch_depth": 8}
    pp8 |= {"max_total_num_tokens": 327680, **common}
    tp8 = {"label": "TP8", "tp": 8, "pp": 1, "max_total_num_tokens": 140000, **common}
    return observed_frame(
        [
            {**pp8, "concurrency": 1, "output_tok_s": 34.3},
            {**tp8, "concurrency": 1, "output_tok_s": 26.3},
            {**pp8, "concurrency": 32, "output_tok_s": 248.1},
            {**tp8, "concurrency": 32, "output_tok_s": 577.8},
        ]
    )


def point_layout(row: Mapping[str, Any]) -> Layout:
    """The ``Layout`` of one ``OBSERVED`` row."""
    return Layout(
        tp=int(row["tp"]),
        pp=int(row["pp"]),
        dp=int(row["dp"]),
        pp_async_batch_depth=int(row["pp_async_batch_depth"]),
        pp_max_micro_batch_size=row["pp_max_micro_batch_size"],
        max_running_requests=row["max_running_requests"],
        chunked_prefill_size=int(row["chunked_prefill_size"]),
        max_total_num_tokens=row["max_total_num_tokens"],
    )


def point_workload(row: Mapping[str, Any]) -> Workload:
    """The ``Workload`` of one ``OBSERVED`` row."""
    return Workload(int(row["concurrency"]), int(row["input_len"]), int(row["output_len"]))
