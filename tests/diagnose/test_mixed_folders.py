"""Folders a new user brings: launches, hosts, models and years mixed. Each launch is diagnosed on
its own; nothing is compared across unrelated inputs."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers.launch_logs import Launch, bench_jsonl, command_for, launch_lines, log_text

from toolkit.cli.main import main
from toolkit.diagnose import diagnose, skipped_checks
from toolkit.run_analysis import RunAnalysis

CRASH = "RuntimeError: CUDA error: an illegal memory access was encountered"


def _launch_of(ctx: RunAnalysis, finding_launch: str | None) -> RunAnalysis:
    return next(u for u in ctx.launches if u.launch_name == finding_launch)


def test_a_crash_and_a_relaunch_are_diagnosed_apart(tmp_path: Path) -> None:
    """The relaunch's command is compared with the relaunch only: the first launch's args (depth
    4, cap 256) never meet the second's command (depth 0, cap 64); the crash is named."""
    first = Launch(datetime(2026, 5, 12, 9, 0), depth=4, mrr=256, crash=CRASH)
    second = Launch(datetime(2026, 5, 12, 10, 14, 3), depth=0, mrr=64)
    first, second = (replace(la, command=command_for(la)) for la in (first, second))
    (tmp_path / "server.log").write_text(log_text(first, second))
    ctx = RunAnalysis(tmp_path)
    found = diagnose([ctx])
    assert len(ctx.launches) == 2
    assert {f.launch for f in found} == {u.launch_name for u in ctx.launches}
    assert "config-not-applied" not in {f.id for f in found}
    assert [u.depth for u in ctx.launches] == [4, 0]
    assert [u.display_label for u in ctx.launches] == ["PP4 · launch 1", "PP4 · launch 2"]
    (crash,) = [f for f in found if f.id == "server-restart"]
    assert crash.severity == "info" and crash.launch == ctx.launches[0].launch_name
    assert CRASH in crash.summary and "launch 2" in crash.summary
    assert crash.evidence["last_error"].to_list() == [CRASH]
    # a skipped check names its launch too
    assert {s["launch"] for s in skipped_checks([ctx])} <= {u.launch_name for u in ctx.launches}


def test_a_relaunch_whose_own_flag_did_not_apply_is_still_found(tmp_path: Path) -> None:
    """Per-launch comparison does not silence a real miss: the relaunch's command asks for depth
    2, its own dump says 0."""
    first = Launch(datetime(2026, 5, 12, 9, 0), depth=4, crash=CRASH)
    second = Launch(datetime(2026, 5, 12, 10, 14, 3), depth=0)
    first = replace(first, command=command_for(first))
    second = replace(second, command=command_for(replace(second, depth=2)))
    (tmp_path / "server.log").write_text(log_text(first, second))
    ctx = RunAnalysis(tmp_path)
    (miss,) = [f for f in diagnose([ctx]) if f.id == "config-not-applied"]
    assert miss.launch == ctx.launches[1].launch_name
    assert miss.evidence["flag"].to_list() == ["pp_async_batch_depth"]
    assert miss.evidence["intended"].to_list() == ["2"]


@pytest.mark.parametrize("old_has_dump", [True, False])
def test_a_2025_single_gpu_log_beside_a_2026_pp4_log(tmp_path: Path, old_has_dump: bool) -> None:
    old = Launch(datetime(2025, 3, 4, 8, 0), pp=1, model="meta-llama/Llama-3.1-8B-Instruct")
    (tmp_path / "old.log").write_text(log_text(replace(old, dump=old_has_dump)))
    (tmp_path / "pp4.log").write_text(log_text(Launch(datetime(2026, 5, 12, 10, 0), pp=4)))
    ctx = RunAnalysis(tmp_path)
    found = diagnose([ctx])
    assert [u.run.layout.pp for u in ctx.launches] == [1, 4]
    assert "stage-desync" not in {f.id for f in found}
    for f in found:  # every finding is about one launch, and only its lines
        unit = _launch_of(ctx, f.launch)
        assert unit.batches["ts"].max() - unit.batches["ts"].min() < timedelta(hours=1)


def test_two_hosts_at_the_same_time_serving_other_models_are_apart(tmp_path: Path) -> None:
    start = datetime(2026, 5, 12, 10, 0)
    (tmp_path / "a.log").write_text(log_text(Launch(start, pp=4), host="gpu-a"))
    other = Launch(start + timedelta(minutes=1), pp=2, model="meta-llama/Llama-3.1-8B-Instruct")
    (tmp_path / "b.log").write_text(log_text(other, host="gpu-b"))
    ctx = RunAnalysis(tmp_path)
    assert [u.run.layout.pp for u in ctx.launches] == [4, 2]
    assert [u.server_args["model_path"] for u in ctx.launches] == [
        "Qwen/Qwen2.5-7B-Instruct",
        "meta-llama/Llama-3.1-8B-Instruct",
    ]
    assert "stage-desync" not in {f.id for f in diagnose([ctx])}


