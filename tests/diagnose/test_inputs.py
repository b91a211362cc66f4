"""Checks that lack an input are listed as skipped, never reported as clear."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import SAMPLE

from toolkit.cli.main import main
from toolkit.diagnose import FINDING_IDS, diagnose, skipped_checks
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
        "foreign-gpu-process": "process listing",
        "gpu-idle-bubbles": "GPU trace",
        "scaling-collapse": "benchmark results",
        "unexplained-slowdown": "benchmark results",
    }
    assert all(r["supply"] for r in rows)


def test_a_check_that_found_something_ran(tmp_path: Path) -> None:
    """Skipped is an outcome: a check without the input it needs to clear a run, that found
    nothing; one that reported a finding on other evidence ran."""
    shutil.copy(SAMPLE / "pp8" / "server.log", tmp_path / "server.log")
    ctx = RunAnalysis(tmp_path)
    found = diagnose([ctx])
    listed = {r["check"] for r in skipped_checks([ctx])}
    assert not listed & {f.id for f in found}
    assert "gpu-idle-bubbles" in listed  # no GPU trace, no finding: not clear, skipped
    # the same check reporting a finding (on the log's fwd occupancy, say) is not skipped
    ctx.found = [*found, replace(found[0], id="gpu-idle-bubbles")]
    assert "gpu-idle-bubbles" not in {r["check"] for r in skipped_checks([ctx])}


def test_the_launch_command_stands_in_for_the_dump(tmp_path: Path) -> None:
    """The micro-batch checks need the launch's settings, from the dump or run.toml's command."""
    lines = (SAMPLE / "pp8" / "server.log").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if "server_args=" not in line]
    (tmp_path / "server.log").write_text("\n".join(kept) + "\n", encoding="utf-8")
    bare = {r["check"]: r["missing"] for r in skipped_checks([RunAnalysis(tmp_path)])}
    assert bare["pp-underfilled-slots"] == "launch settings"
    shutil.copy(SAMPLE / "pp8" / "run.toml", tmp_path / "run.toml")
    given = {r["check"] for r in skipped_checks([RunAnalysis(tmp_path)])}
    assert not {"pp-underfilled-slots", "pp-empty-async-slots"} & given


def test_a_full_run_skips_nothing(tmp_path: Path) -> None:
    """The sample records every input a check reads (log, trace, results, process listing):
    nothing is skipped; without its process listing, only the check that reads one is."""
    assert skipped_checks([RunAnalysis(SAMPLE / "pp8")]) == []
    run = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run)
    (run / "compute-apps.csv").unlink()
    rows = skipped_checks([RunAnalysis(run)])
    assert [(r["check"], r["missing"]) for r in rows] == [
        ("foreign-gpu-process", "process listing")
    ]


def test_diagnose_lists_skipped_checks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(SAMPLE / "pp8" / "server.log", tmp_path / "server.log")
    assert main(["diagnose", "--json", str(tmp_path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {s["check"] for s in doc["skipped"]} >= {"gpu-idle-bubbles", "scaling-collapse"}
    assert main(["diagnose", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "skipped 5 check(s) for lack of input" in text
    assert "gpu-idle-bubbles: no GPU trace; record `nvidia-smi" in text


# -- every input removed in turn ------------------------------------------------------------------


def _without_dump(run: Path) -> None:
    log = run / "server.log"
    lines = log.read_text(encoding="utf-8").splitlines()
    log.write_text("\n".join(x for x in lines if "server_args=" not in x) + "\n", encoding="utf-8")


def _without_command(run: Path) -> None:
    toml = run / "run.toml"
    lines = toml.read_text(encoding="utf-8").splitlines()
    toml.write_text("\n".join(x for x in lines if not x.startswith("command")) + "\n")


REMOVALS = {
    "server log": lambda run: (run / "server.log").unlink(),
    "ServerArgs dump": _without_dump,
    "launch command": _without_command,
    "benchmark results": lambda run: (run / "bench.jsonl").unlink(),
    "GPU trace": lambda run: (run / "gpu.csv").unlink(),
    "process listing": lambda run: (run / "compute-apps.csv").unlink(),
}
"""Input → how to take it out of a copy of a complete run directory."""


@pytest.fixture(scope="module")
def complete(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Complete runs: the sample's PP8 and TP8, and a scenario with several injected causes
    (log, results, GPU trace, process listing and run.toml each)."""
    from helpers.scenarios import build

    root = tmp_path_factory.mktemp("complete")
    runs = {name: SAMPLE / name for name in ("pp8", "tp8")}
    several = build("pp8-several-causes", root / "pp8-several-causes")
    shutil.copy(SAMPLE / "pp8" / "compute-apps.csv", several / "compute-apps.csv")
    runs["pp8-several-causes"] = several
    return runs


@pytest.mark.parametrize("name", ["pp8", "tp8", "pp8-several-causes"])
@pytest.mark.parametrize("removed", list(REMOVALS))
def test_a_finding_an_input_carried_reappears_as_a_skip(
    complete: dict[str, Path], tmp_path: Path, name: str, removed: str
) -> None:
    """No silent clears: take one input out of a complete run, and every check whose finding
    goes away with it is listed as skipped, naming an input the run now lacks."""
    before = {f.id for f in diagnose([RunAnalysis(complete[name])])}
    run = tmp_path / name
    shutil.copytree(complete[name], run, ignore=shutil.ignore_patterns(".ppscope-cache"))
    REMOVALS[removed](run)
    ctx = RunAnalysis(run)
    after = {f.id for f in diagnose([ctx])}
    skipped = {r["check"]: r["missing"] for r in skipped_checks([ctx])}
    gone = before - after - {"input-mismatch"}
    unlisted = sorted(gone - set(skipped))
    assert not unlisted, f"{name} without its {removed}: {unlisted} vanished unlisted"
