"""``ppscope timeline`` with profiler traces: one track group per stage beside the log's stage
tracks, on the log's clock (a trace on UTC beside a log on local time is shifted by the zone
difference that puts it inside the log's window), valid Chrome trace JSON."""

from __future__ import annotations

import json
import shutil
from datetime import UTC
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.run_analysis import RunAnalysis
from toolkit.synth.torch_trace import PipelineProfile, write_pp_profile

PHASES = {"X", "i", "C", "M"}


def _run(tmp_path: Path, shift_s: int) -> tuple[Path, float]:
    """A PP8 log and a profile of its stages written on a clock ``shift_s`` behind the log's."""
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(TEST_DATA / "sglang" / "v0.5.23-pp8.log", run / "server.log")
    first = RunAnalysis(run).batches["ts"].min()
    start = first.replace(tzinfo=UTC).timestamp() + 0.5  # the log's clock, read as UTC
    base_ns = round((start - shift_s) * 1e9)
    spec = PipelineProfile(compute_ms=(3.0,) * 7 + (5.0,), steps=6, base_ns=base_ns)
    write_pp_profile(run / "profile", spec)
    return run, start


@pytest.mark.parametrize("shift_s", [0, 7200, -19800])
def test_each_stage_gets_a_track_group_on_the_logs_clock(
    tmp_path: Path, shift_s: int, capsys: pytest.CaptureFixture[str]
) -> None:
    run, start = _run(tmp_path, shift_s)
    out = tmp_path / "t.json"
    assert main(["timeline", "-q", str(run), "-o", str(out)]) == 0
    capsys.readouterr()
    trace = json.loads(out.read_text())
    events = trace["traceEvents"]
    for e in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(e) and e["ph"] in PHASES
        assert isinstance(e["ts"], int | float) and isinstance(e["pid"], int)
        assert e["ph"] != "X" or e["dur"] > 0
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    groups = sorted(n for n in names.values() if n.endswith("profile"))
    assert groups == [f"PP8 PP{k} profile" for k in range(8)]
    profiled = [e for e in events if names.get(e["pid"], "").endswith("profile") and e["ph"] == "X"]
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] in
               {p for p, n in names.items() if n.endswith("profile")}}  # fmt: skip
    assert {"CPU loop", "GPU stream 7", "GPU stream 23"} <= threads
    first = min(e["ts"] for e in profiled)
    assert first / 1e6 == pytest.approx(start, abs=0.01)  # within the log's window, shifted
    placed = trace["otherData"]["profile"]
    assert len(placed) == 8 and {p["offset_s"] for p in placed} == {float(shift_s)}
    assert all("inside the log's batch lines" in p["how"] for p in placed)


def test_a_trace_no_zone_places_is_left_out_and_said(tmp_path: Path) -> None:
    run, _ = _run(tmp_path, 3 * 24 * 3600)  # days away: another day's profile
    out = tmp_path / "t.json"
    assert main(["timeline", "-q", str(run), "-o", str(out)]) == 0
    trace = json.loads(out.read_text())
    assert not [e for e in trace["traceEvents"] if e["pid"] >= 3000]
    assert all(p["offset_s"] is None and "not placed" in p["how"]
               for p in trace["otherData"]["profile"])  # fmt: skip
