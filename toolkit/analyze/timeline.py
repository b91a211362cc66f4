"""Per-stage series over time, for the timeline views: each GPU's busy % with its stage, and
one long frame of decode activity and GPU busy per stage.

Pure functions of frames: ``SGLangLog.batches``, ``GpuTrace.samples``, ``gpu_roles(launch)``
and the launch's ``pp_size`` (None when no launch was found: GPUs are then shown one by one).
The busy measure is ``series.busy_pct``, the same as ``stages.stage_busy``'s, so the
timeline, the report's stage strips and the diagnosis agree on how busy a stage was.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from toolkit.analyze.series import (
    bucket_width,
    busy_pct,
    downsample_means,
    duration_ms,
    epoch_ms,
    mean_per_bucket,
)
from toolkit.load.gpu.roles import join_roles
from toolkit.schema import Column, schema_of

__all__ = [
    "GPU_SERIES",
    "STAGE_FRAME",
    "in_window",
    "span_minutes",
    "stage_frame",
    "stage_gpu_series",
    "stage_label",
    "stage_names",
    "stage_order",
    "time_span",
]

_I, _F, _T = pl.Int64(), pl.Float64(), pl.Datetime("ms")

GPU_SERIES_COLUMNS: tuple[Column, ...] = (
    Column("ts", _T, "start of the time bucket"),
    Column("node", pl.Int32(), "node rank of the GPU; null when the run did not place it"),
    Column("gpu", pl.Int32(), "GPU index on its node"),
    Column("pp", _I, "pipeline stage of the GPU; null when roles are unknown"),
    Column("busy_pct", _F, "mean busy % in the bucket (sm_active as %, else util_pct)"),
)
GPU_SERIES = schema_of(GPU_SERIES_COLUMNS)

STAGE_FRAME_COLUMNS: tuple[Column, ...] = (
    Column("t", _I, "epoch ms: a decode line's time, or the start of a GPU sample bucket"),
    Column("stage", pl.String(), "PP3, all GPUs (one stage), or GPU 3 (no launch known)"),
    Column(
        "series",
        pl.String(),
        "running_req, gen_tok_s (decode lines), or the busy metric: sm_active or util_pct",
    ),
    Column("value", _F, "the series' value; busy metrics in %"),
)
STAGE_FRAME = schema_of(STAGE_FRAME_COLUMNS)


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
    node = pl.col("node") if "node" in samples.columns else pl.lit(None)
    points = samples.select(
        pl.col("ts").cast(_T),
        node.cast(pl.Int32).alias("node"),
        pl.col("gpu").cast(pl.Int32),
        busy_pct=value,
    ).filter(pl.col("ts").is_not_null() & pl.col("busy_pct").is_not_null())
    if not points.height:
        return pl.DataFrame(schema=GPU_SERIES)
    lo, hi = points.select(epoch_ms().min().alias("lo"), epoch_ms().max().alias("hi")).row(0)
    each = max_points // points.select("node", "gpu").n_unique()
    width = bucket_width(lo, hi, each, duration_ms(every))
    out = mean_per_bucket(points, width, ["node", "gpu"], ["busy_pct"], time="ts")
    out = out.sort("node", "gpu", "ts", nulls_last=True)
    if roles is not None and roles.height:
        out = join_roles(out, roles.with_columns(pl.col("pp").cast(_I)), how="left")
    else:
        out = out.with_columns(pp=pl.lit(None, _I))
    return out.select(GPU_SERIES.names()).cast(dict(GPU_SERIES))


# ── the report's stage strips ─────────────────────────────────────────────────────────────────


def stage_label(pp_size: int | None) -> pl.Expr:
    """``PP3`` per pipeline stage (from ``pp``), ``all GPUs`` when the layout has one stage."""
    if pp_size is not None and pp_size > 1:
        return pl.format("PP{}", pl.col("pp")).fill_null("all GPUs").alias("stage")
    return pl.lit("all GPUs").alias("stage")


def stage_order(stage: str) -> tuple[int, str]:
    """Sort key of a stage label: by its number (``PP2`` before ``PP10``), labels without one
    first."""
    digits = "".join(ch for ch in stage if ch.isdigit())
    return (int(digits) if digits else -1, stage)


def _decode(batches: pl.DataFrame | None) -> pl.DataFrame | None:
    """Decode lines with a time, or None when there are none."""
    if batches is None or not batches.height:
        return None
    rows = batches.filter((pl.col("kind") == "decode") & pl.col("ts").is_not_null())
    return rows if rows.height else None


def _busy_values(samples: pl.DataFrame | None) -> tuple[pl.Expr, str] | None:
    """The busy expression and metric of a trace that has values for it, else None."""
    if samples is None or not samples.height or "ts" not in samples.columns:
        return None
    value, metric = busy_pct(samples)
    if metric not in samples.columns or samples[metric].null_count() == samples.height:
        return None
    return value, metric


def time_span(batches: pl.DataFrame | None, samples: pl.DataFrame | None) -> tuple[int, int] | None:
    """(first, last) epoch ms of the decode lines and GPU samples together; None when neither
    has a time."""
    bounds = []
    rows = _decode(batches)
    if rows is not None:
        bounds.append(rows.select(epoch_ms().min().alias("lo"), epoch_ms().max().alias("hi")))
    if samples is not None and samples.height and "ts" in samples.columns:
        ts = samples.filter(pl.col("ts").is_not_null())
        bounds.append(ts.select(epoch_ms().min().alias("lo"), epoch_ms().max().alias("hi")))
    if not bounds:
        return None
    both = pl.concat(bounds)
    lo, hi = both["lo"].min(), both["hi"].max()
    return (int(lo), int(hi)) if lo is not None and hi is not None else None  # type: ignore[arg-type]


def span_minutes(span: tuple[int, int]) -> float:
    """Length of a ``time_span`` in minutes."""
    return (span[1] - span[0]) / 60_000


def in_window(span: tuple[int, int], window: tuple[float, float] | None) -> pl.Expr:
    """Rows of ``t`` inside ``window``, minutes from the start of ``span``; all without one."""
    if window is None:
        return pl.lit(True)
    lo, hi = (span[0] + int(w * 60_000) for w in window)
    return (pl.col("t") >= lo) & (pl.col("t") <= hi)


def stage_names(
    batches: pl.DataFrame | None, gpus: Sequence[int] | None, pp_size: int | None
) -> list[str]:
    """The stages ``stage_frame`` can show, in order: those of the decode lines and, when the
    trace's GPU indices ``gpus`` are given, those the GPUs map to."""
    stages: set[str] = set()
    rows = _decode(batches)
    if rows is not None:
        stages |= set(rows.select(stage_label(pp_size))["stage"].unique().to_list())
    if gpus is not None:
        if pp_size is None:
            stages |= {f"GPU {g}" for g in gpus}
        elif pp_size > 1:
            stages |= {f"PP{p}" for p in range(pp_size)}
        else:
            stages.add("all GPUs")
    return sorted(stages, key=stage_order)


