"""Stage timeline: ordinals on one clock, lock-step vs desync, cadence, busy per stage."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from helpers import TEST_DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.analyze.stages import (
    PHASE_BUSY,
    STAGE_BUSY,
    STAGE_CADENCE,
    STAGE_DESYNC,
    STAGE_TIMELINE,
    desync_share,
    phase_busy,
    reference_lines,
    stage_busy,
    stage_cadence,
    stage_desync,
    stage_timeline,
)
from toolkit.analyze.timeline import GPU_SERIES, stage_gpu_series
from toolkit.load.sglang.log import load_sglang_log

DATA = TEST_DATA
T0 = datetime(2026, 5, 1, 10, 0, 0)


def _lines(values: list[tuple[int, int]], stages: int, skew: dict | None = None) -> pl.DataFrame:
    """Decode lines of ``stages`` ranks printing the same (running, token) per ordinal."""
    rows = []
    for i, (running, token) in enumerate(values):
        for k in range(stages):
            rows.append(
                {
                    "ts": T0 + timedelta(seconds=2 * i),
                    "kind": "decode",
                    "dp": None,
                    "pp": k,
                    "tp": None,
                    "running_req": running,
                    "token": token + (skew or {}).get((k, i), 0),
                    "gen_tok_s": 100.0,
                }
            )
    return pl.DataFrame(rows, schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32})


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 64), st.integers(0, 10**6)), min_size=1, max_size=12),
    st.integers(2, 8),
)
def test_identical_stages_have_zero_desync(values: list[tuple[int, int]], stages: int) -> None:
    desync = stage_desync(stage_timeline(_lines(values, stages)))
    assert desync.height == len(values)
    assert desync_share(desync) == 0.0


def test_one_stage_off_at_one_ordinal_is_a_desync() -> None:
    values = [(8, 1000 + i) for i in range(5)]
    timeline = stage_timeline(_lines(values, 4, skew={(2, 3): 64}))
    assert timeline.schema == STAGE_TIMELINE
    desync = stage_desync(timeline)
    assert desync.schema == STAGE_DESYNC
    assert desync.filter(~pl.col("agrees"))["ordinal"].to_list() == [3]
    assert desync_share(desync) == pytest.approx(0.2)


def test_incomplete_ordinals_are_not_compared() -> None:
    lines = _lines([(8, 1), (8, 2)], 4).filter(~((pl.col("pp") == 3) & (pl.col("token") == 2)))
    timeline = stage_timeline(lines)
    assert timeline.filter(pl.col("ordinal") == 1)["complete"].unique().to_list() == [False]
    assert stage_desync(timeline)["ordinal"].to_list() == [0]


def test_real_pp8_log_is_in_lock_step() -> None:
    log = load_sglang_log(DATA / "sglang" / "v0.5.23-pp8.log", cache=False)
    timeline = stage_timeline(log.batches)
    decode = timeline.filter(pl.col("kind") == "decode")
    assert sorted(decode["pp"].unique().to_list()) == list(range(8))
    assert decode["agrees"].all() and decode["lag_s"].max() == 0
    assert decode.filter(pl.col("ordinal") == 1)["step_ms"].to_list() == [25.0] * 8  # 1 s / 40
    assert desync_share(stage_desync(timeline)) == 0.0
    ref = reference_lines(log.batches, "decode")
    assert ref["pp"].unique().to_list() == [0] and ref.height == 2


def test_cadence_gives_round_time_from_active_slots() -> None:
    timeline = stage_timeline(_lines([(8, i) for i in range(6)], 2))
    cadence = stage_cadence(timeline, active_slots=4)
    assert cadence.schema == STAGE_CADENCE
    row = cadence.row(0, named=True)
    assert row["step_ms"] == pytest.approx(2000 / 40)
    assert row["round_ms"] == pytest.approx(4 * 2000 / 40)
    assert row["tokens_per_round"] == pytest.approx(100.0 * 0.2)


def test_busy_per_stage_from_trace_inside_decoding_windows() -> None:
    batches = _lines([(4, i) for i in range(10)], 2)
    samples = pl.DataFrame(
        {
            "ts": [T0 + timedelta(seconds=s) for s in range(-10, 20) for _ in (0, 1)],
            "gpu": [g for _ in range(-10, 20) for g in (0, 1)],
            "util_pct": [80.0 if g == 1 else 40.0 for _ in range(-10, 20) for g in (0, 1)],
        },
        schema_overrides={"gpu": pl.Int32},
    )
    # Samples before the first decode line (idle at 0 %) must not count.
    samples = samples.with_columns(
        util_pct=pl.when(pl.col("ts") < T0).then(0.0).otherwise(pl.col("util_pct"))
    )
    roles = pl.DataFrame({"gpu": [0, 1], "pp": [0, 1]}, schema_overrides={"gpu": pl.Int32})
    busy = stage_busy(batches, samples, roles)
    assert busy.schema == STAGE_BUSY
    assert busy["busy_pct"].to_list() == [40.0, 80.0]
    assert busy["vs_mean"].to_list() == pytest.approx([40 / 60, 80 / 60])
    phases = pl.DataFrame({"phase": [0], "start": [T0], "end": [T0 + timedelta(seconds=18)]})
    per_phase = phase_busy(samples, roles, phases)
    assert per_phase.schema == PHASE_BUSY
    assert per_phase["busy_pct"].to_list() == [40.0, 80.0]
    series = stage_gpu_series(samples, roles, every="5s")
    assert series.schema == GPU_SERIES
    assert series["pp"].unique().sort().to_list() == [0, 1]
    assert stage_gpu_series(samples, roles, every="1s", max_points=10).height <= 10


def test_busy_of_a_slowly_logging_run_reads_its_whole_decoding_time() -> None:
    """One request under PP: each stage logs a line every 16 s. The windows follow the log's
    cadence, so the trace between the lines counts; a fixed 10 s gap would cut every line
    into a window of no length."""
    batches = _lines([(1, i) for i in range(8)], 2).with_columns(
        ts=T0 + pl.duration(seconds=pl.col("token") * 16)
    )
    seconds = range(-20, 8 * 16 + 20)
    samples = pl.DataFrame(
        {
            "ts": [T0 + timedelta(seconds=s) for s in seconds for _ in (0, 1)],
            "gpu": [g for _ in seconds for g in (0, 1)],
            "util_pct": [
                0.0 if not 0 <= s <= 7 * 16 else 90.0 if g == 0 else 30.0
                for s in seconds
                for g in (0, 1)
            ],
        },
        schema_overrides={"gpu": pl.Int32},
    )
    roles = pl.DataFrame({"gpu": [0, 1], "pp": [0, 1]}, schema_overrides={"gpu": pl.Int32})
    busy = stage_busy(batches, samples, roles)
    assert busy["busy_pct"].to_list() == pytest.approx([90.0, 30.0], abs=1.0)
    assert busy["samples"].to_list() == [7 * 16] * 2  # a sample stands for the second before it
    assert stage_busy(batches, samples, roles, max_gap_s=10.0)["samples"].max() <= 8


def test_busy_falls_back_to_fwd_occupancy() -> None:
    log = load_sglang_log(DATA / "sglang" / "v0.5.23-pp8.log", cache=False)
    busy = stage_busy(log.batches)
    assert busy["metric"].unique().to_list() == ["fwd_occupancy"]
    assert busy.filter(pl.col("pp") == 7)["fwd_occupancy_pct"].item() == pytest.approx(42.6)


def test_a_dropped_line_does_not_read_as_a_desync() -> None:
    values = [(8, 1000 + 40 * i) for i in range(10)]
    lines = _lines(values, 4)
    # Stage 2 lost its 4th line; stage 3 lost the 1st and 2nd (a rotated log head).
    lost = ((pl.col("pp") == 2) & (pl.col("token") == 1120)) | (
        (pl.col("pp") == 3) & pl.col("token").is_in([1000, 1040])
    )
    timeline = stage_timeline(lines.filter(~lost))
    desync = stage_desync(timeline)
    assert desync_share(desync) == 0.0
    assert sorted(desync["ordinal"].to_list()) == [2, 4, 5, 6, 7, 8, 9]  # on all four stages
    stage3 = timeline.filter(pl.col("pp") == 3)
    assert stage3["ordinal"].to_list() == list(range(2, 10))


def test_reference_stage_missing_a_line_leaves_others_unaligned() -> None:
    values = [(8, 1000 + 40 * i) for i in range(6)]
    lines = _lines(values, 2).filter(~((pl.col("pp") == 0) & (pl.col("token") == 1080)))
    timeline = stage_timeline(lines)
    stage1 = timeline.filter(pl.col("pp") == 1)
    assert stage1["ordinal"].to_list() == [0, 1, None, 2, 3, 4]
    assert desync_share(stage_desync(timeline)) == 0.0
