"""A default capture (the log followed from now, no `server_args=` dump) keeps the PP checks:
the layout and limits come from the server's own `/server_info` answer in `server_info.jsonl`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from helpers import TEST_DATA

from toolkit.diagnose import diagnose, skipped_checks
from toolkit.load.run import load_run
from toolkit.load.sglang.server_args import parse_server_args
from toolkit.run_analysis import RunAnalysis

CASE = TEST_DATA / "diagnose" / "pp8-not-applied"  # PP8 whose slots run underfilled


def _default_capture(into: Path, *, server_info: bool) -> Path:
    """The case as `ppscope capture` without `--from-start` records it: the log from the first
    batch line on, a run.toml with no command, and (when asked) the `/server_info` calls."""
    lines = (CASE / "server.log").read_text().splitlines(keepends=True)
    dump = next(line for line in lines if "server_args=" in line)
    start = next(i for i, line in enumerate(lines) if "Prefill batch" in line)
    into.mkdir()
    (into / "server.log").write_text("".join(lines[start:]))
    shutil.copy(CASE / "bench.jsonl", into)
    (into / "run.toml").write_text('label = "PP8"\nsynthetic = true\n')
    if server_info:
        args = parse_server_args(dump.split("server_args=", 1)[1]).args
        states = [{"max_running_requests": 2048, "last_gen_throughput": 0.0}]
        call = {
            "ts": "2026-05-01T10:06:30.000",
            "phase": 0,
            "when": "before",
            "endpoint": "/server_info",
            "info": {**args, "version": "0.5.23", "internal_states": states},
        }
        (into / "server_info.jsonl").write_text(json.dumps(call) + "\n")
    return into


def test_layout_and_limits_come_from_server_info(tmp_path: Path) -> None:
    run = load_run(_default_capture(tmp_path / "pp8", server_info=True), cache=False)
    assert run.log is not None and not any(la.server_args for la in run.log.launches)
    layout = run.layout
    assert layout.layout_from == "/server_info"
    assert (layout.pp, layout.tp, layout.pp_async_batch_depth) == (8, 1, 8)
    assert layout.max_running_requests == 2048  # the value the scheduler runs with
    assert layout.chunked_prefill_size == 8192
    ctx = RunAnalysis(run)
    ids = {f.id for f in diagnose([ctx])}
    assert "pp-underfilled-slots" in ids
    assert not [s for s in skipped_checks([ctx]) if s["missing"] == "launch settings"]


def test_without_server_info_the_hint_names_from_start(tmp_path: Path) -> None:
    ctx = RunAnalysis(load_run(_default_capture(tmp_path / "pp8", server_info=False), cache=False))
    assert ctx.run.layout.layout_from != "/server_info"
    diagnose([ctx])
    rows = [s for s in skipped_checks([ctx]) if s["missing"] == "launch settings"]
    assert {r["check"] for r in rows} >= {"pp-empty-async-slots"}
    assert all("--from-start" in r["supply"] and "/server_info" in r["supply"] for r in rows)
