"""Time-series facts: the busy measure, decoding windows, round buckets, mean downsampling."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.analyze.gpu import downsample
from toolkit.analyze.series import (
    WINDOWS,
    bucket_start,
    bucket_width,
    busy_in_windows,
    busy_metric,
    busy_pct,
    cadence_windows,
    decoding_windows,
    downsample_means,
    duration_ms,
    epoch_ms,
    in_windows,
    mean_per_bucket,
    overlapping,
    since_first,
    thin,
)
from toolkit.analyze.timeline import stage_gpu_series
from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import load_gpu_trace
from toolkit.load.sglang.log import load_sglang_log

DATA = TEST_DATA
T0 = datetime(2026, 5, 25, 21, 0, 0)
ROUND_MS = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000,
            60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000}  # fmt: skip


def _dcgmi() -> pl.DataFrame:
    """``dcgmi dmon -e 1001,…`` of 8 GPUs: a first block of N/A, then ratios 0–1."""
    trace = load_gpu_trace(DATA / "gpu" / "dcgmi-prof-8gpu.txt", interval_s=1.0, start=T0)
    return trace.samples


def _busy(samples: pl.DataFrame, metric: str | None = None) -> tuple[pl.DataFrame, str]:
    value, name = busy_pct(samples, metric)
    return samples.select("gpu", "sample", v=value), name


# ── busy ──────────────────────────────────────────────────────────────────────────────────────


def test_busy_reads_sm_active_as_percent_when_the_trace_has_it() -> None:
    samples = _dcgmi()
    assert busy_metric(samples) == "sm_active"
    busy, metric = _busy(samples)
    assert metric == "sm_active"
    gpu0 = busy.filter(pl.col("gpu") == 0).sort("sample")["v"].to_list()
    assert gpu0 == [None, pytest.approx(91.2), pytest.approx(90.4)]


def test_busy_is_util_pct_when_sm_active_has_no_value() -> None:
    first_block = _dcgmi().filter(pl.col("sample") == 0)  # all N/A: the column is there, empty
    assert first_block["sm_active"].null_count() == first_block.height
    assert busy_metric(first_block) == "util_pct"
    smi = load_gpu_trace(DATA / "gpu" / "smi-8gpu-loop.csv").samples
    assert "sm_active" not in smi.columns or smi["sm_active"].null_count() == smi.height
    value, metric = busy_pct(smi)
    assert metric == "util_pct"
    assert smi.select(v=value)["v"].to_list() == smi["util_pct"].cast(pl.Float64).to_list()


def test_busy_with_a_chosen_metric_scales_only_ratios() -> None:
    samples = _dcgmi().filter(pl.col("sample") == 1)
    tensor, _ = _busy(samples, "tensor_active")
    assert tensor.sort("gpu")["v"][0] == pytest.approx(51.0)
    exporter = load_gpu_trace(DATA / "gpu" / "exporter-3x-prof-timed.prom").samples
    value, metric = busy_pct(exporter)
    assert metric == "sm_active"
    assert exporter.select(value)["sm_active"].round(2).to_list() == [92.34, 41.19, 93.1, 39.81]


# ── decoding windows ──────────────────────────────────────────────────────────────────────────


def test_decoding_windows_split_at_pauses() -> None:
    # two load phases 31 s apart: 8 stages × 8 lines, then 8 × 14
    log = load_sglang_log(DATA / "diagnose" / "pp8-filled" / "server.log", cache=False)
    windows = decoding_windows(log.batches)
    assert windows.schema == WINDOWS
    assert windows["lines"].to_list() == [64, 112]
    assert windows["start"].to_list() == [
        datetime(2026, 5, 1, 10, 6, 42),
        datetime(2026, 5, 1, 10, 7, 21),
    ]
    assert decoding_windows(log.batches, max_gap_s=60).height == 1
    assert decoding_windows(log.batches.filter(pl.col("kind") == "prefill")).height == 0


def test_in_windows_keeps_samples_inside_with_the_window_columns() -> None:
    windows = pl.DataFrame(
        {
            "phase": [0, 1],
            "start": [T0, T0 + timedelta(seconds=10)],
            "end": [T0 + timedelta(seconds=2), T0 + timedelta(seconds=12)],
        }
    )
    points = pl.DataFrame(
        {"ts": [T0 + timedelta(seconds=s) for s in (-1, 0, 2, 3, 11, 12, 13)], "v": range(7)}
    )
    inside = in_windows(points, windows)
    assert inside["v"].to_list() == [1, 2, 4, 5]  # both ends of a window count
    assert inside["phase"].to_list() == [0, 0, 1, 1]


# ── buckets ───────────────────────────────────────────────────────────────────────────────────


def _count(lo: int, hi: int, width: int) -> int:
    return hi // width - lo // width + 1


@given(
    lo=st.integers(1_600_000_000_000, 1_900_000_000_000),
    span=st.integers(0, 40 * 86_400_000),
    buckets=st.integers(1, 50_000),
    floor=st.sampled_from([1, 100, 250, 1_000, 5_000]),
)
def test_bucket_width_is_round_and_leaves_at_most_n_buckets(
    lo: int, span: int, buckets: int, floor: int
) -> None:
    hi = lo + span
    width = bucket_width(lo, hi, buckets, floor)
    assert width >= floor
    assert _count(lo, hi, width) <= buckets
    assert width == floor or width in ROUND_MS or width % 3_600_000 == 0
    if width != floor and width in ROUND_MS:  # the narrowest that fits
        assert _count(lo, hi, floor) > buckets
        narrower = [w for w in ROUND_MS if floor < w < width]
        assert all(_count(lo, hi, w) > buckets for w in narrower)


def test_buckets_on_real_times_stay_within_n() -> None:
    ts = pl.datetime_range(T0, T0 + timedelta(hours=3), "100ms", eager=True)
    frame = pl.DataFrame({"ts": ts}).with_columns(epoch_ms())
    lo, hi = frame["t"].min(), frame["t"].max()
    for n in (7, 100, 999, 20_000):
        width = bucket_width(lo, hi, n, 100)
        datetime_buckets = frame.select(bucket_start("ts", width, frame.schema["ts"]))
        epoch_buckets = frame.select(bucket_start("t", width, frame.schema["t"]))
        assert datetime_buckets["ts"].n_unique() == epoch_buckets["t"].n_unique() <= n


def test_duration_ms() -> None:
    assert [duration_ms(t) for t in ("1s", "500ms", "2m", "1m30s", "1h", "1.5s", "1d")] == [
        1_000,
        500,
        120_000,
        90_000,
        3_600_000,
        1_500,
        86_400_000,
    ]
    for bad in ("", "10", "1 minute", "1mo", "s"):
        with pytest.raises(ToolkitError, match="bucket width"):
            duration_ms(bad)


# ── downsampling ──────────────────────────────────────────────────────────────────────────────


def test_downsample_keeps_means() -> None:
    frame = pl.DataFrame({"t": list(range(0, 600_000, 100)), "k": ["a"] * 6000, "v": [1.0] * 6000})
    out, width = downsample_means(frame, ["k"], ["v"], 100)
    assert out.height <= 100 and width >= 6000 and out["v"].to_list() == [1.0] * out.height


def test_downsample_means_of_a_100ms_trace() -> None:
    # 8 GPUs sampled every 100 ms for 10 minutes, each at its own level, swinging ±10 every
    # sample: any bucket of a whole number of 200 ms has the level as its mean
    n = 6_000
    frame = pl.DataFrame(
        {
            "t": [1_780_000_000_000 + 100 * k for k in range(n) for _ in range(8)],
            "gpu": [g for _ in range(n) for g in range(8)],
            "v": [10.0 * g + (10.0 if k % 2 else -10.0) for k in range(n) for g in range(8)],
        }
    )
    out, width = downsample_means(frame, ["gpu"], ["v"], 2_000)
    assert out.height <= 2_000 and width in ROUND_MS and width % 200 == 0
    assert out.columns == ["t", "gpu", "v"]
    levels = out.group_by("gpu").agg(pl.col("v").min(), pl.col("v").max().alias("hi")).sort("gpu")
    assert levels["v"].to_list() == pytest.approx([10.0 * g for g in range(8)])
    assert levels["hi"].to_list() == pytest.approx([10.0 * g for g in range(8)])
    small, none = downsample_means(frame.head(100), ["gpu"], ["v"], 2_000)
    assert none == 0 and small.equals(frame.head(100))


def test_mean_per_bucket_on_datetimes() -> None:
    points = pl.DataFrame(
        {
            "ts": [T0 + timedelta(milliseconds=500 * k) for k in range(6)],
            "gpu": [0] * 6,
            "v": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        }
    )
    out = mean_per_bucket(points, 2_000, ["gpu"], ["v"], time="ts")
    assert out["ts"].to_list() == [T0, T0 + timedelta(seconds=2)]
    assert out["v"].to_list() == [25.0, 55.0]


def test_gpu_downsample_uses_the_same_buckets() -> None:
    samples = _dcgmi()
    out = downsample(samples, "2s", metrics=["sm_active"])
    gpu0 = out.filter(pl.col("gpu") == 0)
    assert gpu0["ts"].to_list() == [T0, T0 + timedelta(seconds=2)]
    assert gpu0["mean"].to_list() == [pytest.approx(0.912), pytest.approx(0.904)]
    with pytest.raises(ToolkitError):
        downsample(samples, "every two seconds")


def test_stage_gpu_series_widens_to_round_buckets() -> None:
    ts = pl.datetime_range(T0, T0 + timedelta(hours=1), "100ms", eager=True)
    samples = pl.DataFrame({"ts": ts}).join(
        pl.DataFrame({"gpu": list(range(8))}, schema={"gpu": pl.Int32}), how="cross"
    )
    samples = samples.with_columns(util_pct=pl.col("gpu").cast(pl.Float64) * 10.0)
    series = stage_gpu_series(samples, every="100ms", max_points=20_000)
    assert series.height <= 20_000
    steps = series.filter(pl.col("gpu") == 0)["ts"].diff().drop_nulls().unique()
    assert steps.to_list() == [timedelta(seconds=2)]  # 3600 s / 2500 buckets → 2 s
    assert series.group_by("gpu").agg(pl.col("busy_pct").mean()).sort("gpu")[
        "busy_pct"
    ].to_list() == pytest.approx([10.0 * g for g in range(8)])


def test_since_first_and_thin() -> None:
    frame = pl.DataFrame({"t": [1_000, 1_500, 4_000], "v": [1, 2, 3]})
    assert since_first(frame)["t"].to_list() == [0, 500, 3_000]
    assert thin(pl.DataFrame({"v": range(10)}), 3)["v"].to_list() == [0, 4, 8]
    assert thin(frame, 10).equals(frame)


# ── a window's busy share ─────────────────────────────────────────────────────────────────────


def _smi(rows: list[tuple[str, int, int]]) -> pl.DataFrame:
    """``nvidia-smi --query-gpu=timestamp,index,utilization.gpu --format=csv -l 5`` text."""
    text = "timestamp, index, utilization.gpu [%]\n" + "".join(
        f"2026/05/12 09:34:{s}, {g}, {u} %\n" for s, g, u in rows
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "gpu.csv"
        path.write_text(text)
        return load_gpu_trace(path, cache=False).samples


def _window(start: str, end: str, phase: int = 0) -> pl.DataFrame:
    day = "2026-05-12 09:34:"
    return pl.DataFrame(
        {
            "phase": [phase],
            "start": [datetime.fromisoformat(day + start)],
            "end": [datetime.fromisoformat(day + end)],
        }
    )


def test_a_sample_stands_for_the_interval_before_its_stamp() -> None:
    """At 5 s sampling the sample stamped 0.139 s into the window read the idle second before
    the burst: it weighs 0.139 s of the window, not a third of it."""
    samples = _smi(
        [
            (f"{s:06.3f}", g, u)
            for s, u in ((35.139, 0), (40.139, 0), (45.139, 98), (50.139, 99), (55.139, 97))
            for g in (0, 1)
        ]
    )
    out, metric = busy_in_windows(samples, _window("40", "55"), ["gpu"])
    assert metric == "util_pct" and out["gpu"].to_list() == [0, 1]
    # 0 % over 0.139 s, 98 and 99 % over 5 s each, 97 % over 4.861 s (55.139 ends past 55)
    expected = (0 * 0.139 + 98 * 5 + 99 * 5 + 97 * 4.861) / 15.0
    assert out["busy_pct"].to_list() == [pytest.approx(expected)] * 2
    assert out["samples"].to_list() == [4, 4]
    assert out["below_half_share"][0] == pytest.approx(0.139 / 15.0)
    # the mean of the samples stamped inside reads the idle second as a third of the window
    naive = samples.filter(pl.col("ts") >= _window("40", "55")["start"][0])["util_pct"]
    assert naive.head(6).mean() < 70 < out["busy_pct"][0]


def test_a_pause_in_recording_is_not_covered_by_the_next_sample() -> None:
    """The sample after a 20 s pause stands for one typical interval (1 s), not for 20 s."""
    seconds = [10, 11, 12, 13, 33, 34, 35]
    samples = _smi([(f"{s:02d}.000", 0, 100 if s < 30 else 20) for s in seconds])
    out, _ = busy_in_windows(samples, _window("14", "40"))
    assert out["busy_pct"][0] == pytest.approx(20.0)
    assert out["samples"][0] == 3  # 33, 34, 35: the pause from 14 to 32 holds none


def test_a_window_of_no_length_reads_the_sample_holding_its_instant() -> None:
    samples = _smi([("10.000", 0, 10), ("11.000", 0, 60), ("12.000", 0, 30)])
    out, _ = busy_in_windows(samples, _window("10.500", "10.500"))
    assert out["busy_pct"].to_list() == [60.0] and out["samples"].to_list() == [1]


def test_samples_count_the_fewest_a_gpu_of_the_group_has() -> None:
    """GPU 1's recorder missed two rounds: the stage's share rests on its two samples."""
    rows = [(f"{s:02d}.000", 0, 90) for s in (11, 12, 13, 14)]
    rows += [(f"{s:02d}.000", 1, 50) for s in (11, 14)]
    samples = _smi(rows).with_columns(pp=pl.lit(0))
    out, _ = busy_in_windows(samples, _window("10", "14"), ["pp"])
    assert out["samples"].to_list() == [2] and out["gpus"].to_list() == [[0, 1]]
    # GPU 1's 14 s sample stands for 3 s (11→14) capped at its typical interval, 3 s
    assert out["busy_pct"][0] == pytest.approx((90 * 4 + 50 * 1 + 50 * 3) / 8)


def test_busy_in_windows_without_overlap_is_empty_with_its_schema() -> None:
    samples = _smi([("10.000", 0, 10), ("11.000", 0, 60)])
    out, _ = busy_in_windows(samples, _window("30", "40"), ["gpu"])
    assert out.height == 0
    assert out.columns == ["phase", "gpu", "busy_pct", "below_half_share", "samples", "gpus"]


# ── decoding stretches from the log's own cadence ─────────────────────────────────────────────


def _decode_log(tmp_path: Path, seconds: list[float], stages: int = 2) -> pl.DataFrame:
    """A PP log's ``Decode batch`` lines, every stage at each of ``seconds`` after 09:31:00."""
    base = datetime(2026, 5, 12, 9, 31, 0)
    lines = []
    for s in seconds:
        ts = base + timedelta(seconds=s)
        for pp in range(stages):
            lines.append(
                f"[{ts:%Y-%m-%d %H:%M:%S} PP{pp}] Decode batch, #running-req: 1, #token: 1033, "
                "token usage: 0.00, cuda graph: True, gen throughput (token/s): 6.15, "
                "#queue-req: 0\n"
            )
    path = tmp_path / "server.log"
    path.write_text("".join(lines))
    return load_sglang_log(path, cache=False).batches


