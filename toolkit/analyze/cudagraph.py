"""CUDA-graph coverage: captured decode batch sizes against the batch sizes decode really ran.

A decode step runs its captured CUDA graph when the batch fits the capture list (padded up to
the next captured size unless ``disable_cuda_graph_padding``); otherwise it runs eagerly, paying
a kernel launch per op. The decode line's ``cuda graph: True/False`` is the flag for that
micro-batch (≥0.4.6). Under PP the batch that must fit is one *slot* (``#running-req``), and
``cuda_graph_max_bs`` depends on ``tp_size``, not ``pp_size``, so PP8×TP1 captures half of
TP8's range.

Decode lines are every 40th micro-batch step, a uniform sample, so the share of eager lines
estimates the share of eager steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from toolkit.analyze.stages import reference_lines
from toolkit.schema import Column, schema_of

__all__ = ["GRAPH_COVERAGE", "cuda_graph_coverage", "graph_summary"]

_I, _F, _B = pl.Int64(), pl.Float64(), pl.Boolean()

GRAPH_COVERAGE_COLUMNS: tuple[Column, ...] = (
    Column("running_req", _I, "decode batch size (one slot under PP)"),
    Column("lines", _I, "decode lines with this batch size"),
    Column("graph_lines", _I, "lines flagged `cuda graph: True`"),
    Column("eager_lines", _I, "lines flagged `cuda graph: False` (ran eagerly)"),
    Column("unflagged_lines", _I, "lines without the flag (versions before 0.4.6)"),
    Column("captured", _B, "the size fits the capture list; null when the list is unknown"),
    Column("eager_share", _F, "eager lines over flagged lines"),
)
GRAPH_COVERAGE = schema_of(GRAPH_COVERAGE_COLUMNS)


def cuda_graph_coverage(
    batches: pl.DataFrame,
    captured: Sequence[int] | None = None,
    *,
    padding: bool = True,
) -> pl.DataFrame:
    """Per observed decode batch size: lines, graph vs eager, and whether it was captured.

    Parameters
    ----------
    batches
        ``SGLangLog.batches`` of one launch (one reference stage is read: under PP
        every stage prints the same micro-batches).
    captured
        Captured decode batch sizes (``config.captured_sizes``); ``[]`` when graphs are off,
        None when unknown.
    padding
        SGLang pads a batch up to the next captured size (the default).
    """
    decode = reference_lines(batches, "decode").filter(pl.col("running_req") > 0)
    if not decode.height:
        return pl.DataFrame(schema=GRAPH_COVERAGE)
    out = (
        decode.group_by("running_req")
        .agg(
            lines=pl.len(),
            graph_lines=(pl.col("cuda_graph") == True).sum(),  # noqa: E712 (null stays out)
            eager_lines=(pl.col("cuda_graph") == False).sum(),  # noqa: E712
            unflagged_lines=pl.col("cuda_graph").is_null().sum(),
        )
        .sort("running_req")
    )
    flagged = pl.col("graph_lines") + pl.col("eager_lines")
    if captured is None:
        fits = pl.lit(None, _B)
    elif not captured:
        fits = pl.lit(False)
    elif padding:
        fits = pl.col("running_req") <= max(captured)
    else:
        fits = pl.col("running_req").is_in(list(captured))
    out = out.with_columns(
        captured=fits,
        eager_share=pl.when(flagged > 0).then(pl.col("eager_lines") / flagged),
    )
    return out.select(GRAPH_COVERAGE.names()).cast(dict(GRAPH_COVERAGE))


def graph_summary(coverage: pl.DataFrame, captured: Sequence[int] | None = None) -> dict[str, Any]:
    """Totals of a coverage table: decode lines, eager lines and share, sizes above the capture.

    ``eager_share`` counts flagged lines; without flags (old versions) the sizes outside the
    capture list stand in for them.
    """
    lines = int(coverage["lines"].sum() or 0)
    eager = int(coverage["eager_lines"].sum() or 0)
    flagged = eager + int(coverage["graph_lines"].sum() or 0)
    uncaptured = int(coverage.filter(pl.col("captured") == False)["lines"].sum() or 0)  # noqa: E712
    share = eager / flagged if flagged else (uncaptured / lines if lines and captured else None)
    return {
        "decode_lines": lines,
        "flagged_lines": flagged,
        "eager_lines": eager,
        "eager_share": share,
        "uncaptured_lines": uncaptured,
        "max_captured": max(captured) if captured else (0 if captured is not None else None),
        "max_observed": int(coverage["running_req"].max() or 0) if coverage.height else None,
    }
