"""``ppscope diagnose`` and ``ppscope diff``: text and JSON as users script against them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.diagnose import SEVERITIES

DIAG = TEST_DATA / "diagnose"


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """Copies of the fixture runs (loading writes a cache next to the inputs)."""
    out = {}
    for name in ("pp8-underfilled", "tp8", "pp8-filled"):
        out[name] = Path(shutil.copytree(DIAG / name, tmp_path / name))
    return out


def test_diagnose_json(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--json", str(runs["tp8"]), str(runs["pp8-underfilled"])]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text)
    assert list(doc) == ["runs", "findings", "skipped"]
    found = doc["findings"]
    assert all(
        list(f)
        == [
            "id",
            "severity",
            "run",
            "title",
            "summary",
            "evidence",
            "remedy",
            "impact",
            "basis",
            "phase",
        ]
        for f in found
    )
    ranks = [SEVERITIES.index(f["severity"]) for f in found]
    assert ranks == sorted(ranks)
    assert (found[0]["id"], found[0]["severity"], found[0]["run"]) == (
        "pp-underfilled-slots",
        "high",
        "PP8",
    )
    assert {f["run"] for f in found} <= {"PP8", "TP8"}
    assert any(f["id"] == "scaling-collapse" for f in found)  # PP8 vs TP8


def test_diagnose_text(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(runs["pp8-underfilled"]), str(runs["pp8-filled"])]) == 0
    out = capsys.readouterr().out
    assert "PP8  (" in out and "1 high" in out
    assert "HIGH   pp-underfilled-slots: ~4 of 16" in out
    assert "evidence:" in out and "remedy: --pp-max-micro-batch-size 4" in out
    assert "INFO   pp-lockstep-logging" in out


def test_diagnose_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_diff_json(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--json", str(runs["tp8"]), str(runs["pp8-underfilled"])]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["changed", "only_a", "only_b", "derived"]
    assert list(doc["changed"])[:3] == ["tp_size", "pp_size", "pp_async_batch_depth"]
    assert doc["changed"]["pp_size"] == [1, 8]
    assert doc["derived"]["pp_loop_size"] == [1, 16]
    assert doc["derived"]["per_slot_cap"] == [2048, 256]


def test_diff_of_a_run_with_itself(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diff", "--json", str(runs["tp8"]), str(runs["tp8"])]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["changed"] == {} and doc["only_a"] == {} and doc["only_b"] == {}
    assert main(["diff", str(runs["tp8"]), str(runs["tp8"])]) == 0
    assert "the two launches have the same ServerArgs" in capsys.readouterr().out


def test_diff_needs_a_launch(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["diff", str(runs["tp8"]), str(empty)]) == 2
    assert "no server launch" in capsys.readouterr().err


def test_a_directory_without_inputs_is_an_error_not_a_healthy_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    assert main(["diagnose", str(tmp_path)]) == 2
    assert "no SGLang log, benchmark result or GPU trace" in capsys.readouterr().err