def test_cadence_windows_keep_a_slowly_logging_phase_whole(tmp_path: Path) -> None:
    """c=1 under PP8 logs every ~6.5 s, then a 25 s pause, then c=32 every second: two
    stretches, where a fixed 3 s gap cuts the slow one line by line."""
    slow = [6, 12, 19, 25, 32, 38, 45, 51]
    fast = [76 + i for i in range(20)]
    batches = _decode_log(tmp_path, [float(s) for s in slow + fast])
    windows = cadence_windows(batches)
    assert windows.schema == WINDOWS
    t = datetime(2026, 5, 12, 9, 31, 0)
    assert windows.rows() == [
        (t + timedelta(seconds=6), t + timedelta(seconds=51), 16),
        (t + timedelta(seconds=76), t + timedelta(seconds=95), 40),
    ]
    assert decoding_windows(batches, max_gap_s=3).height == len(slow) + 1


def test_cadence_windows_cut_a_pause_after_a_slow_stretch(tmp_path: Path) -> None:
    """A fast phase, a 12 s pause, a fast phase: the pause is 12 intervals long."""
    seconds = [float(s) for s in [*range(0, 10), *range(22, 30)]]
    windows = cadence_windows(_decode_log(tmp_path, seconds, stages=1))
    assert windows["lines"].to_list() == [10, 8]
    assert cadence_windows(_decode_log(tmp_path, [], stages=1)).height == 0


