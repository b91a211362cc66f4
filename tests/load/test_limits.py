"""Numbers that size work are checked against their limits before anything is allocated: a
value beyond is a declared error (or a left-out line) naming file, line and limit."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.analyze.model.spec import Layout, Workload
from toolkit.cli.main import main
from toolkit.errors import ToolkitError
from toolkit.load.bench.results import load_bench
from toolkit.load.damage import input_damage
from toolkit.load.limits import LIMITS
from toolkit.load.phase_marks import load_phase_marks, phase_file_problems
from toolkit.load.run import load_run

RUN = TEST_DATA / "diagnose" / "pp8-not-applied"
HOSTILE = [LIMITS["concurrency"].most + 1, 10**7, 2**61, 2**63 - 1]


def _phase(concurrency: int, phase: int = 0) -> str:
    return json.dumps(
        {
            "phase": phase,
            "concurrency": concurrency,
            "num_prompts": 64,
            "start": "2026-05-01T10:07:00.000",
            "end": "2026-05-01T10:07:40.000",
            "exit_code": 0,
            "results": 1,
        }
    )


@pytest.mark.parametrize("concurrency", HOSTILE[:3])
def test_a_phase_beyond_the_concurrency_limit_is_left_out_and_named(
    tmp_path: Path, concurrency: int
) -> None:
    path = tmp_path / "phases.jsonl"
    path.write_text(_phase(8) + "\n" + _phase(concurrency, 1) + "\n")
    assert load_phase_marks([path])["concurrency"].to_list() == [8]
    [(file, line, reason)] = phase_file_problems([path])
    assert (Path(file).name, line) == ("phases.jsonl", 2)
    assert f"{LIMITS['concurrency'].most:,}" in reason


def test_diagnose_with_a_hostile_phase_runs_on_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = Path(shutil.copytree(RUN, tmp_path / "run"))
    (run / "phases.jsonl").write_text(_phase(2**61) + "\n")
    assert main(["diagnose", "-q", "--json", str(run)]) == 1  # the line left out is damage
    out = capsys.readouterr().out
    assert "phases.jsonl:1: concurrency" in out and "beyond the limit" in out


@pytest.mark.parametrize("concurrency", HOSTILE[:3])  # 2**63 - 1 reads as null, as any past int64
def test_a_result_beyond_the_limit_is_left_out_and_named(tmp_path: Path, concurrency: int) -> None:
    run = Path(shutil.copytree(RUN, tmp_path / "run"))
    good = json.loads((run / "bench.jsonl").read_text())
    bad = {**good, "max_concurrency": concurrency}
    (run / "bench.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    loaded = load_run(run, cache=False)
    assert loaded.bench.runs["max_concurrency"].to_list() == [good["max_concurrency"]]
    [row] = input_damage(loaded)
    assert re.match(r"bench\.jsonl:2: (max_)?concurrency: concurrency ", row["detail"])
    assert f"{LIMITS['concurrency'].most:,}" in row["detail"]


def test_results_alone_beyond_the_limit_are_named(tmp_path: Path) -> None:
    path = tmp_path / "bench.jsonl"
    good = json.loads((RUN / "bench.jsonl").read_text())
    path.write_text(json.dumps({**good, "max_concurrency": 10**7}) + "\n")
    with pytest.raises(ToolkitError, match="no benchmark results"):
        load_bench(path)


@pytest.mark.parametrize("value", HOSTILE)
def test_the_replay_refuses_a_workload_beyond_its_limits(value: int) -> None:
    with pytest.raises(ToolkitError, match="beyond the limit"):
        Workload(value, 1000, 100)
    with pytest.raises(ToolkitError, match="beyond the limit"):
        Layout(pp=8, pp_async_batch_depth=value)


def test_scaling_refuses_a_concurrency_argument_beyond_the_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = RUN / "bench.jsonl"
    assert main(["scaling", str(path), "--concurrency", f"bench.jsonl={10**7}"]) == 2
    assert "beyond the limit" in capsys.readouterr().err
    assert main(["scaling", str(path), "--concurrency", "bench.jsonl=" + "9" * 5000]) == 2
