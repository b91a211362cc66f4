"""The stage timeline as Chrome trace JSON (ui.perfetto.dev), validated as such."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.stages import stage_timeline
from toolkit.cli.main import main
from toolkit.export import chrome_trace, write_chrome_trace
from toolkit.load.sglang.log import load_sglang_log

DATA = TEST_DATA
PHASES = {"X", "i", "C", "M"}


def _validate(trace: dict) -> list[dict]:
    """Chrome trace format: traceEvents with ph/ts/pid/tid; X has dur; C has numeric args."""
    events = trace["traceEvents"]
    assert isinstance(events, list) and events
    for e in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(e), e
        assert e["ph"] in PHASES
        assert isinstance(e["ts"], int | float) and isinstance(e["pid"], int)
        if e["ph"] == "X":
            assert e["dur"] > 0
        if e["ph"] == "C":
            assert e["args"] and all(isinstance(v, int | float) for v in e["args"].values())
        if e["ph"] == "i":
            assert e["s"] in ("t", "p", "g")
    return events


def test_trace_of_a_pp8_log(tmp_path: Path) -> None:
    log = load_sglang_log(DATA / "sglang" / "v0.5.23-pp8.log", cache=False)
    trace = chrome_trace(stage_timeline(log.batches), label="PP8")
    events = _validate(trace)
    threads = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert threads == {f"PP{k}" for k in range(8)}
    decode = [e for e in events if e["ph"] == "X"]
    assert len(decode) == 8  # the second decode line of each stage closes a 1 s window
    assert {e["dur"] for e in decode} == {1_000_000}
    assert decode[0]["args"]["running_req"] == 8
    # The log's local clock, written as if it were UTC (no time zone is known).
    end = datetime(2026, 5, 1, 10, 15, 56, tzinfo=UTC)
    assert decode[0]["ts"] + decode[0]["dur"] == int(end.timestamp() * 1e6)
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert {"#queue-req", "KV usage", "gen tok/s"} <= counters
    path = write_chrome_trace(tmp_path / "t.json", trace)
    assert json.loads(path.read_text())["traceEvents"] == events


def test_gpu_counters_per_gpu() -> None:
    t0 = datetime(2026, 1, 1)
    timeline = stage_timeline(
        pl.DataFrame(
            {
                "ts": [t0, t0],
                "kind": ["decode", "decode"],
                "dp": [None, None],
                "pp": [0, 1],
                "tp": [None, None],
                "running_req": [4, 4],
                "token": [10, 10],
            },
            schema_overrides={"dp": pl.Int32, "pp": pl.Int32, "tp": pl.Int32},
        )
    )
    gpu = pl.DataFrame(
        {
            "ts": [t0, t0 + timedelta(seconds=1)],
            "gpu": [0, 0],
            "pp": [0, 0],
            "busy_pct": [40.0, 90.0],
        }
    )
    events = _validate(chrome_trace(timeline, gpu=gpu))
    gpus = [e for e in events if e["ph"] == "C" and e["name"].startswith("GPU 0")]
    assert [e["args"]["busy_pct"] for e in gpus] == [40.0, 90.0]
    assert gpus[0]["name"] == "GPU 0 busy % (PP0)"


def test_timeline_command_writes_a_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(DATA / "diagnose" / "pp8-underfilled", tmp_path / "run"))
    out = tmp_path / "trace.json"
    assert main(["timeline", str(run), "-o", str(out)]) == 0
    assert "ui.perfetto.dev" in capsys.readouterr().out
    events = _validate(json.loads(out.read_text()))
    assert len({e["tid"] for e in events if e["ph"] == "X"}) == 8
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["timeline", str(empty), "-o", str(tmp_path / "x.json")]) == 2
