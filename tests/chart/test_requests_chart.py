"""Request charts, tested as data."""

from __future__ import annotations

import polars as pl

from toolkit.chart.requests import request_timeline_chart, ttft_split_chart


def test_ttft_split_stacks_queue_under_prefill() -> None:
    frame = pl.DataFrame(
        {"phase": ["0 (c=8)", "0 (c=8)"], "part": ["queue", "prefill"], "ms": [120.0, 80.0]}
    )
    spec = ttft_split_chart(frame).to_dict()
    assert spec["mark"]["type"] == "bar"
    assert spec["encoding"]["y"]["stack"] == "zero"
    assert spec["encoding"]["color"]["scale"]["domain"] == ["queue", "prefill"]
    assert spec["data"]["values"] == frame.to_dicts()


def test_timeline_draws_one_rule_per_part() -> None:
    frame = pl.DataFrame(
        {"row": [0, 0], "part": ["queue", "decode"], "t0": [0.0, 100.0], "t1": [10.0, 900.0]}
    )
    spec = request_timeline_chart(frame).to_dict()
    assert spec["mark"]["type"] == "rule"
    assert spec["encoding"]["x2"]["field"] == "m1"
    assert len(spec["data"]["values"]) == 2
