"""How each pipeline stage spent its time, per phase, as SGLang's own counters measured it.

Read from the ``/metrics`` table (``toolkit.schema.prometheus``), only series labelled with a
``pp_rank``. Seconds counters give a share of wall time: what the counter grew over the phase
divided by the wall time its scrapes cover. ``sglang:gpu_execution_seconds_total`` is the time
the stage's GPU ran forwards (``SGLANG_ENABLE_METRICS_DEVICE_TIMER``; named
``sglang:forward_execution_seconds_total`` from 0.5.23 on);
``sglang:scheduler_idle_seconds_total`` the time its scheduler had nothing to run;
``sglang:scheduler_stage_seconds_total{category}`` (SGLang ≥ 0.5.20) splits the scheduler loop
into exclusive stages, among them ``recv_requests``, where a stage after the first blocks until
the previous stage sends it the iteration's requests. Gauges give the share of scrapes at which
the stage had requests running or queued. Ranks of one stage that all report (TP or DP ranks,
or the same stage of several workers behind a gateway, told apart by ``WORKER_LABELS``) are
averaged, never added up.
"""

from __future__ import annotations

from datetime import datetime

import polars as pl

from toolkit.schema import Column, schema_of
from toolkit.schema.prometheus import WORKER_LABELS

__all__ = ["MEASURES", "STAGE_SERIES", "STAGE_SHARES", "stage_share_series", "stage_wait_share"]

_F, _I, _S = pl.Float64(), pl.Int64(), pl.String()

MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("gpu_busy", "sglang:gpu_execution_seconds_total", False),
    ("gpu_busy", "sglang:forward_execution_seconds_total", False),  # its name from 0.5.23
    ("scheduler_idle", "sglang:scheduler_idle_seconds_total", False),
    ("scheduler_stage", "sglang:scheduler_stage_seconds_total", True),
    ("running", "sglang:num_running_reqs", False),
    ("queued", "sglang:num_queue_reqs", False),
)
"""(measure, SGLang metric, split by its ``category`` label)."""
_GAUGES = {"running", "queued"}

STAGE_SHARE_COLUMNS: tuple[Column, ...] = (
    Column("phase", _I, "phase (decode_phases); null: the whole time the metrics cover"),
    Column("pp_rank", pl.Int32(), "pipeline stage"),
    Column("measure", _S, "gpu_busy, scheduler_idle, scheduler_stage, running or queued"),
    Column("category", _S, "scheduler_stage's category (recv_requests, run_batch, …); else null"),
    Column(
        "share",
        _F,
        "seconds counters: grown seconds over the wall time the series cover; running/queued: "
        "share of scrapes above 0",
    ),
    Column("seconds", _F, "seconds the counter grew in the phase, all ranks of the stage"),
    Column("wall_s", _F, "wall time the counted intervals cover, summed over the stage's ranks"),
    Column("samples", _I, "intervals (counters) or scrapes (gauges) read"),
    Column("ranks", _I, "ranks of the stage averaged (its TP/DP ranks that report)"),
    Column("metric", _S, "the SGLang metric read"),
)
STAGE_SHARES = schema_of(STAGE_SHARE_COLUMNS)

_RANK = ("pp_rank", "tp_rank", "dp_rank", "worker")


def _worker() -> pl.Expr:
    """The process a series comes from beyond its ranks (``WORKER_LABELS``), "" when none."""
    parts = [pl.col("labels").str.json_path_match(f"$.{k}") for k in WORKER_LABELS]
    return pl.concat_str(parts, separator="|", ignore_nulls=True).fill_null("").alias("worker")


STAGE_SERIES_COLUMNS: tuple[Column, ...] = (
    Column("ts", pl.Datetime("ms"), "end of the scrape interval"),
    Column("pp_rank", pl.Int32(), "pipeline stage"),
    Column("measure", _S, "gpu_busy, scheduler_idle or scheduler_stage"),
    Column("category", _S, "scheduler_stage's category; else null"),
    Column("share", _F, "seconds the counter grew over the interval's length (ranks averaged)"),
)
STAGE_SERIES = schema_of(STAGE_SERIES_COLUMNS)


