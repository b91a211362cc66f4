"""Recorded public traces load whole: their events checked against an independent reading."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.load.profile import is_torch_trace, load_profile_trace

PUBLIC = TEST_DATA / "profile" / "public"
TRACES = sorted(PUBLIC.glob("*.json.gz"))


def _raw(path: Path) -> dict:
    with gzip.open(path) as f:
        return json.load(f)


def test_the_public_traces_are_here() -> None:
    assert len(TRACES) == 3


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_a_recorded_trace_loads_whole_with_every_kernel(path: Path) -> None:
    raw = _raw(path)
    assert is_torch_trace(path)
    trace = load_profile_trace(path)
    assert trace.cut is None
    assert trace.events_read == len(raw["traceEvents"])
    kernels = [e for e in raw["traceEvents"] if e.get("cat") == "kernel"]
    loaded = trace.events.filter(trace.events["cat"] == "kernel")
    assert loaded.height == len(kernels)
    assert sorted(loaded["stream"].unique().to_list()) == sorted(
        {e["args"]["stream"] for e in kernels}
    )
    assert loaded["dur_us"].sum() == pytest.approx(sum(e["dur"] for e in kernels))


def test_the_rank_comes_from_distributed_info() -> None:
    path = PUBLIC / "sampled_rank-1.json.gz"
    trace = load_profile_trace(path)
    assert trace.rank == _raw(path)["distributedInfo"]["rank"] == 1
    sends = trace.events.filter(trace.events["name"].str.starts_with("ncclKernel_SendRecv"))
    assert sends.height > 0  # NCCL's point-to-point kernels, the PP stage hand-off