def stage_frame(
    batches: pl.DataFrame | None,
    samples: pl.DataFrame | None,
    roles: pl.DataFrame | None,
    pp_size: int | None,
    *,
    window: tuple[float, float] | None = None,
    max_points: int = 20_000,
) -> tuple[pl.DataFrame, list[str]]:
    """Decode lines per stage and GPU busy per stage over time (schema ``STAGE_FRAME``), inside
    ``window`` (minutes from the first line or sample), and the stages in order.

    Decode lines give ``running_req`` and ``gen_tok_s``; GPU samples give the busy measure of
    ``series.busy_pct`` under its metric's name (``sm_active`` or ``util_pct``), averaged over
    the stage's GPUs (``roles``; without a launch, ``pp_size`` None, each GPU is its own row).
    Samples are bucketed per GPU (to ``2 × max_points``) before they are mapped to stages, so a
    day of 100 ms samples (7 M rows) is reduced first and joined after.
    """
    empty = pl.DataFrame(schema=STAGE_FRAME)
    span = time_span(batches, samples)
    if span is None:
        return empty, []
    parts = []
    rows = _decode(batches)
    if rows is not None:
        staged = rows.select(epoch_ms(), stage_label(pp_size), "running_req", "gen_tok_s").filter(
            in_window(span, window)
        )
        for series in ("running_req", "gen_tok_s"):
            parts.append(
                staged.filter(pl.col(series).is_not_null()).select(
                    "t", "stage", series=pl.lit(series), value=pl.col(series).cast(_F)
                )
            )
    busy = _busy_values(samples)
    if samples is not None and busy is not None:
        value, metric = busy
        node = pl.col("node") if "node" in samples.columns else pl.lit(None, pl.Int32)
        points = samples.select(epoch_ms(), node.alias("node"), "gpu", value=value).filter(
            pl.col("t").is_not_null() & pl.col("value").is_not_null() & in_window(span, window)
        )
        points, _ = downsample_means(points, ["node", "gpu"], ["value"], max(max_points, 1) * 2)
        if pp_size is not None and pp_size > 1 and roles is not None:
            points = join_roles(points, roles).with_columns(stage_label(pp_size))
        elif pp_size == 1:
            points = points.with_columns(stage=pl.lit("all GPUs"))
        else:  # no launch (or no roles for it): each GPU on its own row
            points = points.with_columns(stage=pl.format("GPU {}", "gpu"))
        parts.append(
            points.group_by("t", "stage")
            .agg(pl.col("value").mean())
            .select("t", "stage", series=pl.lit(metric), value=pl.col("value"))
        )
    if not parts:
        return empty, []
    long = pl.concat(parts, how="vertical_relaxed").cast(dict(STAGE_FRAME))
    order = sorted(long["stage"].unique().to_list(), key=stage_order)
    return long, order
