"""Per-stage series over time, for the timeline views: each GPU's busy % with its stage.

The busy measure is ``series.busy_pct``, the same as ``stages.stage_busy``'s.
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.series import bucket_width, busy_pct, duration_ms, epoch_ms, mean_per_bucket
from toolkit.schema import Column, schema_of

__all__ = ["GPU_SERIES", "stage_gpu_series"]

_I, _F, _T = pl.Int64(), pl.Float64(), pl.Datetime("ms")

GPU_SERIES_COLUMNS: tuple[Column, ...] = (
    Column("ts", _T, "start of the time bucket"),
    Column("gpu", pl.Int32(), "GPU index"),
    Column("pp", _I, "pipeline stage of the GPU; null when roles are unknown"),
    Column("busy_pct", _F, "mean busy % in the bucket (sm_active as %, else util_pct)"),
)
GPU_SERIES = schema_of(GPU_SERIES_COLUMNS)


def stage_gpu_series(
    samples: pl.DataFrame,
    roles: pl.DataFrame | None = None,
    *,
    every: str = "1s",
    max_points: int = 20_000,
) -> pl.DataFrame:
    """GPU busy % per GPU per time bucket, with each GPU's stage (schema ``GPU_SERIES``).

    The bucket is ``every``, widened to the narrowest round width (``series.bucket_width``)
    that leaves at most ``max_points`` rows, so a day-long 100 ms trace still charts.
    """
    if "ts" not in samples.columns or not samples.height:
        return pl.DataFrame(schema=GPU_SERIES)
    value, _ = busy_pct(samples)
    points = samples.select(
        pl.col("ts").cast(_T), pl.col("gpu").cast(pl.Int32), busy_pct=value
    ).filter(pl.col("ts").is_not_null() & pl.col("busy_pct").is_not_null())
    if not points.height:
        return pl.DataFrame(schema=GPU_SERIES)
    lo, hi = points.select(epoch_ms().min().alias("lo"), epoch_ms().max().alias("hi")).row(0)
    width = bucket_width(lo, hi, max_points // points["gpu"].n_unique(), duration_ms(every))
    out = mean_per_bucket(points, width, ["gpu"], ["busy_pct"], time="ts").sort("gpu", "ts")
    if roles is not None and roles.height:
        stage_of = roles.select(pl.col("gpu").cast(pl.Int32), pl.col("pp").cast(_I))
        out = out.join(stage_of, on="gpu", how="left")
    else:
        out = out.with_columns(pp=pl.lit(None, _I))
    return out.select(GPU_SERIES.names()).cast(dict(GPU_SERIES))
