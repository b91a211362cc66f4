"""Results printed without a concurrency cap scale by their mean in flight, or ``--concurrency``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.cli.main import main

BLOCK = """============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    inf
Max request concurrency:                 not set
Successful requests:                     200
Benchmark duration (s):                  100.00
Total input tokens:                      200000
Total generated tokens:                  51200
Request throughput (req/s):              2.00
Input token throughput (tok/s):          2000.00
Output token throughput (tok/s):         {tok:.2f}
Concurrency:                             {conc:.2f}
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   15000.00
==================================================
"""


def _write(path: Path, tok: float, conc: float) -> Path:
    path.write_text(BLOCK.format(tok=tok, conc=conc))
    return path


def test_runs_without_a_cap_take_their_measured_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(tmp_path / "tp8-run1.log", 300.0, 15.6)
    b = _write(tmp_path / "tp8-run2.log", 520.0, 31.8)
    assert main(["scaling", str(a), str(b)]) == 0
    text = capsys.readouterr().out
    assert "concurrency of 2 runs from the mean in flight it measured (no cap set)" in text
    assert main(["scaling", "--json", str(a), str(b)]) == 0
    (points,) = json.loads(capsys.readouterr().out)["layouts"].values()
    assert [p["concurrency"] for p in points] == [16, 32]


def test_the_user_can_give_the_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _write(tmp_path / "tp8-a.log", 300.0, 15.6)
    b = _write(tmp_path / "tp8-b.log", 520.0, 31.8)
    args = ["scaling", "--json", str(a), str(b), "--concurrency", "tp8-a.log=8"]
    assert main(args) == 0
    (points,) = json.loads(capsys.readouterr().out)["layouts"].values()
    assert [p["concurrency"] for p in points] == [8, 32]
    assert main(["scaling", str(a), "--concurrency", "tp8-a.log"]) == 2
    assert "expected FILE=N" in capsys.readouterr().err