def test_mig_instances_of_one_gpu_are_separate_series() -> None:
    """Two MIG instances of GPU 0 sampled at the same moments: each sample stands for its own
    instance's second, not for no time at all."""
    stamps = [T0 + timedelta(seconds=s) for s in (1, 2, 3)]
    samples = pl.DataFrame(
        {
            "ts": stamps * 2,
            "gpu": [0] * 6,
            "mig_instance": [1, 1, 1, 2, 2, 2],
            "sm_active": [0.9, 0.9, 0.9, 0.1, 0.1, 0.1],
        }
    )
    window = pl.DataFrame({"start": [T0], "end": [T0 + timedelta(seconds=3)]})
    out, metric = busy_in_windows(samples, window, ["mig_instance"])
    assert metric == "sm_active"
    assert out["busy_pct"].to_list() == [pytest.approx(90.0), pytest.approx(10.0)]
    assert out["samples"].to_list() == [3, 3]


_SECONDS = st.integers(0, 60)


@given(
    st.lists(st.tuples(_SECONDS, st.integers(0, 5)), max_size=25),
    st.lists(st.tuples(_SECONDS, st.integers(0, 12)), max_size=6),
)
def test_overlapping_pairs_equal_the_range_join(
    points: list[tuple[int, int]], spans: list[tuple[int, int]]
) -> None:
    """Binary-searched pairs equal the general range join, for spans that overlap each other
    (the general path) or not (the fast path), empty and zero-length ones included."""
    t0 = datetime(2026, 5, 1)
    at = [t0 + timedelta(seconds=s) for s, _ in points]
    frame = pl.DataFrame(
        {
            "p": list(range(len(points))),
            "ts": at,
            "_from": [t - timedelta(seconds=back) for t, (_, back) in zip(at, points, strict=True)],
        },
        schema={"p": pl.Int64, "ts": pl.Datetime("ms"), "_from": pl.Datetime("ms")},
    )
    for chosen in (spans, _disjoint(spans)):
        windows = pl.DataFrame(
            {
                "w": list(range(len(chosen))),
                "_start": [t0 + timedelta(seconds=s) for s, _ in chosen],
                "_end": [t0 + timedelta(seconds=s + n) for s, n in chosen],
            },
            schema={"w": pl.Int64, "_start": pl.Datetime("ms"), "_end": pl.Datetime("ms")},
        )
        want = frame.join_where(
            windows, pl.col("ts") >= pl.col("_start"), pl.col("_from") < pl.col("_end")
        )
        got = overlapping(frame, windows)
        assert sorted(got.select("p", "w").rows()) == sorted(want.select("p", "w").rows())


def _disjoint(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans laid end to end with a gap after each: none overlaps another."""
    out, start = [], 0
    for gap, length in spans:
        out.append((start + gap % 5, length))
        start += gap % 5 + length + 1
    return out
