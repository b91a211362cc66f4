"""Commands in CI: --fail-on says what tripped it, and one bad input among several does not
stop the others."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.cli.runs import PARTLY_FAILED

CASES = TEST_DATA / "diagnose"
NOT_APPLIED = CASES / "pp8-not-applied"  # a flag set at launch that the server did not apply


@pytest.mark.parametrize("severity", ["HIGH", "High", "high"])
def test_fail_on_takes_any_case_and_names_the_findings(
    severity: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["diagnose", "-q", "--fail-on", severity, str(NOT_APPLIED)]) == 3
    out, err = capsys.readouterr()
    tripped = [line.split() for line in err.splitlines() if line.startswith("  ")]
    assert tripped, err
    for words in tripped:
        assert words[0] == "HIGH" and words[1] in out  # the id, as the report prints it
    assert "(run " in err


def test_a_missing_run_among_several_is_reported_and_the_others_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone, empty = tmp_path / "gone", tmp_path / "empty"
    empty.mkdir()
    args = ["diagnose", "-q", str(gone), str(NOT_APPLIED), str(empty)]
    assert main(args) == PARTLY_FAILED
    out, err = capsys.readouterr()
    assert "config-not-applied" in out  # the readable run was diagnosed
    assert f"skipped {gone}: no such file or directory" in err
    assert f"skipped {empty}: no SGLang log" in err
    assert main([*args, "--fail-on", "high"]) == 3  # a tripped check outranks a partial run
    assert main(["diagnose", "-q", str(gone)]) == 2  # nothing to read is bad input


def test_diagnose_prints_a_line_per_step_outside_a_terminal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["diagnose", str(NOT_APPLIED)]) == 0
    steps = capsys.readouterr().err.splitlines()
    assert steps[0] == f"diagnose: [1/3] load {NOT_APPLIED}"
    assert steps[1].startswith("diagnose: [2/3] check ")
    assert steps[2].startswith("diagnose: [3/3] ")


def test_report_covers_the_readable_runs_and_names_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rendered: list[str] = []

    class _Report:
        html = tmp_path / "r.html"

    def fake_render(notebook: str, params: dict[str, str], out: Path, **_: object) -> _Report:
        rendered.append(params["runs"])  # the notebook run itself is tested in tests/report
        return _Report()

    monkeypatch.setattr("toolkit.report.render.render", fake_render)
    gone = tmp_path / "gone"
    out = str(tmp_path / "r.html")
    assert main(["report", "-q", str(gone), str(NOT_APPLIED), "-o", out]) == PARTLY_FAILED
    assert rendered == [NOT_APPLIED.as_posix()]
    assert f"skipped {gone}: no such file or directory" in capsys.readouterr().err
    assert main(["report", "-q", str(gone), "-o", out]) == 2
