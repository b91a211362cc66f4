"""GPU analyses: downsampling, busy/idle shares, oscillation while decoding, stages, alignment."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.gpu import (
    GLOSSARY,
    align,
    busy_share,
    downsample,
    oscillation,
    stage_comparison,
)
from toolkit.analyze.series import busy_metric, decoding_windows
from toolkit.load.gpu.trace import gpu_roles, load_gpu_trace

DATA = TEST_DATA / "gpu"
T0 = datetime(2026, 5, 25, 21, 0, 0)


def _samples(util_by_gpu: dict[int, list[float]], period_ms: int = 500) -> pl.DataFrame:
    rows = []
    for gpu, values in util_by_gpu.items():
        for k, v in enumerate(values):
            rows.append(
                {"ts": T0 + timedelta(milliseconds=k * period_ms), "gpu": gpu, "util_pct": v}
            )
    return pl.DataFrame(
        rows, schema={"ts": pl.Datetime("ms"), "gpu": pl.Int32, "util_pct": pl.Float64}
    )


def _decode_lines(seconds: list[float]) -> pl.DataFrame:
    return pl.DataFrame(
        {"ts": [T0 + timedelta(seconds=s) for s in seconds], "kind": ["decode"] * len(seconds)},
        schema={"ts": pl.Datetime("ms"), "kind": pl.String},
    )


def test_downsample_keeps_min_mean_max_per_bucket() -> None:
    samples = _samples({0: [10, 20, 30, 40, 50, 60], 1: [100] * 6})  # 3 s of 0.5 s samples
    out = downsample(samples, "2s")
    gpu0 = out.filter((pl.col("gpu") == 0) & (pl.col("metric") == "util_pct"))
    assert gpu0.get_column("min").to_list() == [10.0, 50.0]
    assert gpu0.get_column("max").to_list() == [40.0, 60.0]
    assert gpu0.get_column("mean").to_list() == [25.0, 55.0]
    assert gpu0.get_column("samples").to_list() == [4, 2]
    assert gpu0.get_column("ts").to_list() == [T0, T0 + timedelta(seconds=2)]


def test_downsample_a_real_trace_all_metrics() -> None:
    trace = load_gpu_trace(DATA / "smi-8gpu-loop.csv")
    out = downsample(trace.samples, "1s")
    assert set(out.get_column("metric")) == {
        "util_pct",
        "mem_util_pct",
        "mem_used_mib",
        "mem_total_mib",
        "power_w",
        "power_limit_w",
        "sm_clock_mhz",
        "mem_clock_mhz",
        "temp_c",
    }
    assert out.filter(pl.col("metric") == "power_w").height == 8  # one bucket per GPU


def test_busy_and_idle_share() -> None:
    samples = _samples({0: [100, 100, 40, 0], 1: [3, 2, 60, 70]})
    out = busy_share(samples)
    assert out.get_column("busy_share").to_list() == [0.5, 0.5]
    assert out.get_column("idle_share").to_list() == [0.25, 0.5]
    assert out.get_column("mean_pct").to_list() == [60.0, 33.75]
    assert out.get_column("metric").to_list() == ["util_pct", "util_pct"]


def test_sm_active_is_preferred_when_present() -> None:
    trace = load_gpu_trace(DATA / "dcgmi-prof-8gpu.txt")
    assert busy_metric(trace.samples) == "sm_active"
    out = busy_share(trace.samples)
    assert out.filter(pl.col("gpu") == 0).row(0, named=True)["mean_pct"] == pytest.approx(
        (91.2 + 90.4) / 2
    )
    assert "NCCL" in GLOSSARY["util_pct"]


def test_oscillation_only_counts_decoding_time() -> None:
    # GPU 0 swings 40 % ↔ 100 % while the server decodes (0–3 s); idle afterwards.
    samples = _samples({0: [100, 40, 100, 40, 100, 40, 0, 0, 0, 0], 1: [100] * 10})
    batches = _decode_lines([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0])
    assert decoding_windows(batches).height == 1
    out = oscillation(samples, batches)
    gpu0 = out.filter(pl.col("gpu") == 0).row(0, named=True)
    assert gpu0["samples"] == 7  # 0.0 … 3.0 s
    assert gpu0["below_share"] == pytest.approx(4 / 7)  # 40, 40, 40 and the 0 at 3.0 s
    # each sample stands for the 0.5 s before it: the one at 0.0 s covers no decoding time
    assert gpu0["mean_pct"] == pytest.approx((40 + 100 + 40 + 100 + 40 + 0) / 6)
    assert out.filter(pl.col("gpu") == 1).row(0, named=True)["below_share"] == 0.0


def test_oscillation_without_decoding_is_empty() -> None:
    out = oscillation(_samples({0: [50]}), _decode_lines([]))
    assert out.height == 0 and "below_share" in out.columns


def test_stage_comparison_and_imbalance() -> None:
    samples = _samples({0: [100, 100], 1: [50, 50], 2: [100, 100], 3: [50, 50]})
    roles = gpu_roles({"tp_size": 2, "pp_size": 2})
    out = stage_comparison(samples, roles)
    assert out.get_column("pp").to_list() == [0, 1]
    assert out.get_column("mean_pct").to_list() == [75.0, 75.0]
    assert out.get_column("imbalance").to_list() == [1.0, 1.0]
    skewed = stage_comparison(_samples({0: [90], 1: [30]}), gpu_roles({"pp_size": 2}))
    assert skewed.get_column("imbalance")[0] == pytest.approx(1.5)
    assert skewed.get_column("labels").to_list()[1] == ["PP1 (GPU 1)"]


def test_align_reports_overlap_and_gap() -> None:
    trace = _samples({0: [1.0] * 21})  # 0 … 10 s
    log = _decode_lines([5.0, 20.0])
    out = align(trace, log)
    assert out["overlap_start"] == T0 + timedelta(seconds=5)
    assert out["overlap_end"] == T0 + timedelta(seconds=10)
    assert out["overlap_s"] == 5.0
    assert out["trace_covered"] == 0.5 and out["log_covered"] == pytest.approx(5 / 15)
    apart = align(trace, _decode_lines([3610.0, 3700.0]))
    assert apart["overlap_s"] == 0.0 and apart["gap_s"] == 3600.0
