"""One secret planted in every input a user has; no command output may hold any of them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.planted import PLANTS, leaks, plant_run

from toolkit.cli.main import main
from toolkit.load.redact import REDACTED
from toolkit.load.run import load_run


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    return plant_run(tmp_path / "planted")


def test_every_plant_is_found_as_a_secret_of_the_run(planted: Path) -> None:
    assert load_run(planted, cache=False).secrets >= set(PLANTS.values())


@pytest.mark.parametrize("form", [[], ["--format", "markdown"], ["--json"]])
def test_diagnose_prints_no_planted_secret(
    planted: Path, form: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    main(["diagnose", "-q", str(planted), *form])
    out, err = capsys.readouterr()
    assert leaks(out + err) == {}
    # the config-not-applied evidence names the api_key flag: its values are shown redacted
    assert "api_key" in out and REDACTED in out
    if form == ["--json"]:
        document = json.loads(out)
        rows = [
            r for f in document["findings"] for r in f["evidence"] if r.get("flag") == "api_key"
        ]
        assert rows and all(r["intended"] == REDACTED == r["effective"] for r in rows)


def test_diagnose_written_to_a_file_holds_no_planted_secret(planted: Path, tmp_path: Path) -> None:
    out = tmp_path / "findings.md"
    main(["diagnose", "-q", str(planted), "--format", "markdown", "-o", str(out)])
    assert leaks(out.read_text()) == {}


def test_the_perfetto_trace_holds_no_planted_secret(planted: Path, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    assert main(["timeline", "-q", str(planted), "-o", str(out)]) == 0
    text = out.read_text()
    json.loads(text)
    assert leaks(text) == {}
