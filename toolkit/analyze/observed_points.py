"""The benchmark points of one run as the serving model reads them."""

from __future__ import annotations

import polars as pl

from toolkit.analyze.config import model_layout
from toolkit.analyze.model import observed_frame
from toolkit.load.run import Run

__all__ = ["observed_points"]


def observed_points(run: Run, label: str | None = None) -> pl.DataFrame:
    """The run's benchmark points joined with its layout, as the serving model reads them
    (schema ``OBSERVED``); empty when the run has no usable benchmark result.

    The concurrency is the one ``load_bench`` resolved (the client's cap, else the file, a tag
    or the label such as ``c32``); points without a concurrency or an output rate are left out.
    """
    results = run.bench
    if results is None or not results.runs.height:
        return observed_frame([])
    lay = model_layout(run.layout)
    runs = results.runs.filter(
        pl.col("concurrency").is_not_null()
        & (pl.col("concurrency") > 0)
        & pl.col("output_tok_s").is_not_null()
        & pl.col("output_tok_s").is_finite()
        & (pl.col("output_tok_s") > 0)
    )
    points = runs.select(
        pl.lit(label or run.label).alias("label"),
        pl.lit(lay.tp).alias("tp"),
        pl.lit(lay.pp).alias("pp"),
        pl.lit(lay.dp).alias("dp"),
        pl.lit(lay.pp_async_batch_depth).alias("pp_async_batch_depth"),
        pl.lit(lay.pp_max_micro_batch_size, pl.Int64).alias("pp_max_micro_batch_size"),
        pl.lit(lay.max_running_requests, pl.Int64).alias("max_running_requests"),
        pl.lit(lay.chunked_prefill_size).alias("chunked_prefill_size"),
        pl.lit(lay.max_total_num_tokens, pl.Int64).alias("max_total_num_tokens"),
        "concurrency",
        *(c for c in ("input_len", "output_len") if c in runs.columns),
        "output_tok_s",
    )
    return observed_frame(points)
