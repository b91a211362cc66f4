"""Each pipeline stage's busy share from the best per-stage evidence a run holds, with its
source and its noise.

Sources, best first (``SOURCES``):

1. a GPU trace's ``sm_active`` (DCGM), then its ``util_pct``, read inside the windows on the
   GPUs of each stage (``gpu_roles``); ``util_pct`` counts a NCCL kernel waiting for its peer
   as busy, so it reads high on a stage that waits;
2. ``/metrics`` device time: ``sglang:gpu_execution_seconds_total`` (0.5.10 on, with
   ``SGLANG_ENABLE_METRICS_DEVICE_TIMER``) or ``sglang:forward_execution_seconds_total``
   (0.5.23) per ``pp_rank``: seconds the stage's GPU ran forwards over the wall time of the
   scrape intervals (``stage_wait.stage_wait_share``);
3. the log's ``fwd occupancy`` (decode lines of 0.5.16 on): the device time busy in forward;
4. ``/metrics`` scheduler seconds: one minus the share the stage's scheduler sat idle or
   waited in ``recv_requests`` for the previous stage (``scheduler_stage_seconds_total``, 0.5.20
   on), else minus the idle share (``scheduler_idle_seconds_total``): the loop's working share,
   not device time.

Per window the best source that measures every stage any source measures is kept, never a mix
of sources across stages. The noise is the standard error of the share over its one-second
bins (trace), scrape intervals (metrics) or decode lines (log).
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.series import busy_in_windows, busy_pct, decoding_windows, in_windows
from toolkit.analyze.stage_wait import stage_share_series, stage_wait_share
from toolkit.load.gpu.roles import join_roles
from toolkit.schema import Column, schema_of

__all__ = ["SOURCES", "STAGE_EVIDENCE", "stage_shares"]

_I, _F, _S, _T = pl.Int64(), pl.Float64(), pl.String(), pl.Datetime("ms")

SOURCES: tuple[str, ...] = (
    "gpu trace sm_active",
    "gpu trace util_pct",
    "/metrics device time",
    "log fwd occupancy",
    "/metrics scheduler",
)
"""Kinds of per-stage evidence, best first."""

STAGE_EVIDENCE_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "phase of the windows given; null: every decoding stretch of the run"),
    Column("pp", _I, "pipeline stage"),
    Column("busy_pct", _F, "share of the window's time the stage was busy, %"),
    Column("stderr_pct", _F, "standard error of busy_pct over its bins, intervals or lines, %"),
    Column("samples", _I, "1-s bins (trace), scrape intervals per rank (metrics), decode lines"),
    Column("source", _S, "the kind of evidence (``SOURCES``)"),
    Column("metric", _S, "what was read: sm_active, util_pct, the SGLang metric, fwd_occupancy"),
    Column("gpus", pl.List(pl.Int32()), "GPU indices of the stage (trace); else null"),
)
STAGE_EVIDENCE = schema_of(STAGE_EVIDENCE_COLUMNS)

_DEVICE_METRICS = ("sglang:gpu_execution_seconds_total", "sglang:forward_execution_seconds_total")
_WAITING = ("idle", "recv_requests")


def stage_shares(
    batches: pl.DataFrame,
    *,
    samples: pl.DataFrame | None = None,
    roles: pl.DataFrame | None = None,
    metrics: pl.DataFrame | None = None,
    windows: pl.DataFrame | None = None,
    timeline: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Per window and PP stage, the busy share from the best source at hand (schema
    ``STAGE_EVIDENCE``); empty when no source measures any stage.

    Parameters
    ----------
    batches
        The launch's batch lines (their decoding stretches when ``windows`` is None).
    samples, roles
        GPU trace samples on the log's clock and ``gpu_roles`` of the launch.
    metrics
        ``Metrics.samples`` on the log's clock.
    windows
        ``phase``, ``start``, ``end``; None: the run's decoding stretches, ``phase`` null.
    timeline
        ``stage_timeline(batches)``: its decode lines' ``fwd_occupancy_pct``.
    """
    if windows is None:
        spans = decoding_windows(batches).select("start", "end")
        windows = spans.with_columns(phase=pl.lit(None, _I))
    windows = windows.select(pl.col("phase").cast(_I), pl.col("start").cast(_T), "end")
    windows = windows.with_columns(pl.col("end").cast(_T))
    if not windows.height:
        return pl.DataFrame(schema=STAGE_EVIDENCE)
    found = [
        trace_shares(samples, roles, windows) if samples is not None else None,
        metrics_shares(metrics, windows) if metrics is not None else None,
        log_shares(timeline, windows) if timeline is not None else None,
        scheduler_shares(metrics, windows) if metrics is not None else None,
    ]
    frames = [f for f in found if f is not None and f.height]
    if not frames:
        return pl.DataFrame(schema=STAGE_EVIDENCE)
    every = pl.concat([f.select(STAGE_EVIDENCE.names()).cast(STAGE_EVIDENCE) for f in frames])  # type: ignore[arg-type]
    rank = pl.col("source").replace_strict(
        {s: i for i, s in enumerate(SOURCES)}, default=len(SOURCES), return_dtype=_I
    )
    window = pl.col("phase").fill_null(-1)
    every = every.with_columns(_rank=rank, _w=window)
    counts = every.group_by("_w", "_rank").agg(_stages=pl.len())
    most = counts.group_by("_w").agg(_most=pl.col("_stages").max())
    best = (
        counts.join(most, on="_w")
        .filter(pl.col("_stages") == pl.col("_most"))
        .group_by("_w")
        .agg(_rank=pl.col("_rank").min())
    )
    out = every.join(best, on=["_w", "_rank"]).sort("_w", "pp")
    return out.select(STAGE_EVIDENCE.names())


