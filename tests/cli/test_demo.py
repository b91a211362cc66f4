"""The sample works from anywhere, and a folder without inputs is never a healthy report."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
from helpers import SAMPLE

from toolkit.cli.main import main
from toolkit.report.runs import resolve_run_dir
from toolkit.synth import sample_root
from toolkit.synth.sample import sample_root as locate


def test_the_sample_is_found_outside_a_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside the repository the notebooks' ``data/incident/pp8`` still resolves."""
    monkeypatch.chdir(tmp_path)
    assert resolve_run_dir("data/incident/pp8") == sample_root() / "pp8"


def test_written_outside_a_checkout_the_sample_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolkit.synth.sample as module

    monkeypatch.setattr(module, "__file__", str(tmp_path / "site" / "toolkit" / "synth" / "x.py"))
    root = locate(cache=tmp_path / "cache")
    assert root.parent == tmp_path / "cache"
    for name in ("pp8", "tp8"):
        for file in ("server.log", "bench.jsonl", "run.toml"):
            assert filecmp.cmp(root / name / file, SAMPLE / name / file, shallow=False)
    assert locate(cache=tmp_path / "cache") == root  # written once


def test_report_on_an_empty_folder_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "x.html")]) == 2
    assert "no SGLang log, benchmark result or GPU trace" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()