def test_the_same_host_and_model_on_two_hosts_are_still_apart(tmp_path: Path) -> None:
    """Same layout and model, same minute, other hosts: two single-node servers, not one
    multi-node start."""
    start = datetime(2026, 5, 12, 10, 0)
    (tmp_path / "a.log").write_text(log_text(Launch(start), host="gpu-a"))
    (tmp_path / "b.log").write_text(log_text(Launch(start), host="gpu-b"))
    ctx = RunAnalysis(tmp_path)
    assert len(ctx.launches) == 2
    assert [u.batches.height for u in ctx.launches] == [80, 80]


def test_the_same_server_years_apart_is_two_launches(tmp_path: Path) -> None:
    (tmp_path / "2024.log").write_text(log_text(Launch(datetime(2024, 1, 9, 10, 0))))
    (tmp_path / "2026.log").write_text(log_text(Launch(datetime(2026, 5, 12, 10, 0))))
    ctx = RunAnalysis(tmp_path)
    found = diagnose([ctx])
    assert len(ctx.launches) == 2
    assert "stage-desync" not in {f.id for f in found}
    assert {f.launch for f in found} == {u.launch_name for u in ctx.launches}


def test_stage_lines_hours_apart_are_not_a_desync(tmp_path: Path) -> None:
    """One launch whose PP1 lines carry another clock (hours off) and other values: misaligned
    logs, said in input-mismatch, never a stage-desync."""
    lines = []
    for ts, line in launch_lines(Launch(datetime(2026, 5, 12, 10, 0), pp=2)):
        if " PP1] Decode batch" in line:
            moved = ts + timedelta(hours=3)
            line = f"[{moved:%Y-%m-%d %H:%M:%S} PP1]" + line.split("]", 1)[1]
            line = line.replace("#running-req: 8", "#running-req: 6")
        lines.append(line)
    (tmp_path / "server.log").write_text("\n".join(lines) + "\n")
    ctx = RunAnalysis(tmp_path)
    found = {f.id: f for f in diagnose([ctx])}
    assert "stage-desync" not in found
    assert "stage lines" in found["input-mismatch"].summary
    assert "not one batch" in found["input-mismatch"].summary


def test_a_stray_bench_file_is_listed_and_not_used(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text(log_text(Launch(datetime(2026, 5, 12, 10, 0))))
    (tmp_path / "bench.jsonl").write_text(bench_jsonl(datetime(2025, 2, 1, 9, 0), [1, 8]))
    ctx = RunAnalysis(tmp_path)
    found = {f.id: f for f in diagnose([ctx])}
    assert ctx.bench is None
    assert "bench.jsonl" in found["input-mismatch"].summary
    assert "scaling-collapse" not in found


def test_json_lists_each_run_s_launches_and_clocks(tmp_path: Path, capsys) -> None:
    run = tmp_path / "run"
    run.mkdir()
    first = Launch(datetime(2026, 5, 12, 9, 0), crash=CRASH)
    second = Launch(datetime(2026, 5, 12, 10, 14, 3))
    (run / "server.log").write_text(log_text(first, second))
    (run / "bench.jsonl").write_text(bench_jsonl(datetime(2026, 5, 12, 10, 15), [8]))
    (run / "run.toml").write_text("clock_offset_s = 2.5\n")
    (run / "phases.jsonl").write_text(
        json.dumps(
            {
                "phase": 0,
                "concurrency": 8,
                "num_prompts": 32,
                "start": "2026-05-12T10:15:00",
                "end": "2026-05-12T10:15:40",
                "exit_code": 0,
            }
        )
        + "\n"
    )
    assert main(["diagnose", str(run), "--json", "-q"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (entry,) = doc["runs"]
    one, two = entry["launches"]
    assert one["name"].startswith("launch 1 of 2 (2026-05-12 09:00:00, server.log:")
    assert one["ended"] == "crash" and one["error"]["line"] == CRASH and one["next"] == 2
    assert two["ended"] == "end of log" and two["error"] is None
    assert one["batch_lines"] == two["batch_lines"] == 80
    assert two["inputs"] == ["bench.jsonl", "phases.jsonl"]
    assert one["inputs"] == []
    (clock,) = entry["clocks"]
    assert (clock["input"], clock["files"], clock["offset_s"], clock["source"]) == (
        "phases",
        "phases.jsonl",
        2.5,
        "run.toml",
    )
    assert clock["note"] == "lines up with the log's decoding as recorded"
    assert {f["launch"] for f in doc["findings"]} == {one["name"], two["name"]}
