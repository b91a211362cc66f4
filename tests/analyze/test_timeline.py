"""The report's stage frame: decode lines and GPU busy per stage, from frames alone."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.timeline import (
    STAGE_FRAME,
    span_minutes,
    stage_frame,
    stage_names,
    stage_order,
    time_span,
)
from toolkit.load.sglang.log import load_sglang_log

DATA = TEST_DATA


def _pp8() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The PP8 imbalance case's log, and a 1 s trace of 8 GPUs over its decode lines where
    GPU k reads 10·k % (``util_pct``)."""
    log = load_sglang_log(DATA / "diagnose" / "pp8-imbalance" / "server.log", cache=False)
    decode = log.batches.filter(pl.col("kind") == "decode")
    lo, hi = decode["ts"].min(), decode["ts"].max()
    assert isinstance(lo, datetime) and isinstance(hi, datetime)
    ts = pl.datetime_range(lo, hi, "1s", eager=True)
    samples = pl.DataFrame({"ts": ts}).join(
        pl.DataFrame({"gpu": list(range(8))}, schema={"gpu": pl.Int32}), how="cross"
    )
    samples = samples.with_columns(util_pct=pl.col("gpu").cast(pl.Float64) * 10.0)
    roles = pl.DataFrame({"gpu": list(range(8)), "pp": list(range(8))})
    return log.batches, samples, roles


def test_stage_frame_per_stage_with_roles() -> None:
    batches, samples, roles = _pp8()
    long, order = stage_frame(batches, samples, roles, 8)
    assert long.schema == STAGE_FRAME
    assert order == [f"PP{k}" for k in range(8)]
    assert set(long["series"].unique()) == {"running_req", "gen_tok_s", "util_pct"}
    busy = long.filter(pl.col("series") == "util_pct").group_by("stage").agg(pl.col("value").mean())
    assert dict(busy.iter_rows()) == {f"PP{k}": pytest.approx(10.0 * k) for k in range(8)}


def test_stage_frame_without_launch_or_pipeline() -> None:
    batches, samples, roles = _pp8()
    _, order = stage_frame(batches, samples, None, None)  # no launch: GPUs one by one
    assert order == ["all GPUs", *[f"GPU {g}" for g in range(8)]]
    long, order = stage_frame(None, samples, roles, 1)
    assert order == ["all GPUs"]
    assert long["value"].mean() == pytest.approx(35.0)


def test_window_and_extent() -> None:
    batches, samples, roles = _pp8()
    span = time_span(batches, samples)
    assert span is not None and span_minutes(span) == pytest.approx(8 / 60)  # 10:07:21 … :29
    long, _ = stage_frame(batches, samples, roles, 8, window=(0.0, 2 / 60))
    times = long["t"].unique().sort()
    assert times[0] == span[0] and times[-1] <= span[0] + 2_000
    assert stage_names(batches, list(range(8)), 8) == [f"PP{k}" for k in range(8)]
    assert stage_names(batches, None, None) == ["all GPUs"]
    assert stage_names(None, [0, 10, 2], None) == ["GPU 0", "GPU 2", "GPU 10"]
    assert time_span(None, None) is None
    assert sorted(["PP10", "PP2", "all GPUs"], key=stage_order) == ["all GPUs", "PP2", "PP10"]
    assert stage_frame(None, samples.head(0), None, None)[1] == []
    assert span[1] - span[0] == int(timedelta(seconds=8).total_seconds() * 1000)