def trace_shares(
    samples: pl.DataFrame, roles: pl.DataFrame | None, windows: pl.DataFrame
) -> pl.DataFrame | None:
    """Per window and stage, the trace's busy % (``series.busy_in_windows``) and its standard
    error over one-second bins."""
    if roles is None or not roles.height or not samples.height:
        return None
    staged = join_roles(samples, roles.with_columns(pl.col("pp").cast(_I)))
    if not staged.height:
        return None
    shares, metric = busy_in_windows(staged, windows, ["pp"])
    if not shares.height:
        return None
    value, _ = busy_pct(staged, metric)
    points = staged.select("ts", pl.col("pp").cast(_I), v=value).filter(pl.col("v").is_not_null())
    binned = (
        in_windows(points, windows)
        .group_by("phase", "pp", pl.col("ts").dt.truncate("1s"))
        .agg(pl.col("v").mean())
    )
    noise = binned.group_by("phase", "pp").agg(
        stderr_pct=pl.col("v").std() / pl.len().sqrt(), bins=pl.len()
    )
    out = shares.join(noise, on=["phase", "pp"], how="left", nulls_equal=True)
    return out.with_columns(
        samples=pl.col("bins").cast(_I),
        source=pl.lit(f"gpu trace {metric}"),
        metric=pl.lit(metric),
    )


