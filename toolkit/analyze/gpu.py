"""GPU telemetry analyses: chart-sized series, busy/idle shares, oscillation, stage balance.

The busy measure is ``toolkit.analyze.series.busy_pct``: DCGM's ``sm_active`` (as %) when the
trace has it, else ``util_pct``, which counts a NCCL kernel waiting for its pipeline peer as
running; read ``power_w`` and ``sm_clock_mhz`` next to either. The sampling window is 1/6–1 s,
so millisecond bubbles average out: these functions measure steady-state shares, not bubble
timing.

All functions are pure: frames and keyword options in, a new frame (or dict) out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from toolkit.analyze import series
from toolkit.load.gpu.roles import join_roles
from toolkit.schema.gpu import METRICS

GLOSSARY: dict[str, str] = {
    "util_pct": (
        "time a kernel was running, % — a NCCL kernel waiting for its pipeline peer counts "
        "as busy, so bubbles can hide behind ~100 %"
    ),
    "sm_active": "share of cycles an SM had at least one warp (DCGM): the better 'busy'",
    "busy_share": "share of samples at or above the busy threshold (default 50 %)",
    "idle_share": "share of samples below the idle threshold (default 5 %)",
    "below_share": "share of samples below 50 % while the server was decoding: the oscillation",
    "imbalance": "busiest stage's mean busy % over the mean of all stages (1.0 = balanced)",
}

DOWNSAMPLED = pl.Schema(
    {
        "ts": pl.Datetime("ms"),
        "gpu": pl.Int32(),
        "metric": pl.String(),
        "min": pl.Float64(),
        "mean": pl.Float64(),
        "max": pl.Float64(),
        "samples": pl.UInt32(),
    }
)


def _keys(samples: pl.DataFrame) -> list[str]:
    """GPU identity: the index, plus node, host and MIG instance where a trace has them."""
    keys = ["gpu"]
    for extra in ("node", "host", "mig_instance"):
        if extra in samples.columns and samples.get_column(extra).null_count() < samples.height:
            keys.insert(0, extra) if extra != "mig_instance" else keys.append(extra)
    return keys


def downsample(
    samples: pl.DataFrame,
    every: str = "10s",
    metrics: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Min, mean and max of each metric per GPU per time bucket, in long form for charts.

    Buckets are fixed (``series.bucket_start``: ``ts`` truncated to ``every`` on the epoch's
    grid) and grouped without sorting the input; only the small result is sorted.

    Parameters
    ----------
    samples
        ``GpuTrace.samples`` (needs ``ts`` and ``gpu``).
    every
        Bucket width (``"1s"``, ``"10s"``, ``"1m"``, ``"500ms"``; ``series.duration_ms``).
    metrics
        Columns to keep; default: every numeric metric with at least one value.

    Returns
    -------
    pl.DataFrame
        ``ts`` (bucket start), ``gpu`` (plus ``host``/``mig_instance`` when present),
        ``metric``, ``min``, ``mean``, ``max``, ``samples``.
    """
    if metrics is None:
        metrics = [
            c
            for c in [*METRICS, *samples.columns]
            if c in samples.columns
            and samples.schema[c].is_numeric()
            and c not in ("lineno", "sample", "gpu", "mig_instance", "elapsed_s")
            and samples.get_column(c).null_count() < samples.height
        ]
        metrics = list(dict.fromkeys(metrics))
    keys = _keys(samples)
    if not metrics or not samples.height:
        return pl.DataFrame(schema={**DOWNSAMPLED})
    bucket = series.bucket_start("ts", series.duration_ms(every), samples.schema["ts"])
    aggs = [pl.len().alias("samples")]
    for i, m in enumerate(metrics):
        aggs += [
            pl.col(m).min().alias(f"min{i}"),
            pl.col(m).mean().alias(f"mean{i}"),
            pl.col(m).max().alias(f"max{i}"),
        ]
    wide = (
        samples.lazy()
        .filter(pl.col("ts").is_not_null())
        .group_by(bucket, *keys)
        .agg(aggs)
        .collect()
    )
    # Long form by stacking one small frame per metric (cheaper than unpivot + pivot).
    long = pl.concat(
        [
            wide.select(
                "ts",
                *keys,
                metric=pl.lit(m),
                min=pl.col(f"min{i}").cast(pl.Float64),
                mean=pl.col(f"mean{i}").cast(pl.Float64),
                max=pl.col(f"max{i}").cast(pl.Float64),
                samples=pl.col("samples"),
            )
            for i, m in enumerate(metrics)
        ]
    )
    return long.sort("metric", *keys, "ts")


def busy_share(
    samples: pl.DataFrame,
    *,
    metric: str | None = None,
    busy_pct: float = 50.0,
    idle_pct: float = 5.0,
) -> pl.DataFrame:
    """Per GPU: mean busy %, and the share of samples busy (≥ ``busy_pct``) and idle.

    The busy measure is ``series.busy_pct``: ``sm_active`` (as %) when present, else
    ``util_pct``, which over-reads under pipeline parallelism.
    """
    value, metric = series.busy_pct(samples, metric)
    keys = _keys(samples)
    return (
        samples.lazy()
        .select(*keys, v=value)
        .filter(pl.col("v").is_not_null())
        .group_by(keys)
        .agg(
            samples=pl.len(),
            mean_pct=pl.col("v").mean(),
            busy_share=(pl.col("v") >= busy_pct).mean(),
            idle_share=(pl.col("v") < idle_pct).mean(),
        )
        .with_columns(metric=pl.lit(metric))
        .sort(keys)
        .collect()
    )


