"""``ppscope parse`` lists the server's request records of each file."""

from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main

DATA = TEST_DATA / "requests"


def test_parse_request_file_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "sglang-request-metrics-20251120_14.log"
    assert main(["parse", "--json", "--no-cache", str(path)]) == 0
    (f,) = json.loads(capsys.readouterr().out)["files"]
    assert f["format"] == "sglang-requests"
    assert (f["lines"], f["requests"], f["with_ttft"], f["aborted"]) == (6, 5, 4, 1)
    assert f["forms"] == {"export": 5}
    assert f["skipped"] == {"not a complete JSON object (a cut or edited line)": 1}
    assert f["start"].startswith("2025-11-20") and f["end"] > f["start"]


def test_parse_log_lists_its_request_lines(capsys: pytest.CaptureFixture[str]) -> None:
    path = DATA / "server-request-lines.log"
    assert main(["parse", "--json", "--no-cache", str(path)]) == 0
    (f,) = json.loads(capsys.readouterr().out)["files"]
    r = f["requests"]
    assert r["forms"] == {"finish": 3, "log-json": 1, "time-stats": 4}
    assert r["distinct_ids"] == 6 and r["skipped"] == {"arrivals": 2}
    assert f["first_unrecognized"] == []  # request lines are read, not unrecognized
    assert main(["parse", "--no-cache", str(path)]) == 0
    text = capsys.readouterr().out
    assert "requests: 8 finished (finish 3, log-json 1, time-stats 4), 6 ids" in text
