"""Paths in shared reports: relative to the folder that holds the runs unless --full-paths, and
the ``runs`` parameter that names directories with commas."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.report_runs import make_runs

from toolkit.errors import ToolkitError
from toolkit.report.paths import common_root, join_runs, shown_path, split_runs, strip_root
from toolkit.report.provenance import provenance, provenance_html
from toolkit.report.sections import header, load_runs


@pytest.mark.parametrize(
    "names",
    [["a", "b"], ["runs/a,b", "runs/c"], ["[odd]"], ["x", " spaced "], ["é,ü"], ['q"uote,']],
)
def test_runs_round_trip(names: list[str]) -> None:
    assert split_runs(join_runs(names)) == names


def test_plain_runs_stay_plain() -> None:
    assert join_runs([Path("runs/tp8"), "runs/pp8"]) == "runs/tp8,runs/pp8"
    assert split_runs("a, b,,") == ["a", "b"]
    assert split_runs(["a", Path("b")]) == ["a", "b"]
    with pytest.raises(ToolkitError, match="JSON list"):
        split_runs("[not json")
    with pytest.raises(ToolkitError, match="list of directory names"):
        split_runs("[1, 2]")


def test_common_root_keeps_every_run_name(tmp_path: Path) -> None:
    a, b = tmp_path / "x" / "tp8", tmp_path / "x" / "pp8"
    assert common_root([a, b]) == tmp_path / "x"
    assert common_root([a]) == tmp_path / "x"
    assert common_root([a, tmp_path / "y" / "z"]) == tmp_path
    assert shown_path(a / "server.log", tmp_path / "x") == "tp8/server.log"
    assert shown_path(a, tmp_path / "x", full=True) == a.as_posix()
    assert shown_path("/elsewhere/f.log", tmp_path / "x") == "f.log"


def test_strip_root() -> None:
    text = "/home/user/runs/pp8/server.log:12: cut line; see /home/user/runs2/tp8"
    want = "pp8/server.log:12: cut line; see /home/user/runs2/tp8"
    assert strip_root(text, Path("/home/user/runs")) == want
    assert strip_root(text, Path("/")) == text and strip_root(text, None) == text


def test_provenance_is_relative_unless_asked(tmp_path: Path) -> None:
    runs = make_runs(tmp_path / "home" / "user" / "incident")
    record = provenance(runs, {"runs": join_runs(runs), "max_points": 5})
    paths = [f["path"] for f in record["inputs"]]
    assert "tp8/server.log" in paths and "pp8/run.toml" in paths
    assert record["parameters"] == {"runs": "tp8,pp8", "max_points": 5}
    assert str(tmp_path) not in provenance_html(record)
    full = provenance(runs, {"runs": join_runs(runs)}, full_paths=True)
    assert (runs[0] / "server.log").as_posix() in [f["path"] for f in full["inputs"]]
    assert full["parameters"]["runs"] == join_runs(r.as_posix() for r in runs)


def test_header_directory_column(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "home" / "user,with,commas"
    tp8, pp8 = make_runs(root)
    odd = tp8.rename(root / "tp8,eager")
    run_set = load_runs(join_runs([odd, pp8]), progress=False)
    assert run_set.shown_paths == ["tp8,eager", "pp8"]
    html = header(run_set).html()
    assert "tp8,eager" in html and str(tmp_path) not in html
    monkeypatch.setenv("PPSCOPE_FULL_PATHS", "1")
    assert run_set.shown_paths == [os.path.abspath(odd), os.path.abspath(pp8)]