def oscillation(
    samples: pl.DataFrame,
    batches: pl.DataFrame,
    *,
    metric: str | None = None,
    threshold_pct: float = 50.0,
    max_gap_s: float | None = None,
) -> pl.DataFrame:
    """Per GPU: the share of samples below ``threshold_pct`` while the server was decoding,
    and the busy % of that time (``series.busy_in_windows``).

    Under PP a GPU that swings between ~40 % and 100 % while requests are being decoded is
    waiting for its neighbours part of the time: the pipeline bubble as a monitor sees it.
    Samples outside decoding windows (idle server, startup) are left out.
    """
    value, metric = series.busy_pct(samples, metric)
    keys = _keys(samples)
    windows = series.decoding_windows(batches, max_gap_s=max_gap_s)
    base = samples.select(pl.col("ts").cast(pl.Datetime("ms")), *keys, v=value).filter(
        pl.col("ts").is_not_null() & pl.col("v").is_not_null()
    )
    if not windows.height or not base.height:
        return pl.DataFrame(schema=_osc_schema(samples, keys))
    inside = series.in_windows(base, windows)
    weighted, _ = series.busy_in_windows(
        samples, windows.select("start", "end"), keys, metric=metric
    )
    return (
        inside.group_by(keys)
        .agg(
            samples=pl.len(),
            below_share=(pl.col("v") < threshold_pct).mean(),
            p10_pct=pl.col("v").quantile(0.1),
            p90_pct=pl.col("v").quantile(0.9),
        )
        .join(weighted.select(*keys, mean_pct="busy_pct"), on=keys, how="left")
        .with_columns(metric=pl.lit(metric))
        .sort(keys)
        .select(list(_osc_schema(samples, keys)))
    )


def _osc_schema(samples: pl.DataFrame, keys: list[str]) -> dict[str, Any]:
    return {
        **{k: samples.schema[k] for k in keys},
        "samples": pl.UInt32,
        "below_share": pl.Float64,
        "mean_pct": pl.Float64,
        "p10_pct": pl.Float64,
        "p90_pct": pl.Float64,
        "metric": pl.String,
    }


def stage_comparison(
    samples: pl.DataFrame,
    roles: pl.DataFrame,
    *,
    metric: str | None = None,
    busy_pct: float = 50.0,
) -> pl.DataFrame:
    """Per pipeline stage: its GPUs, mean busy %, busy share, and ``vs_mean`` (stage mean
    over the mean of all stages). ``imbalance`` (same on every row) is the largest
    ``vs_mean``: max/mean busy, 1.0 when the stages are balanced.

    ``roles`` is ``gpu_roles(launch)``; on a multi-node launch samples match on their
    ``node`` too (``roles.join_roles``), so pass the run's placed samples (``Run.node_samples``).
    """
    shares = busy_share(samples, metric=metric, busy_pct=busy_pct)
    if not shares.height:
        return pl.DataFrame()
    joined = join_roles(shares, roles, ("pp", "tp", "label"))
    per_stage = (
        joined.group_by("pp")
        .agg(
            gpus=pl.col("gpu").sort(),
            labels=pl.col("label").sort_by("gpu"),
            mean_pct=pl.col("mean_pct").mean(),
            busy_share=pl.col("busy_share").mean(),
            samples=pl.col("samples").sum(),
        )
        .sort("pp")
    )
    overall = per_stage.get_column("mean_pct").mean()
    per_stage = per_stage.with_columns(
        vs_mean=pl.col("mean_pct") / overall if overall else pl.lit(None, pl.Float64),
        metric=pl.lit(shares.get_column("metric")[0]),
    )
    return per_stage.with_columns(imbalance=pl.col("vs_mean").max())


def align(trace_samples: pl.DataFrame, log_batches: pl.DataFrame) -> dict[str, Any]:
    """Where the GPU trace and the server log overlap in time.

    Returns
    -------
    dict
        ``trace_start``/``trace_end``, ``log_start``/``log_end``, ``overlap_start``/
        ``overlap_end`` (None without overlap), ``overlap_s``, ``trace_covered`` and
        ``log_covered`` (share of each span inside the overlap, 0–1), and ``gap_s`` (seconds
        between the spans when they do not overlap: a hint for ``clock_offset_s``).
    """
    t = trace_samples.select(
        lo=pl.col("ts").min().cast(pl.Datetime("ms")), hi=pl.col("ts").max().cast(pl.Datetime("ms"))
    ).row(0)
    b = log_batches.select(
        lo=pl.col("ts").min().cast(pl.Datetime("ms")), hi=pl.col("ts").max().cast(pl.Datetime("ms"))
    ).row(0)
    out: dict[str, Any] = {
        "trace_start": t[0],
        "trace_end": t[1],
        "log_start": b[0],
        "log_end": b[1],
        "overlap_start": None,
        "overlap_end": None,
        "overlap_s": 0.0,
        "trace_covered": 0.0,
        "log_covered": 0.0,
        "gap_s": None,
    }
    if None in (*t, *b):
        return out
    start, end = max(t[0], b[0]), min(t[1], b[1])
    if start > end:
        out["gap_s"] = (start - end).total_seconds()
        return out
    overlap = (end - start).total_seconds()
    trace_span = (t[1] - t[0]).total_seconds()
    log_span = (b[1] - b[0]).total_seconds()
    out.update(
        overlap_start=start,
        overlap_end=end,
        overlap_s=overlap,
        trace_covered=overlap / trace_span if trace_span else 1.0,
        log_covered=overlap / log_span if log_span else 1.0,
    )
    return out