def metrics_shares(metrics: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame | None:
    """Per window and stage, the device-time share ``/metrics`` counted."""
    rows = metrics.filter(pl.col("metric").is_in(_DEVICE_METRICS) & pl.col("pp_rank").is_not_null())
    if not rows.height:
        return None
    shares = _wait_shares(rows, windows).filter(pl.col("measure") == "gpu_busy")
    if not shares.height:
        return None
    series = stage_share_series(rows).filter(pl.col("measure") == "gpu_busy")
    return _with_noise(
        shares.select(
            "phase",
            pp=pl.col("pp_rank").cast(_I),
            busy_pct=pl.col("share") * 100.0,
            samples=(pl.col("samples") // pl.col("ranks").clip(1)).cast(_I),
            metric=pl.col("metric"),
        ),
        series.select("ts", "pp_rank", "share", interval_s=pl.lit(None, _F)),
        rows,
        windows,
        "/metrics device time",
    )


def scheduler_shares(metrics: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame | None:
    """Per window and stage, one minus the share its scheduler sat idle or waited for the
    previous stage (``recv_requests``); without stage seconds, one minus the idle share."""
    staged = metrics.filter(pl.col("pp_rank").is_not_null())
    shares = _wait_shares(staged, windows)
    series = stage_share_series(staged)
    stage = shares.filter(pl.col("measure") == "scheduler_stage")
    if stage.height:
        waiting = stage.filter(pl.col("category").is_in(_WAITING))
        metric = "sglang:scheduler_stage_seconds_total"
        per_ts = series.filter(
            (pl.col("measure") == "scheduler_stage") & pl.col("category").is_in(_WAITING)
        )
    else:
        waiting = shares.filter(pl.col("measure") == "scheduler_idle")
        metric = "sglang:scheduler_idle_seconds_total"
        per_ts = series.filter(pl.col("measure") == "scheduler_idle")
    if not waiting.height:
        return None
    busy = waiting.group_by("phase", "pp_rank").agg(
        busy_pct=(1.0 - pl.col("share").sum()).clip(0.0, 1.0) * 100.0,
        samples=(pl.col("samples") // pl.col("ranks").clip(1)).min().cast(_I),
    )
    per_interval = per_ts.group_by("ts", "pp_rank").agg(share=1.0 - pl.col("share").sum())
    return _with_noise(
        busy.select(
            "phase",
            pp=pl.col("pp_rank").cast(_I),
            busy_pct="busy_pct",
            samples="samples",
            metric=pl.lit(metric),
        ),
        per_interval.select("ts", "pp_rank", "share", interval_s=pl.lit(None, _F)),
        staged.filter(pl.col("metric") == metric),
        windows,
        "/metrics scheduler",
    )


def _wait_shares(metrics: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    """``stage_wait_share`` over windows that may share a ``phase`` (all null: the run's
    decoding stretches): each window read on its own, then pooled per phase, a counter's
    share as the seconds it grew over the wall time its intervals cover."""
    numbered = windows.with_row_index("_window").with_columns(pl.col("_window").cast(_I))
    shares = stage_wait_share(metrics, numbered.select(phase="_window", start="start", end="end"))
    if not shares.height:
        return shares
    owner = numbered.select(pl.col("_window").alias("phase"), _phase=pl.col("phase"))
    pooled = (
        shares.join(owner, on="phase", how="left")
        .group_by("_phase", "pp_rank", "measure", "category", "metric")
        .agg(
            share=pl.when(pl.col("wall_s").sum() > 0)
            .then(pl.col("seconds").sum() / pl.col("wall_s").sum())
            .otherwise((pl.col("share") * pl.col("samples")).sum() / pl.col("samples").sum()),
            samples=pl.col("samples").sum(),
            ranks=pl.col("ranks").max(),
        )
    )
    return pooled.rename({"_phase": "phase"})


def _with_noise(
    shares: pl.DataFrame,
    series: pl.DataFrame,
    rows: pl.DataFrame,
    windows: pl.DataFrame,
    source: str,
) -> pl.DataFrame:
    """``shares`` with the standard error of the per-interval ``series`` shares whose
    interval midpoint lies in each window (the rule ``stage_wait_share`` places them by)."""
    length = rows.group_by("ts").agg(interval_s=pl.col("interval_s").max())
    points = series.drop("interval_s").join(length, on="ts", how="left")
    mid = pl.col("ts") - pl.duration(milliseconds=(pl.col("interval_s").fill_null(0) * 500).round())
    placed = in_windows(points.with_columns(_mid=mid), windows, on="_mid")
    noise = placed.group_by("phase", pp=pl.col("pp_rank").cast(_I)).agg(
        stderr_pct=pl.col("share").std() * 100.0 / pl.len().sqrt()
    )
    out = shares.join(noise, on=["phase", "pp"], how="left", nulls_equal=True)
    return out.with_columns(source=pl.lit(source), gpus=pl.lit(None, pl.List(pl.Int32())))


def log_shares(timeline: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame | None:
    """Per window and stage, the mean ``fwd occupancy`` of its decode lines."""
    lines = timeline.filter(
        (pl.col("kind") == "decode") & pl.col("fwd_occupancy_pct").is_not_null()
    ).select("ts", "pp", "fwd_occupancy_pct")
    if not lines.height:
        return None
    placed = in_windows(lines, windows)
    if not placed.height:
        return None
    return placed.group_by("phase", pl.col("pp").cast(_I)).agg(
        busy_pct=pl.col("fwd_occupancy_pct").mean(),
        stderr_pct=pl.col("fwd_occupancy_pct").std() / pl.len().sqrt(),
        samples=pl.len().cast(_I),
        source=pl.lit("log fwd occupancy"),
        metric=pl.lit("fwd_occupancy"),
        gpus=pl.lit(None, pl.List(pl.Int32())),
    )
