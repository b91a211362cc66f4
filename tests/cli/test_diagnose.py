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
    for name in ("pp8-underfilled", "tp8", "pp8-filled", "pp8-not-applied"):
        out[name] = Path(shutil.copytree(DIAG / name, tmp_path / name))
    return out


def test_diagnose_json(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", "--json", str(runs["tp8"]), str(runs["pp8-underfilled"])]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    doc = json.loads(text)
    assert list(doc) == ["verdict", "runs", "findings", "skipped"]
    assert doc["verdict"].startswith("TP8 delivers")  # the sentence the report leads with
    found = doc["findings"]
    keys = [
        "id", "severity", "run", "launch", "title", "summary", "evidence", "remedy", "impact",
        "impact_range", "recovers", "basis", "phase", "promise", "caveats",
    ]  # fmt: skip
    assert all(list(f) == keys for f in found)
    ranks = [SEVERITIES.index(f["severity"]) for f in found]
    assert ranks == sorted(ranks)
    packing = next(f for f in found if f["id"] == "pp-underfilled-slots")
    assert packing["run"] == "PP8" and packing["severity"] in ("high", "medium")
    low, high = packing["impact_range"]
    assert low <= packing["impact"] <= high and packing["recovers"].endswith("at 32 requests")
    assert {f["run"] for f in found} <= {"PP8", "TP8"}
    assert any(f["id"] == "scaling-collapse" for f in found)  # PP8 vs TP8


def test_diagnose_text(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(runs["pp8-underfilled"]), str(runs["pp8-filled"])]) == 0
    out = capsys.readouterr().out
    assert "PP8  (" in out and "2 medium" in out
    assert "MEDIUM pp-underfilled-slots: ~4 of 16" in out
    assert "recovers +" in out  # the impact phrase under each sized finding
    assert "evidence:" in out and "remedy: --pp-max-micro-batch-size 4" in out
    assert "INFO   pp-lockstep-logging" in out


def test_diagnose_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagnose", str(tmp_path / "nope")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_diff_json(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--json", str(runs["tp8"]), str(runs["pp8-underfilled"])]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["changed", "only_a", "only_b", "derived", "runtime"]
    assert doc["runtime"] == {"a": [], "b": []}
    assert list(doc["changed"])[:3] == ["tp_size", "pp_size", "pp_async_batch_depth"]
    assert doc["changed"]["pp_size"] == [1, 8]
    assert doc["derived"]["pp_loop_size"] == [1, 16]
    assert doc["derived"]["per_slot_cap"] == [2048, 256]


def test_diff_lists_runtime_changes_with_their_phases(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # pp8-underfilled: the c=1 phase starts 10:06:42, the c=32 phase ends 10:07:35.
    with (runs["pp8-underfilled"] / "server.log").open("a") as f:
        f.write(
            "[2026-05-01 10:06:00 PP0] Config updated via context override: "
            "{'pp_max_micro_batch_size': 4}\n"
        )
    args = [str(runs["tp8"]), str(runs["pp8-underfilled"])]
    assert main(["diff", "--json", *args]) == 0
    (change,) = json.loads(capsys.readouterr().out)["runtime"]["b"]
    assert change["key"] == "pp_max_micro_batch_size" and change["value"] == 4
    assert change["source"].startswith("log line ") and change["phases"] == [0, 1]
    assert main(["diff", *args]) == 0
    text = capsys.readouterr().out
    assert "b: changed at runtime" in text
    assert "10:06:00 pp_max_micro_batch_size=4 set, log line" in text
    assert "in force in phase 0, 1" in text


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


def test_diagnose_markdown_for_an_issue(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["diagnose", "-q", "--format", "markdown", str(runs["pp8-underfilled"])]
    assert main([*argv, str(runs["tp8"])]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## PP8\n") and "\n## TP8\n" in out
    assert "| severity | finding | recovers |\n|---|---|---|\n" in out
    assert "| medium | `pp-underfilled-slots`: ~4 of 16" in out
    assert "### MEDIUM `pp-underfilled-slots`:" in out
    assert "**Remedy:** --pp-max-micro-batch-size 4" in out
    assert "| concurrency | phase | running_est |" in out  # the evidence, by concurrency
    table = out.split("\n\n")[2].splitlines()  # heading, run line, then the findings
    assert len(table) > 3 and all(line.startswith("| ") for line in table[2:])
    assert len({line.count("|") for line in table}) == 1  # every row has the header's cells


@pytest.mark.parametrize(
    ("run", "level", "code"),
    [("pp8-not-applied", "high", 3), ("pp8-underfilled", "medium", 3), ("tp8", "high", 0)],
)
def test_fail_on_sets_exit_code_3(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str], run: str, level: str, code: int
) -> None:
    assert main(["diagnose", "-q", "--json", "--fail-on", level, str(runs[run])]) == code
    assert json.loads(capsys.readouterr().out)["findings"] is not None  # still printed


def test_json_and_markdown_exclude_each_other(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", "--json", "--format", "markdown", str(runs["tp8"])]) == 2
    assert "choose one" in capsys.readouterr().err
