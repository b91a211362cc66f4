"""AIPerf's GPU telemetry JSONL read as a GPU trace per host and UUID, and the caveats of GPU
traces: sampling stalls with their length, headers given or written by hand."""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers.gpu_fixtures import GPU_DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.load.gpu.caveats import STALL_FACTOR, STALL_MIN_S, sampling_stalls
from toolkit.load.gpu.trace import load_gpu_trace, summarize_gpu_file
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff

TELEMETRY = GPU_DATA / "aiperf-gpu-telemetry.jsonl"


def test_telemetry_is_a_trace_per_host_and_uuid() -> None:
    assert sniff(TELEMETRY) == "aiperf-gpu-telemetry"
    trace = load_gpu_trace(TELEMETRY, cache=False)
    s = trace.samples
    assert s.select("host", "uuid").unique().height == 4
    per_gpu = s.group_by("host", "uuid").agg(pl.len(), pl.col("sample").max())
    assert per_gpu["len"].to_list() == [14] * 4 and per_gpu["sample"].to_list() == [13] * 4
    first = (
        s.filter((pl.col("host") == "node-a") & (pl.col("gpu") == 0)).sort("ts").row(0, named=True)
    )
    assert first["ts"] == datetime(2026, 5, 1, 10, 15, 40)
    assert first["util_pct"] == 90.0 and first["power_w"] == 612.5
    assert first["sm_clock_mhz"] == 1980.0 and first["mem_clock_mhz"] == 2619.0
    # AIPerf prints memory in GB: back to MiB
    assert first["mem_used_mib"] == pytest.approx(76.5e9 / 2**20)
    assert first["energy_mj"] == pytest.approx(0.0012e9)  # MJ → mJ
    assert first["aiperf_xid_errors"] == 0.0  # unknown keys kept by name
    busy = s.group_by("host").agg(pl.col("util_pct").mean()).sort("host")
    assert busy["util_pct"].to_list() == [90.0, 60.0]
    # the cut last line is a problem, the null temperature an unavailable cell
    assert trace.skipped["reason"].to_list() == ["not json"]
    cell = trace.unavailable.row(0, named=True)
    assert (cell["field"], cell["count"]) == ("gpu_temperature", 1)


def test_a_stall_is_a_caveat_with_its_length() -> None:
    trace = load_gpu_trace(TELEMETRY, cache=False)
    (stall,) = trace.caveats
    assert stall.kind == "sampling-stall" and stall.affects == "gpu_busy"
    assert stall.count == 1 and stall.length_s == pytest.approx(7.0)
    assert "after 10:15:49" in stall.text()
    entry = summarize_gpu_file(TELEMETRY)
    assert [c["kind"] for c in entry["caveats"]] == ["sampling-stall"]


def test_gaps_of_a_few_intervals_are_no_stall(tmp_path: Path) -> None:
    lines = TELEMETRY.read_text().splitlines()[:-1]
    path = tmp_path / "steady.jsonl"
    path.write_text("\n".join(lines[: 10 * 4]) + "\n")  # the ten polls before the stall
    assert load_gpu_trace(path, cache=False).caveats == ()
    assert STALL_FACTOR > 1


def test_a_run_directory_picks_the_telemetry_up(tmp_path: Path) -> None:
    shutil.copy(TELEMETRY, tmp_path / "gpu_telemetry_export.jsonl")
    run = load_run(tmp_path)
    assert run.gpu is not None
    assert run.gpu.samples.select("host", "uuid").unique().height == 4


def test_given_and_hand_written_headers_are_caveats(tmp_path: Path) -> None:
    rows = (GPU_DATA / "smi-noheader.csv").read_text()
    fields = "timestamp,index,utilization.gpu,memory.used,power.draw"
    given = load_gpu_trace(GPU_DATA / "smi-noheader.csv", fields=fields, cache=False)
    assert [c.kind for c in given.caveats] == ["guessed-header"]
    assert "given field list" in given.caveats[0].text()
    hand = tmp_path / "hand.csv"
    hand.write_text(fields + "\n" + rows)
    written = load_gpu_trace(hand, cache=False)
    assert written.samples["util_pct"].to_list()[:2] == [98.0, 44.0]
    assert [c.kind for c in written.caveats] == ["guessed-header"]
    assert "by hand" in written.caveats[0].text()
    # nvidia-smi's own header names units: no caveat
    assert load_gpu_trace(GPU_DATA / "smi-nounits.csv", cache=False).caveats == ()


@given(
    interval=st.floats(0.05, 2.0),
    polls=st.integers(12, 60),
    at=st.integers(3, 9),
    gap_polls=st.integers(0, 40),
)
def test_a_stall_is_found_exactly_when_the_gap_is_long(
    interval: float, polls: int, at: int, gap_polls: int
) -> None:
    """Two GPUs polled every ``interval`` s, with ``gap_polls`` polls missing after poll
    ``at``: a stall exactly when the gap passes the factor and the floor, with its length."""
    start = datetime(2026, 5, 1, 10, 0, 0)
    times = [k * interval for k in range(polls)]
    times = [t if k <= at else t + gap_polls * interval for k, t in enumerate(times)]
    samples = pl.DataFrame(
        {
            "gpu": [g for _ in times for g in (0, 1)],
            "ts": [start + timedelta(seconds=t) for t in times for _ in (0, 1)],
        },
        schema={"gpu": pl.Int32, "ts": pl.Datetime("ms")},
    )
    stalls = sampling_stalls(samples)
    gap = (gap_polls + 1) * interval
    clear = gap > STALL_FACTOR * interval * 1.01 and gap >= STALL_MIN_S * 1.01
    missed = gap < STALL_FACTOR * interval * 0.99 or gap < STALL_MIN_S * 0.99
    if clear:
        assert stalls.height == 1
        assert stalls["gap_s"][0] == pytest.approx(gap, abs=0.002)
    elif missed:
        assert stalls.height == 0
