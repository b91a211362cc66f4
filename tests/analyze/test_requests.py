"""Server-side request breakdown: TTFT into queueing and prefill, per phase."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
import pytest
from helpers import TEST_DATA
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit import load_sglang_log
from toolkit.analyze.requests import merged_requests, request_breakdown, request_timeline
from toolkit.load.requests import load_server_requests
from toolkit.schema.requests import REQUEST_BREAKDOWN, REQUEST_TIMELINE, SERVER_REQUESTS

DATA = TEST_DATA / "requests"
EXPORT = DATA / "sglang-request-metrics-20251120_14.log"
T0 = datetime(2025, 11, 20, 14)  # the export's server clock (its file name's hour)


def _phases() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "phase": [0, 1],
            "start": [T0 + timedelta(seconds=0.5), T0 + timedelta(seconds=1.6)],
            "end": [T0 + timedelta(seconds=1.5), T0 + timedelta(seconds=10)],
            "offered": [2, 4],
        }
    ).with_columns(pl.col("start", "end").cast(pl.Datetime("ms")))


def test_breakdown_per_phase_from_the_export() -> None:
    got = request_breakdown(load_server_requests(EXPORT).table, _phases())
    assert got.schema == REQUEST_BREAKDOWN
    assert got["phase"].to_list() == [0, 1, None]  # the abort states no arrival
    first = got.row(0, named=True)
    # arrivals 0.123, 0.623, 1.123 s (phase 0, slack before its first decode line);
    # queues 10, 210, 410 ms; prefill 81 ms each; 12 ms per output token
    assert (first["concurrency"], first["requests"], first["with_ttft"]) == (2, 3, 3)
    assert first["queue_median_ms"] == pytest.approx(210.0)
    assert first["queue_p90_ms"] == pytest.approx(370.0)
    assert first["ttft_median_ms"] == pytest.approx(291.0, abs=1e-3)
    assert first["prefill_median_ms"] == pytest.approx(81.0, abs=1e-3)
    assert first["decode_per_token_ms"] == pytest.approx(12.0, abs=1e-6)
    e2e = [91.0 + 3060, 291.0 + 3060, 491.0 + 3060]
    assert first["queue_share"] == pytest.approx(630.0 / sum(e2e), rel=1e-4)
    assert got.row(2, named=True)["aborted"] == 1


def test_without_phases_one_row_covers_everything() -> None:
    got = request_breakdown(load_server_requests(EXPORT).table)
    assert got.height == 1 and got["requests"][0] == 5 and got["phase"][0] is None


def test_merging_keeps_one_row_per_request_and_the_admission_queue() -> None:
    log = load_sglang_log(DATA / "server-request-lines.log", cache=False)
    merged = merged_requests(log.requests)
    assert merged.schema == SERVER_REQUESTS
    assert merged["rid"].n_unique() == merged.height == 6
    one = merged.filter(pl.col("rid").str.starts_with("4c7c")).row(0, named=True)
    # e2e from the Finish line, queue and forward from the PP0 time-stats line
    assert (one["e2e_ms"], one["queue_ms"], one["pp"]) == (pytest.approx(1733.812332), 1.52, 0)


def test_timeline_has_the_four_instants_in_order() -> None:
    got = request_timeline(load_server_requests(EXPORT).table, _phases())
    assert got.schema == REQUEST_TIMELINE
    assert got.height == 4
    for r in got.iter_rows(named=True):
        assert r["start"] <= r["queue_end"] <= r["first_token"] <= r["end"]
    assert request_timeline(load_server_requests(EXPORT).table, max_points=2).height == 2


def test_empty_inputs_give_empty_declared_frames() -> None:
    empty = pl.DataFrame(schema=SERVER_REQUESTS)
    assert request_breakdown(empty, _phases()).schema == REQUEST_BREAKDOWN
    assert request_timeline(empty).height == 0


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 100),  # arrival, s after T0
            st.floats(0, 5),  # queue, s
            st.floats(0, 5),  # prefill, s
            st.floats(0, 50),  # decode, s
            st.integers(1, 2000),  # output tokens
        ),
        max_size=30,
    )
)
def test_every_request_is_counted_once_and_shares_are_fractions(rows) -> None:
    table = pl.DataFrame(
        [
            {
                "source": "x",
                "lineno": i,
                "form": "export",
                "rid": f"r{i}",
                "ts": T0 + timedelta(seconds=a),
                "first_token_ts": T0 + timedelta(seconds=a + q + p),
                "end_ts": T0 + timedelta(seconds=a + q + p + d),
                "queue_ms": q * 1e3,
                "ttft_ms": (q + p) * 1e3,
                "prefill_ms": p * 1e3,
                "decode_ms": d * 1e3,
                "e2e_ms": (q + p + d) * 1e3,
                "output_len": n,
            }
            for i, (a, q, p, d, n) in enumerate(rows)
        ],
        schema=SERVER_REQUESTS,
    )
    got = request_breakdown(table, _phases())
    assert got["requests"].sum() == len(rows)
    shares = got["queue_share"].drop_nulls()
    assert ((shares >= 0) & (shares <= 1 + 1e-9)).all()
