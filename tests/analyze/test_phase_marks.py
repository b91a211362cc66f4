"""A phase file's times take precedence over the log's evidence when placing benchmark runs."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl

from toolkit.analyze.phases import PHASES, decode_phases
from toolkit.schema.bench import PHASE_MARKS

T0 = datetime(2026, 1, 1, 12, 0, 0)


def _lines(phases: list[tuple[float, int]], *, every_s: float = 1.0, n: int = 8) -> pl.DataFrame:
    """Decode lines: for each (start second, requests in flight), ``n`` lines ``every_s``
    apart; ``#token`` = requests × 1050."""
    rows = [
        (T0 + timedelta(seconds=start + i * every_s), c, c * 1050)
        for start, c in phases
        for i in range(n)
    ]
    return pl.DataFrame(
        {
            "ts": [r[0] for r in rows],
            "kind": ["decode"] * len(rows),
            "dp": [None] * len(rows),
            "pp": [None] * len(rows),
            "tp": [0] * len(rows),
            "running_req": [r[1] for r in rows],
            "token": [r[2] for r in rows],
            "gen_tok_s": [100.0] * len(rows),
        },
        schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32},
    ).with_columns(pl.col("ts").cast(pl.Datetime("ms")))


def _bench(concurrencies: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "entry": list(range(len(concurrencies))),
            "max_concurrency": concurrencies,
            "input_len": [1000.0] * len(concurrencies),
            "output_len": [100.0] * len(concurrencies),
            "output_tok_s": [10.0 * c for c in concurrencies],
        }
    )


def _marks(spans: list[tuple[float, float, int]], results: list[int] | None = None):
    rows = [
        {
            "source": "phases.jsonl",
            "lineno": i + 1,
            "phase": i,
            "concurrency": c,
            "num_prompts": 4 * c,
            "start": T0 + timedelta(seconds=a),
            "end": T0 + timedelta(seconds=b),
            "exit_code": 0,
            "results": 1 if results is None else results[i],
            "interrupted": False,
        }
        for i, (a, b, c) in enumerate(spans)
    ]
    return pl.DataFrame(rows, schema=PHASE_MARKS, orient="row")


def test_marks_split_phases_the_log_shows_no_pause_between() -> None:
    """Two loads back to back, lines every second: no pause to split at, the marks split."""
    lines = _lines([(0, 4), (8, 16)])
    assert decode_phases(lines, _bench([4, 16])).height == 1  # the evidence cannot tell
    phases = decode_phases(lines, _bench([4, 16]), marks=_marks([(0, 7.5, 4), (7.6, 16, 16)]))
    assert phases.schema == PHASES
    assert phases["offered"].to_list() == [4, 16]
    assert phases["bench_run"].to_list() == [0, 1]
    assert phases["decode_lines"].to_list() == [8, 8]
    assert all(phases["placed"].to_list())


def test_lines_outside_every_mark_are_no_phase() -> None:
    """A warm-up before the sweep decodes outside the marks: it is left out."""
    lines = _lines([(0, 1), (60, 8), (120, 32)])
    marks = _marks([(59.5, 68, 8), (119.5, 128, 32)])
    phases = decode_phases(lines, _bench([8, 32]), marks=marks)
    assert phases["offered"].to_list() == [8, 32]
    assert phases["start"][0] == T0 + timedelta(seconds=60)


def test_a_marked_run_is_used_even_when_its_count_does_not_fit() -> None:
    """32 in flight against a run that offered 8: the evidence refuses it, the marks do not."""
    lines = _lines([(0, 32), (60, 8)])
    unplaced = decode_phases(lines, _bench([8, 8]))
    assert unplaced["offered"].to_list()[0] is None
    phases = decode_phases(lines, _bench([8, 8]), marks=_marks([(0, 8, 8), (59.5, 68, 8)]))
    assert phases["offered"].to_list() == [8, 8]
    assert phases["placement"][0] == 4.0  # still reported


def test_a_mark_that_added_no_result_takes_no_run() -> None:
    """The first phase failed (no result line): its load is still known, the run is the next."""
    lines = _lines([(0, 4), (60, 8)])
    marks = _marks([(0, 8, 4), (59.5, 68, 8)], results=[0, 1])
    phases = decode_phases(lines, _bench([8]), marks=marks)
    assert phases["offered"].to_list() == [4, 8]
    assert phases["bench_run"].to_list() == [None, 0]
    assert phases["bench_tok_s"].to_list() == [None, 80.0]


def test_whole_second_lines_are_matched_by_the_seconds_a_mark_touches() -> None:
    """SGLang prints whole seconds: a line stamped 12:00:10 may come from 12:00:10.9."""
    lines = _lines([(10, 4)], n=3)  # 10, 11, 12
    phases = decode_phases(lines, _bench([4]), marks=_marks([(10.9, 12.2, 4)]))
    assert phases["decode_lines"].to_list() == [3]


def test_a_mark_never_takes_lines_of_the_previous_one() -> None:
    """Millisecond lines: the slack before a mark stops at the previous mark's end."""
    lines = _lines([(0, 2), (2.05, 6)], every_s=0.25, n=8)  # 0 … 1.75, then 2.05 … 3.8
    phases = decode_phases(lines, _bench([2, 6]), marks=_marks([(0, 1.9, 2), (1.95, 4, 6)]))
    assert phases["decode_lines"].to_list() == [8, 8]
