"""Commands hold aggregates, not line tables: once a log is typed into its store, no frame a
query of the store collects grows with the log (rows are launches, request forms, kinds)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers.launch_logs import Launch, bench_jsonl, log_text

from toolkit.cli.parse import summarize
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

DECODE_ROUNDS = 3000
PP = 4
BOUND = 200
"""Rows a collected frame may hold: far below the log's DECODE_ROUNDS × PP batch lines."""


@contextmanager
def collected_heights(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Heights of every frame collected from a lazy query while the block runs."""
    heights: list[int] = []
    collect, collect_all = pl.LazyFrame.collect, pl.collect_all

    def spy(self: pl.LazyFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        out = collect(self, *args, **kwargs)
        heights.append(out.height)
        return out

    def spy_all(frames: list[pl.LazyFrame], *args: object, **kwargs: object) -> list:
        out = collect_all(frames, *args, **kwargs)
        heights.extend(f.height for f in out)
        return out

    with monkeypatch.context() as m:
        m.setattr(pl.LazyFrame, "collect", spy)
        m.setattr(pl, "collect_all", spy_all)
        yield heights


@pytest.fixture(scope="module")
def busy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journald PP4 log of a crash and a restart with thousands of batch lines, and its
    benchmark results."""
    start = datetime(2026, 5, 12, 10, 0)
    first = Launch(start, pp=PP, decode_lines=DECODE_ROUNDS, crash="torch.OutOfMemoryError")
    second = Launch(datetime(2026, 5, 12, 14, 0), pp=PP, decode_lines=DECODE_ROUNDS, dump=False)
    run = tmp_path_factory.mktemp("busy")
    (run / "server.log").write_text(log_text(first, second, host="gpu-a", pids=[4100, 5200]))
    (run / "bench.jsonl").write_text(bench_jsonl(start, [1, 8]))
    return run


def test_parse_summary_holds_no_line_table(busy_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summarize(busy_run / "server.log")  # types the log into its store (chunk by chunk)
    with collected_heights(monkeypatch) as heights:
        (part, *_) = summarize(busy_run / "server.log")
    assert part["counts"]["decode"] == 2 * DECODE_ROUNDS * PP
    # parse lists the dumps; the restart without one belongs to the first here
    assert [la["batch_lines"] for la in part["launches"]] == [2 * DECODE_ROUNDS * PP]
    assert heights and max(heights) <= BOUND


def test_launch_spans_of_a_run_hold_no_line_table(
    busy_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = load_run(busy_run)
    assert run.log is not None  # typed into its store here, before the spy
    with collected_heights(monkeypatch) as heights:
        spans = run.launch_spans
    assert spans["batch_lines"].to_list() == [DECODE_ROUNDS * PP] * 2
    assert "new process ids" in spans["why"][1]
    assert heights and max(heights) <= BOUND


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="the stage timeline and the batch lines of the chosen launch are still line tables",
)
def test_diagnose_analyses_hold_aggregates(busy_run: Path) -> None:
    ctx = RunAnalysis(load_run(busy_run))
    tables = {
        name: value
        for name in ("batches", "timeline", "occupancy", "phases")
        if isinstance(value := getattr(ctx, name), pl.DataFrame)
    }
    assert tables and all(t.height <= BOUND for t in tables.values())
