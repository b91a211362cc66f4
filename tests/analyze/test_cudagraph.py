"""CUDA-graph coverage and KV pressure analyses."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from toolkit.analyze.cudagraph import GRAPH_COVERAGE, cuda_graph_coverage, graph_summary
from toolkit.analyze.kv import KV_PRESSURE, RETRACTIONS, kv_pressure, retractions

T0 = datetime(2026, 5, 1, 10, 0, 0)


def _decode(sizes: list[int], flags: list[bool | None], usage: float = 0.1) -> pl.DataFrame:
    n = len(sizes)
    return pl.DataFrame(
        {
            "ts": [T0 + timedelta(seconds=i) for i in range(n)],
            "kind": ["decode"] * n,
            "dp": [None] * n,
            "pp": [None] * n,
            "tp": [0] * n,
            "running_req": sizes,
            "cuda_graph": flags,
            "token": [1000] * n,
            "token_usage": [usage] * n,
            "queue_req": [3] * n,
        },
        schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32, "cuda_graph": pl.Boolean},
    )


def test_coverage_counts_eager_sizes_above_the_capture() -> None:
    cov = cuda_graph_coverage(_decode([8, 8, 48, 48], [True, True, False, False]), [1, 2, 4, 8, 32])
    assert cov.schema == GRAPH_COVERAGE
    assert cov["captured"].to_list() == [True, False]
    assert cov["eager_share"].to_list() == [0.0, 1.0]
    s = graph_summary(cov, [1, 2, 4, 8, 32])
    assert (s["eager_lines"], s["eager_share"], s["max_captured"], s["max_observed"]) == (
        2,
        0.5,
        32,
        48,
    )


def test_coverage_without_flags_uses_the_capture_list() -> None:
    cov = cuda_graph_coverage(_decode([8, 48], [None, None]), [8], padding=False)
    assert cov["unflagged_lines"].to_list() == [1, 1]
    s = graph_summary(cov, [8])
    assert s["eager_share"] == 0.5 and s["flagged_lines"] == 0
    assert graph_summary(cuda_graph_coverage(_decode([8], [None]), None))["eager_share"] is None


def test_retractions_are_parsed_and_counted_per_line() -> None:
    lines = pl.DataFrame(
        {
            "ts": [T0 + timedelta(seconds=1.5), T0 + timedelta(seconds=1.7), T0],
            "pp": [0, 0, 0],
            "message": [
                "KV cache pool is full. Retract requests. #retracted_reqs: 2, "
                "#new_token_ratio: 0.7000 -> 0.9000",
                "Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.9 -> 1.0",
                "Load weight end. elapsed=1 s",
            ],
        }
    )
    events = retractions(lines)
    assert events.schema == RETRACTIONS
    assert events["retracted_reqs"].to_list() == [2, 1]
    assert events["ratio_after"].to_list() == [0.9, 1.0]
    kv = kv_pressure(_decode([8, 8, 8], [True] * 3, usage=0.95), events)
    assert kv.schema == KV_PRESSURE
    assert kv["retracted"].to_list() == [0, 0, 3]  # both land on the line after them
    assert kv["blocked_by_tokens"].all()
    assert not kv_pressure(_decode([8], [True], usage=0.5))["blocked_by_tokens"].any()
