"""How precisely a run measured what a finding rests on.

``throughput_noise`` is the relative half-width (about two standard errors) of a phase's
measured throughput: from repeated benchmark runs at its load, else from the scatter of its
decode lines' ``gen throughput``, never below ``MIN_NOISE`` (a rerun of the same benchmark
differs by that much). ``model_band`` is how far the serving model, under the best of its
plausible constants, misses the run's own points that no finding touches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import polars as pl

from toolkit.analyze.model import Params, predict
from toolkit.analyze.model.observed import point_layout, point_workload
from toolkit.diagnose.prose import loads
from toolkit.diagnose.thresholds import ASSUMED_MODEL_ERROR, MIN_NOISE
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["busy_noise", "model_band", "model_range", "throughput_noise"]

_BUSY_COLUMNS = {"sm_active": "sm_active", "util_pct": "util_pct"}


def throughput_noise(ctx: RunAnalysis, phase: int | None) -> tuple[float, str]:
    """(relative half-width, what it rests on) of the measured throughput of ``phase``: the
    spread of repeated benchmark runs at its load, else the standard error of its benchmark's
    mean TPOT over the requests it completed, else the robust spread of its steady decode
    lines; never below ``MIN_NOISE``."""
    if phase is None:
        return MIN_NOISE, f"measurement noise ±{MIN_NOISE:.0%} (assumed)"
    offered = ctx.phase(phase).get("offered")
    rows = (
        ctx.bench.filter(pl.col("concurrency") == offered)
        if ctx.bench is not None and offered
        else None
    )
    if rows is not None and rows.height >= 2:
        values = rows["output_tok_s"].drop_nulls().to_list()
        if len(values) >= 2:
            noise = max(MIN_NOISE, 2 * _cv(values) / math.sqrt(len(values)))
            return noise, f"{len(values)} benchmark runs at {offered}: ±{noise:.0%}"
    if rows is not None and rows.height == 1:
        row = rows.row(0, named=True)
        mean, std, done = row.get("tpot_mean_ms"), row.get("tpot_std_ms"), row.get("completed")
        if mean and std is not None and done and mean > 0 and done > 0:
            noise = max(MIN_NOISE, 2 * std / mean / math.sqrt(done))
            return noise, f"the benchmark at {offered} requests ({done} completed): ±{noise:.0%}"
    lines = _steady_rates(ctx, phase)
    if len(lines) >= 3:
        noise = max(MIN_NOISE, 2 * _robust_cv(lines) / math.sqrt(len(lines)))
        return noise, f"{len(lines)} steady decode lines' throughput: ±{noise:.0%}"
    return MIN_NOISE, f"measurement noise ±{MIN_NOISE:.0%} (assumed: too few lines)"


def busy_noise(ctx: RunAnalysis, phase: int, gpus: Sequence[int], metric: str) -> float:
    """Relative half-width (two standard errors, as a share of the round) of a stage's busy
    share in ``phase``: the scatter of its GPUs' ``metric`` samples in the phase's steady
    window over their count; ``MIN_NOISE`` added for what one sample averages."""
    samples = ctx.gpu_samples
    column = _BUSY_COLUMNS.get(metric)
    window = ctx.phase_summary.filter(pl.col("phase") == phase)
    if samples is None or column is None or column not in samples.columns or not window.height:
        return MIN_NOISE + 0.1
    start, end = window["steady_start"][0], window["steady_end"][0]
    if start is None or end is None:
        return MIN_NOISE + 0.1
    values = samples.filter(pl.col("gpu").is_in(list(gpus)) & pl.col("ts").is_between(start, end))[
        column
    ].drop_nulls()
    if values.len() < 3:
        return MIN_NOISE + 0.1
    scale = 100.0 if column == "util_pct" else 1.0  # sm_active is a ratio, util a percentage
    std = float(values.std() or 0.0) / scale
    return MIN_NOISE + 2 * std / math.sqrt(values.len())


def _steady_rates(ctx: RunAnalysis, phase: int) -> list[float]:
    """``gen throughput`` of the phase's decode lines in its steady window (its longest
    stretch near the peak load; the whole phase when no window was found)."""
    if not ctx.decode.height:
        return []
    lines = ctx.decode.filter((pl.col("phase") == phase) & (pl.col("gen_tok_s") > 0))
    window = ctx.phase_summary.filter(pl.col("phase") == phase)
    if window.height:
        start, end = window["steady_start"][0], window["steady_end"][0]
        if start is not None and end is not None:
            steady = lines.filter(pl.col("ts").is_between(start, end))
            lines = steady if steady.height >= 3 else lines
    return [float(v) for v in lines["gen_tok_s"].to_list()]


def _robust_cv(values: Sequence[float]) -> float:
    """Scatter over the median, by the median absolute deviation (a window that averages over
    a pause does not count as scatter)."""
    ordered = sorted(values)
    median = ordered[len(ordered) // 2]
    if median <= 0:
        return 0.0
    deviations = sorted(abs(v - median) for v in values)
    return 1.4826 * deviations[len(deviations) // 2] / median


def _cv(values: Sequence[float]) -> float:
    n = len(values)
    mean = sum(values) / n
    if mean <= 0 or n < 2:
        return 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return math.sqrt(var) / mean


def model_range(ctx: RunAnalysis, compute: Callable[[Params], float | None]) -> list[float]:
    """``compute`` under every plausible variant of the run's model (``model_variants``):
    the values that came out (a variant the model cannot evaluate is left out)."""
    out = []
    for variant in ctx.model_variants:
        value = compute(variant.params)
        if value is not None and math.isfinite(value):
            out.append(value)
    return out


def model_band(ctx: RunAnalysis, *, untouched: Sequence[int]) -> tuple[float, str]:
    """(relative error, what it rests on) of the serving model on the run's own points at
    the loads ``untouched`` (those no finding explains a cost at), under the variant of its
    constants that fits them best; ``ASSUMED_MODEL_ERROR`` when no such point was measured
    beyond the ones the model was calibrated on."""
    if ctx.fit is None:
        return ASSUMED_MODEL_ERROR, "model error unknown (assumed)"
    calibrated = {c for label, c in ctx.fit.calibration if label == ctx.label}
    points = ctx.observed.filter(
        pl.col("concurrency").is_in(list(untouched))
        & ~pl.col("concurrency").is_in(list(calibrated))
    )
    if not points.height:
        return (
            ASSUMED_MODEL_ERROR,
            f"model error ±{ASSUMED_MODEL_ERROR:.0%} (assumed: no measured load beyond the "
            "calibration to check it on)",
        )
    candidates = [ctx.fit.params, *(v.params for v in ctx.model_variants)]
    best: float | None = None
    for params in candidates:
        worst = 0.0
        for row in points.iter_rows(named=True):
            try:
                expected = predict(point_layout(row), point_workload(row), params).tok_s
            except (ToolkitError, ZeroDivisionError, ValueError):
                worst = math.inf
                break
            if expected > 0:
                worst = max(worst, abs(row["output_tok_s"] / expected - 1))
        best = worst if best is None else min(best, worst)
    if best is None or not math.isfinite(best):
        return ASSUMED_MODEL_ERROR, f"model error ±{ASSUMED_MODEL_ERROR:.0%} (assumed)"
    band = max(best, MIN_NOISE)
    return (
        band,
        f"model error ±{band:.0%} on this run's loads {loads(points['concurrency'].unique())}",
    )