def stage_wait_share(metrics: pl.DataFrame, phases: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per phase and PP stage, the measured share of time busy, idle, in each scheduler stage,
    and of scrapes with requests running or queued (schema ``STAGE_SHARES``).

    Parameters
    ----------
    metrics
        ``Metrics.samples`` of a run (``load_metrics``), on the log's clock.
    phases
        ``phase``, ``start``, ``end`` per phase; None or empty: one row set (``phase`` null)
        over all the metrics hold. A counter's interval belongs to the phase its midpoint is in.
    """
    staged = metrics.filter(pl.col("pp_rank").is_not_null()).with_columns(_worker())
    if not staged.height:
        return pl.DataFrame(schema=STAGE_SHARES)
    windows: list[tuple[int | None, datetime | None, datetime | None]] = [(None, None, None)]
    if phases is not None and phases.height:
        windows = list(phases.select("phase", "start", "end").iter_rows())
    frames = []
    for phase, start, end in windows:
        for measure, metric, split in MEASURES:
            rows = staged.filter(pl.col("metric") == metric)
            if not rows.height:
                continue
            at = pl.col("ts")
            if measure not in _GAUGES:
                at = at - pl.duration(milliseconds=(pl.col("interval_s") * 500).round())
            if start is not None and end is not None:
                rows = rows.filter(at.is_between(start, end))
            if not rows.height:
                continue
            frame = _gauge(rows) if measure in _GAUGES else _seconds(rows, split)
            frames.append(
                frame.with_columns(
                    phase=pl.lit(phase, _I), measure=pl.lit(measure), metric=pl.lit(metric)
                )
            )
    if not frames:
        return pl.DataFrame(schema=STAGE_SHARES)
    out = pl.concat([f.select(STAGE_SHARES.names()).cast(STAGE_SHARES) for f in frames])  # type: ignore[arg-type]
    return out.sort("phase", "pp_rank", "measure", "category", nulls_last=True)


def _seconds(rows: pl.DataFrame, split: bool) -> pl.DataFrame:
    """Seconds counters: each series' grown seconds over the wall time its own intervals cover
    (a restart drops an interval from the series that went down, not from the others); a
    rank's series add up, a stage's ranks are averaged."""
    rows = rows.filter(pl.col("kind") == "counter").with_columns(
        category=pl.col("labels").str.json_path_match("$.category") if split else pl.lit(None, _S)
    )
    series = rows.group_by([*_RANK, "category", "labels"]).agg(
        seconds=pl.col("value").sum(), wall_s=pl.col("interval_s").sum(), samples=pl.len()
    )
    ranks = series.group_by([*_RANK, "category"]).agg(
        share=pl.when(pl.col("wall_s") > 0).then(pl.col("seconds") / pl.col("wall_s")).sum(),
        seconds=pl.col("seconds").sum(),
        wall_s=pl.col("wall_s").max(),
        samples=pl.col("samples").sum(),
    )
    return ranks.group_by("pp_rank", "category").agg(
        pl.col("share").mean(),
        pl.col("seconds", "wall_s", "samples").sum(),
        ranks=pl.len(),
    )


def _gauge(rows: pl.DataFrame) -> pl.DataFrame:
    """Gauges: per stage, the share of scrapes with a value above zero."""
    return rows.group_by("pp_rank").agg(
        share=(pl.col("value") > 0).mean(),
        samples=pl.len(),
        ranks=pl.struct("tp_rank", "dp_rank", "worker").n_unique(),
        category=pl.lit(None, _S),
        seconds=pl.lit(None, _F),
        wall_s=pl.lit(None, _F),
    )


def stage_share_series(metrics: pl.DataFrame) -> pl.DataFrame:
    """Per scrape interval and PP stage, the share of the interval each seconds counter of
    ``MEASURES`` grew (schema ``STAGE_SERIES``), for a timeline."""
    frames = []
    for measure, metric, split in MEASURES:
        if measure in _GAUGES:
            continue
        rows = metrics.filter(
            (pl.col("metric") == metric)
            & (pl.col("kind") == "counter")
            & pl.col("pp_rank").is_not_null()
            & (pl.col("interval_s") > 0)
        )
        if not rows.height:
            continue
        category = pl.col("labels").str.json_path_match("$.category") if split else None
        rows = rows.with_columns(
            _worker(),
            category=category if category is not None else pl.lit(None, _S),
            share=pl.col("value") / pl.col("interval_s"),
        )
        per_rank = rows.group_by(["ts", *_RANK, "category"]).agg(pl.col("share").sum())
        frames.append(
            per_rank.group_by("ts", "pp_rank", "category")
            .agg(pl.col("share").mean())
            .with_columns(measure=pl.lit(measure))
        )
    if not frames:
        return pl.DataFrame(schema=STAGE_SERIES)
    out = pl.concat([f.select(STAGE_SERIES.names()).cast(STAGE_SERIES) for f in frames])  # type: ignore[arg-type]
    return out.sort("ts", "pp_rank", "measure", "category", nulls_last=True)
