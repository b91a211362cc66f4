"""Checks that lack an input are listed as skipped, never reported as clear."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import SAMPLE

from toolkit.cli.main import main
from toolkit.diagnose import FINDING_IDS, skipped_checks
from toolkit.diagnose.inputs import INPUTS, NEEDS
from toolkit.run_analysis import RunAnalysis


def test_every_check_says_what_it_reads() -> None:
    assert set(NEEDS) == set(FINDING_IDS)
    assert {name for names in NEEDS.values() for name in names} <= set(INPUTS)


def test_a_log_alone_skips_the_checks_that_need_more(tmp_path: Path) -> None:
    shutil.copy(SAMPLE / "pp8" / "server.log", tmp_path / "server.log")
    rows = skipped_checks([RunAnalysis(tmp_path)])
    missing = {r["check"]: r["missing"] for r in rows}
    assert missing == {
        "config-not-applied": "launch command",
        "gpu-idle-bubbles": "GPU trace",
        "scaling-collapse": "benchmark results",
        "unexplained-slowdown": "benchmark results",
    }
    assert all(r["supply"] for r in rows)


def test_a_full_run_skips_nothing() -> None:
    assert skipped_checks([RunAnalysis(SAMPLE / "pp8")]) == []


def test_diagnose_lists_skipped_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(SAMPLE / "pp8" / "server.log", tmp_path / "server.log")
    assert main(["diagnose", "--json", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["check"] for s in doc["skipped"]} >= {"gpu-idle-bubbles", "scaling-collapse"}
    assert main(["diagnose", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "skipped 4 check(s) for lack of input" in text
    assert "gpu-idle-bubbles: no GPU trace; record `nvidia-smi" in text
