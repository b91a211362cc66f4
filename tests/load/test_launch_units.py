"""Each server start of a run directory is its own unit: its lines, args, command and windows."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path

import polars as pl
from helpers.launch_logs import Launch, bench_jsonl, command_for, log_text

from toolkit.load.run import load_run
from toolkit.load.units import LaunchRun, launch_units

CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _with_command(launch: Launch) -> Launch:
    return replace(launch, command=command_for(launch))


def _crash_and_relaunch(path: Path) -> tuple[Launch, Launch]:
    """One log: a PP4 start with async depth 4 crashes mid-sweep; the relaunch asks for
    depth 0 and a smaller request cap, each start printed after its own command line."""
    first = _with_command(Launch(datetime(2026, 5, 12, 9, 0), depth=4, mrr=256, crash=CRASH))
    second = _with_command(Launch(datetime(2026, 5, 12, 10, 14, 3), depth=0, mrr=64))
    path.write_text(log_text(first, second))
    return first, second


def test_a_crash_and_relaunch_are_two_units_each_with_its_own_settings(tmp_path: Path) -> None:
    first, second = _crash_and_relaunch(tmp_path / "server.log")
    run = load_run(tmp_path)
    units = launch_units(run)
    assert [type(u) for u in units] == [LaunchRun, LaunchRun]
    assert [u.layout.pp_async_batch_depth for u in units] == [first.depth, second.depth]
    assert [u.launch.server_args["max_running_requests"] for u in units] == [256, 64]
    # each command is the line printed before that launch's dump
    assert [u.command for u in units] == [
        (command_for(first).removeprefix("python -m "), "server.log:1"),
        (
            command_for(second).removeprefix("python -m "),
            f"server.log:{units[1].window['lineno'] - 1}",
        ),
    ]
    # the batch lines split at the relaunch, none shared
    lines = [set(u.batches["lineno"].to_list()) for u in units]
    assert not lines[0] & lines[1]
    assert sum(map(len, lines)) == run.log.batches.height
    assert units[0].batches["ts"].max() < units[1].batches["ts"].min()


def test_a_file_without_a_dump_is_a_launch_named_by_its_file(tmp_path: Path) -> None:
    """A 2025 log that printed no dump beside a 2026 PP4 log: two units, never one pool."""
    old = Launch(datetime(2025, 3, 4, 8, 0), pp=1, model="meta-llama/Llama-3.1-8B-Instruct")
    (tmp_path / "old.log").write_text(log_text(replace(old, dump=False)))
    (tmp_path / "pp4.log").write_text(log_text(Launch(datetime(2026, 5, 12, 10, 0), pp=4)))
    run = load_run(tmp_path)
    spans = run.launch_spans
    assert spans["group"].n_unique() == 2
    assert spans.filter(pl.col("source").str.ends_with("old.log"))["why"].to_list() == [
        "no server_args dump"
    ]
    units = launch_units(run)
    files = [{Path(s).name for s in u.batches["source"].to_list()} for u in units]
    assert files == [{"old.log"}, {"pp4.log"}]
    assert [u.layout.pp for u in units] == [1, 4]


def test_a_new_process_id_after_a_crash_starts_a_launch_without_a_dump(tmp_path: Path) -> None:
    """journald: the first server's processes stop, new ones start; no second dump."""
    first = Launch(datetime(2026, 5, 12, 10, 0), crash="torch.OutOfMemoryError: CUDA out of memory")
    second = Launch(datetime(2026, 5, 12, 10, 20), dump=False)
    (tmp_path / "journal.log").write_text(log_text(first, second, host="gpu-a", pids=[4100, 5200]))
    run = load_run(tmp_path)
    spans = run.launch_spans.sort("start")
    assert spans.height == 2 and spans["group"].n_unique() == 2
    assert "new process ids from 5200" in spans["why"][1]
    assert spans["start"][1] == datetime(2026, 5, 12, 10, 20, 5)  # its first startup line
    assert spans["host"].to_list() == ["gpu-a", "gpu-a"]


def test_the_startup_sequence_after_batch_lines_is_a_restart(tmp_path: Path) -> None:
    """A bare log (no wrapper, no pid): a relaunch whose dump is missing still starts a unit;
    the warm-up batch before ``fired up`` does not."""
    first = Launch(datetime(2026, 5, 12, 10, 0))
    second = Launch(datetime(2026, 5, 12, 11, 0), dump=False)
    (tmp_path / "server.log").write_text(log_text(first, second))
    spans = load_run(tmp_path).launch_spans.sort("start")
    assert spans["why"].to_list() == [None, "the startup sequence again after batch lines"]
    assert spans["batch_lines"].to_list() == [80, 80]


def test_a_stray_bench_file_belongs_to_no_launch(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(log_text(Launch(datetime(2026, 5, 12, 10, 0))))
    (tmp_path / "bench.jsonl").write_text(bench_jsonl(datetime(2026, 2, 1, 9, 0), [1, 8]))
    run = load_run(tmp_path)
    (stray,) = run.stray_inputs
    assert stray["input"] == "benchmark results" and Path(stray["file"]).name == "bench.jsonl"
    assert run.bench_all is not None and run.bench_all.runs.height == 2
    assert run.bench is None  # not used
    (note,) = [m for m in run.mismatches if m["files"] == "bench.jsonl"]
    assert "meet no server launch" in note["detail"] and "2026-02-01 09:00:00" in note["detail"]


def test_bench_rows_go_to_the_launch_whose_window_holds_them(tmp_path: Path) -> None:
    _crash_and_relaunch(tmp_path / "server.log")
    (tmp_path / "bench.jsonl").write_text(
        bench_jsonl(datetime(2026, 5, 12, 9, 1), [1])
        + bench_jsonl(datetime(2026, 5, 12, 10, 15), [8, 16])
    )
    run = load_run(tmp_path)
    units = launch_units(run)
    assert [u.bench.runs["concurrency"].to_list() for u in units] == [[1], [8, 16]]
    assert run.stray_inputs == []


def test_one_launch_is_its_own_unit(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(log_text(Launch(datetime(2026, 5, 12, 10, 0))))
    run = load_run(tmp_path)
    assert launch_units(run) == [run]
    assert run.launch_spans["why"].to_list() == [None]
