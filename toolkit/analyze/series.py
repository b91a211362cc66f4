"""Time-series facts every view shares: what "busy" means, when the server was decoding, and
how a long series is bucketed down to chart size.

**Busy.** ``util_pct`` (nvidia-smi ``utilization.gpu``, dmon ``sm``, DCGM ``GPU_UTIL``) is the
share of time *a kernel was running*. Under pipeline parallelism a stage waiting for its peer
sits in a NCCL receive kernel, which counts as running, so a stage in a bubble can still read
~100 %. DCGM's ``sm_active`` (share of cycles an SM had a warp, a 0–1 ratio) does not count
the wait, so whenever a trace has values for it, it is the busy measure, scaled to percent.

**A window's busy share.** A sample stands for the interval before its stamp (nvidia-smi
averages ``utilization.gpu`` over the past sample period; DCGM fields are read the same way):
its period is the time since the previous sample of the same GPU, at most the series' median
interval (a pause in recording is not covered). ``busy_in_windows`` weights each sample by how
much of its period overlaps the window and counts the samples a window holds: at coarse
sampling a window of a few seconds holds one or two, and its share is uncertain.

**Decoding windows.** Stretches in which the server printed ``Decode batch`` lines without
a pause, judged against the log's own cadence (or a fixed ``max_gap_s``): GPU samples outside
them (startup, an idle server) would dilute a busy share.

**Buckets.** Widths are round (1 ms … 500 ms, 1 s, 2 s, 5 s … 1 h, then whole hours) and
buckets start on the epoch's grid, so a bucket starts at a round clock time. A series is given
the narrowest round width that leaves at most the requested number of points.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import polars as pl

from toolkit.errors import ToolkitError

__all__ = [
    "PAUSE_CADENCES",
    "RATIO_METRICS",
    "WINDOWS",
    "bucket_start",
    "bucket_width",
    "busy_in_windows",
    "busy_metric",
    "busy_pct",
    "cadence_windows",
    "decoding_windows",
    "downsample_means",
    "duration_ms",
    "epoch_ms",
    "in_windows",
    "mean_per_bucket",
    "overlapping",
    "since_first",
    "thin",
]

_T = pl.Datetime("ms")

RATIO_METRICS: tuple[str, ...] = (
    "gr_engine_active",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    "fp64_active",
    "fp32_active",
    "fp16_active",
)
"""DCGM profiling fields, 0–1 ratios: shown as percent next to ``util_pct``."""

# ── busy ──────────────────────────────────────────────────────────────────────────────────────


def busy_metric(samples: pl.DataFrame) -> str:
    """``sm_active`` when the trace has at least one value for it, else ``util_pct``."""
    if (
        "sm_active" in samples.columns
        and samples.get_column("sm_active").null_count() < samples.height
    ):
        return "sm_active"
    return "util_pct"


def busy_pct(samples: pl.DataFrame, metric: str | None = None) -> tuple[pl.Expr, str]:
    """The busy % of each sample as an expression, and the metric it reads.

    Parameters
    ----------
    samples
        ``GpuTrace.samples`` (or any frame with the trace's metric columns).
    metric
        A metric to use instead of the choice of ``busy_metric``; DCGM ratios are scaled to %.

    Returns
    -------
    (pl.Expr, str)
        The Float64 expression (unnamed: alias it) and the metric's column name.
    """
    metric = metric or busy_metric(samples)
    value = pl.col(metric).cast(pl.Float64)
    if metric in RATIO_METRICS:
        value = value * 100.0
    return value, metric


def busy_in_windows(
    samples: pl.DataFrame,
    windows: pl.DataFrame,
    by: Sequence[str] = (),
    *,
    metric: str | None = None,
) -> tuple[pl.DataFrame, str]:
    """Busy % per window and ``by`` (GPU columns of ``samples``), each sample weighted by the
    overlap of its period with the window.

    Parameters
    ----------
    samples
        ``GpuTrace.samples``: ``ts``, ``gpu`` (``source``, ``host`` and ``mig_instance`` when
        present tell the series apart) and the metric columns.
    windows
        ``start``, ``end`` and any columns to group by (``phase``); a window of no length
        reads the sample whose period holds its instant.
    by
        Sample columns to keep apart within a window (``gpu``, ``pp``).
    metric
        As in ``busy_pct``.

    Returns
    -------
    (pl.DataFrame, str)
        The window columns other than ``start``/``end``, ``by``, ``busy_pct`` (weighted mean),
        ``below_half_share`` (weighted share of time under 50 %), ``samples`` (fewest samples
        any GPU of the group has in the window) and ``gpus`` (sorted GPU indices); and the
        metric read. Groups without a sample are absent.
    """
    value, metric = busy_pct(samples, metric)
    series = [c for c in ("source", "host", "gpu", "mig_instance") if c in samples.columns]
    extra = [c for c in windows.columns if c not in ("start", "end")]
    empty = pl.DataFrame(
        schema={
            **{c: windows.schema[c] for c in extra},
            **{c: samples.schema[c] for c in by},
            "busy_pct": pl.Float64(),
            "below_half_share": pl.Float64(),
            "samples": pl.UInt32(),
            "gpus": pl.List(pl.Int32()),
        }
    )
    points = (
        samples.select(pl.col("ts").cast(_T), *series, *(c for c in by if c not in series), v=value)
        .filter(pl.col("ts").is_not_null() & pl.col("v").is_not_null())
        # Time order is enough: ``over`` keeps it within each series, and sorting by the
        # series' text columns first costs 20× more on a day-long trace.
        .sort("ts", maintain_order=True)
    )
    if not points.height or not windows.height:
        return empty, metric
    gap = pl.col("ts").diff().over(series) if series else pl.col("ts").diff()
    points = points.with_columns(_gap=gap.dt.total_milliseconds())
    typical = pl.col("_gap").median().over(series) if series else pl.col("_gap").median()
    points = points.with_columns(_typ=typical.fill_null(pl.col("_gap").median()).fill_null(1000))
    period = pl.min_horizontal(pl.col("_gap").fill_null(pl.col("_typ")), pl.col("_typ")).clip(1)
    points = points.with_columns(_from=pl.col("ts") - pl.duration(milliseconds=period)).drop(
        "_gap", "_typ"
    )
    spans = windows.select(
        pl.col("start").cast(_T).alias("_start"), pl.col("end").cast(_T).alias("_end"), *extra
    )
    overlap = (
        pl.min_horizontal("ts", "_end") - pl.max_horizontal("_from", "_start")
    ).dt.total_milliseconds()
    pairs = (
        overlapping(points, spans)
        .with_columns(
            _w=pl.when(pl.col("_end") > pl.col("_start"))
            .then(overlap.cast(pl.Float64))
            .otherwise(1.0)
        )
        .filter(pl.col("_w") > 0)
    )
    if not pairs.height:
        return empty, metric
    keys = [*extra, *by]
    if not keys:
        pairs, keys = pairs.with_columns(_all=pl.lit(0)), ["_all"]
    per_series = [*keys, *(c for c in series if c not in keys)]
    weighted = pl.col("_w").sum()
    out = (
        pairs.with_columns(_n=pl.len().over(per_series))
        .group_by(keys)
        .agg(
            busy_pct=(pl.col("v") * pl.col("_w")).sum() / weighted,
            below_half_share=((pl.col("v") < 50.0).cast(pl.Float64) * pl.col("_w")).sum()
            / weighted,
            samples=pl.col("_n").min().cast(pl.UInt32),
            gpus=pl.col("gpu").cast(pl.Int32).unique().sort()
            if "gpu" in pairs.columns
            else pl.lit([], pl.List(pl.Int32)),
        )
        .sort(keys)
    )
    return out.select(empty.columns).cast(dict(empty.schema)), metric


def overlapping(points: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """Each point (``_from``–``ts``) paired with every span (``_start``–``_end``) it overlaps:
    ``ts ≥ _start`` and ``_from < _end``.

    Spans that do not overlap one another (their ends rise with their starts) are found by two
    binary searches per point, in time linear in the pairs; others by a general range join.
    """
    spans = spans.filter(pl.col("_start").is_not_null() & pl.col("_end").is_not_null())
    spans = spans.sort("_start", "_end")
    if not spans.get_column("_end").is_sorted():
        return points.join_where(
            spans, pl.col("ts") >= pl.col("_start"), pl.col("_from") < pl.col("_end")
        )
    first = spans.get_column("_end").search_sorted(points.get_column("_from"), side="right")
    stop = spans.get_column("_start").search_sorted(points.get_column("ts"), side="right")
    return (
        points.with_columns(_span=pl.int_ranges(first, stop, dtype=pl.UInt32))
        .explode("_span")
        .filter(pl.col("_span").is_not_null())
        .join(spans.with_row_index("_span"), on="_span")
        .drop("_span")
    )


# ── decoding windows ──────────────────────────────────────────────────────────────────────────

WINDOWS = pl.Schema({"start": _T, "end": _T, "lines": pl.UInt32()})


def decoding_windows(batches: pl.DataFrame, *, max_gap_s: float | None = None) -> pl.DataFrame:
    """Stretches of decoding (schema ``WINDOWS``: ``start``, ``end``, ``lines``), in time order.

    Without ``max_gap_s`` a stretch ends at a pause of the log's own cadence
    (``cadence_windows``), so a run logging one line per stage every 15 s is not cut line by
    line. With it, at any gap between ``Decode batch`` lines longer than that; the lines of
    every stage count (under PP they print the same micro-batches at about the same time).
    """
    if max_gap_s is None:
        return cadence_windows(batches)
    decode = batches.lazy().filter((pl.col("kind") == "decode") & pl.col("ts").is_not_null())
    ts = decode.select(pl.col("ts").cast(_T)).sort("ts").collect()
    if not ts.height:
        return pl.DataFrame(schema=WINDOWS)
    gap = pl.col("ts").diff().dt.total_milliseconds() > max_gap_s * 1000
    return (
        ts.with_columns(window=gap.fill_null(False).cum_sum())
        .group_by("window")
        .agg(start=pl.col("ts").min(), end=pl.col("ts").max(), lines=pl.len())
        .sort("start")
        .select(WINDOWS.names())
        .cast(dict(WINDOWS))
    )


PAUSE_CADENCES = 3.0
"""A gap between one stage's decode lines longer than this many of its neighbouring intervals
is a pause (a stage logs every 40 micro-batch steps, so its interval varies 10× with load)."""

_STAGE_KEYS = ("source", "host", "dp", "pp", "attn_cp", "moe_dp", "tp", "ep")


def cadence_windows(batches: pl.DataFrame) -> pl.DataFrame:
    """Stretches of decoding as the log's own cadence shows them (schema ``WINDOWS``).

    Per stage (file and rank tags), a gap between successive ``Decode batch`` lines is a pause
    when longer than ``PAUSE_CADENCES`` times the interval around it: the median of the five
    gaps before it or of the five after, whichever is longer (a stretch logging slowly is not
    cut by a fast neighbour), and at least 1 s (the resolution of a log without
    milliseconds). A stretch runs from its first line to its last (the first line of a stretch
    reports between one and ``decode_log_interval`` steps, so nothing earlier is assumed); the
    stretches of all stages are merged.
    """
    keys = [c for c in _STAGE_KEYS if c in batches.columns]
    lines = (
        batches.lazy()
        .filter((pl.col("kind") == "decode") & pl.col("ts").is_not_null())
        .select(*keys, pl.col("ts").cast(_T))
        .sort(*keys, "ts")
        .collect()
    )
    if not lines.height:
        return pl.DataFrame(schema=WINDOWS)
    over = keys or None
    gap = pl.col("ts").diff().dt.total_milliseconds().cast(pl.Float64) / 1000.0
    lines = lines.with_columns(_gap=gap.over(over) if over else gap)
    before = pl.col("_gap").shift(1).rolling_median(5, min_samples=1)
    after = pl.col("_gap").reverse().shift(1).rolling_median(5, min_samples=1).reverse()
    if over:
        before, after = before.over(over), after.over(over)
    lines = lines.with_columns(
        _local=pl.max_horizontal(before, after).fill_null(pl.col("_gap")).clip(1.0)
    )
    pause = pl.col("_gap").is_null() | (pl.col("_gap") > PAUSE_CADENCES * pl.col("_local"))
    lines = lines.with_columns(_pause=pause)
    stretch = pl.col("_pause").cum_sum()
    lines = lines.with_columns(_stretch=stretch.over(over) if over else stretch)
    stretches = (
        lines.group_by(*keys, "_stretch")
        .agg(start=pl.col("ts").min(), end=pl.col("ts").max(), lines=pl.len())
        .sort("start")
    )
    # merge stretches that overlap (the stages of one stretch of decoding, and neighbours)
    merged = stretches.with_columns(
        _window=(pl.col("start") > pl.col("end").cum_max().shift(1)).fill_null(False).cum_sum()
    )
    return (
        merged.group_by("_window")
        .agg(start=pl.col("start").min(), end=pl.col("end").max(), lines=pl.col("lines").sum())
        .sort("start")
        .select(WINDOWS.names())
        .cast(dict(WINDOWS))
    )


def in_windows(points: pl.DataFrame, windows: pl.DataFrame, *, on: str = "ts") -> pl.DataFrame:
    """The rows of ``points`` whose ``on`` time falls inside a window (``start`` ≤ t ≤
    ``end``), with that window's columns joined (``phase``, ``lines``…), in time order.

    Windows are expected not to overlap; a time inside several is given the latest start.
    """
    extra = [c for c in windows.columns if c not in ("start", "end") and c not in points.columns]
    spans = windows.select(pl.col("start").cast(_T), pl.col("end").cast(_T), *extra).sort("start")
    return (
        points.with_columns(pl.col(on).cast(_T))
        .filter(pl.col(on).is_not_null())
        .sort(on)
        .join_asof(spans, left_on=on, right_on="start")
        .filter(pl.col("end").is_not_null() & (pl.col(on) <= pl.col("end")))
    )


# ── time columns ──────────────────────────────────────────────────────────────────────────────


def epoch_ms(column: str = "ts") -> pl.Expr:
    """A datetime column as epoch milliseconds, named ``t`` (the charts' time column)."""
    return pl.col(column).dt.epoch("ms").alias("t")


def since_first(frame: pl.DataFrame, column: str = "t") -> pl.DataFrame:
    """Epoch-ms ``column`` as ms since the frame's first row: runs recorded on different days
    share one axis when compared."""
    return frame.with_columns(pl.col(column) - pl.col(column).min())


_UNITS_MS = {"ms": 1.0, "s": 1_000.0, "m": 60_000.0, "h": 3_600_000.0, "d": 86_400_000.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def duration_ms(text: str) -> int:
    """``"1s"``, ``"500ms"``, ``"2m"``, ``"1m30s"``, ``"1h"``, ``"1d"`` → milliseconds (≥ 1)."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise ToolkitError(f"a bucket width must look like 1s, 500ms or 1m30s, not {text!r}")
    return max(1, round(sum(float(n) * _UNITS_MS[u] for n, u in parts)))


# ── buckets ───────────────────────────────────────────────────────────────────────────────────

_ROUND_MS = (
    1, 2, 5, 10, 20, 50, 100, 200, 500,
    1_000, 2_000, 5_000, 10_000, 15_000, 30_000,
    60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000,
)  # fmt: skip
_HOUR = 3_600_000


def _buckets(lo_ms: int, hi_ms: int, width: int) -> int:
    """Epoch-aligned buckets of ``width`` that times from ``lo_ms`` to ``hi_ms`` fall into."""
    return hi_ms // width - lo_ms // width + 1


def bucket_width(lo_ms: int, hi_ms: int, buckets: int, floor_ms: int = 1) -> int:
    """The narrowest width (ms) at least ``floor_ms`` with which times from ``lo_ms`` to
    ``hi_ms`` (epoch ms) fall into at most ``buckets`` epoch-aligned buckets.

    ``floor_ms`` itself when it fits; else the first round width (``_ROUND_MS``) that does;
    beyond an hour, whole hours.
    """
    buckets = max(int(buckets), 1)
    floor_ms = max(int(floor_ms), 1)
    lo_ms, hi_ms = int(lo_ms), int(max(hi_ms, lo_ms))
    for width in (floor_ms, *(w for w in _ROUND_MS if w > floor_ms)):
        if _buckets(lo_ms, hi_ms, width) <= buckets:
            return width
    hours = max(1, math.ceil(max(floor_ms, hi_ms - lo_ms) / (max(buckets - 1, 1) * _HOUR)))
    while _buckets(lo_ms, hi_ms, hours * _HOUR) > buckets:
        # one more hour is enough for several buckets; a single one needs the grid to miss
        # the span, so grow faster
        hours = hours + 1 if buckets > 1 else hours * 2
    return hours * _HOUR


def bucket_start(column: str, width_ms: int, dtype: pl.DataType) -> pl.Expr:
    """Start of each row's bucket of ``width_ms``: ``dt.truncate`` for a datetime column,
    ``t // width · width`` for epoch milliseconds (both on the epoch's grid)."""
    if isinstance(dtype, pl.Datetime):
        return pl.col(column).dt.truncate(f"{int(width_ms)}ms").alias(column)
    return (pl.col(column) // width_ms * width_ms).alias(column)


def _time_range(frame: pl.DataFrame, time: str) -> tuple[int, int] | None:
    col = pl.col(time)
    if isinstance(frame.schema[time], pl.Datetime):
        col = col.dt.epoch("ms")
    lo, hi = frame.select(col.min().alias("lo"), col.max().alias("hi")).row(0)
    return None if lo is None or hi is None else (int(lo), int(hi))


def mean_per_bucket(
    frame: pl.DataFrame,
    width_ms: int,
    keys: Sequence[str],
    values: Sequence[str],
    *,
    time: str = "t",
) -> pl.DataFrame:
    """Mean of ``values`` per bucket of ``time`` (epoch ms or datetime) and ``keys``, sorted
    by time then keys. Grouped without sorting the input first; only the result is sorted."""
    bucket = bucket_start(time, width_ms, frame.schema[time])
    return (
        frame.group_by(bucket, *keys)
        .agg(pl.col(v).mean() for v in values)
        .sort(time, *keys)
        .select(time, *keys, *values)
    )


def downsample_means(
    frame: pl.DataFrame,
    keys: Sequence[str],
    values: Sequence[str],
    max_points: int,
    *,
    time: str = "t",
    floor_ms: int = 1_000,
) -> tuple[pl.DataFrame, int]:
    """Mean of ``values`` per time bucket and ``keys`` so that at most ``max_points`` rows
    remain; returns the frame and the bucket width (0: small enough, returned as it is).

    The width is ``bucket_width`` for ``max_points // groups`` buckets per group of ``keys``.
    """
    if frame.height <= max_points or frame.height == 0:
        return frame, 0
    span = _time_range(frame, time)
    if span is None:
        return frame, 0
    groups = max(1, frame.select(pl.struct(*keys).n_unique()).item()) if keys else 1
    width = bucket_width(*span, max_points // groups, floor_ms)
    return mean_per_bucket(frame, width, keys, values, time=time), width


def thin(frame: pl.DataFrame, max_rows: int) -> pl.DataFrame:
    """Every n-th row, so that at most ``max_rows`` remain: for a frame drawn as it is (its
    schema stays whole; decode lines are samples already)."""
    if frame.height <= max_rows:
        return frame
    step = -(-frame.height // max_rows)
    return frame.gather_every(step)
