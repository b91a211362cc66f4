"""A run directory's server request records: files of their own and the log's lines."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import TEST_DATA

from toolkit.load.run import load_run

DATA = TEST_DATA / "requests"


def test_run_joins_request_files_and_log_lines(tmp_path: Path) -> None:
    shutil.copy(DATA / "server-request-lines.log", tmp_path / "server.log")
    (tmp_path / "metrics").mkdir()
    shutil.copy(DATA / "sglang-request-metrics-20251120_14.log", tmp_path / "metrics")
    run = load_run(tmp_path, cache=False)
    table = run.server_requests
    assert table is not None
    assert table.height == 8 + 5
    assert set(table["form"]) == {"time-stats", "finish", "log-json", "export"}


def test_run_without_request_records_has_none(tmp_path: Path) -> None:
    shutil.copy(TEST_DATA / "requests" / "gpu-node-3_0.log", tmp_path / "events.log")
    assert load_run(tmp_path, cache=False).server_requests is not None
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing here\n")
    assert load_run(empty, cache=False).server_requests is None
