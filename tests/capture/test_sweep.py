"""Phases of the sweep: their commands, and their records in ``phases.jsonl``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from toolkit.capture.processes import Children
from toolkit.capture.sweep import Phase, bench_argv, default_num_prompts, run_phase
from toolkit.errors import CaptureError
from toolkit.load.phase_marks import load_phase_marks


def test_the_default_phase_runs_bench_serving(tmp_path: Path) -> None:
    argv = bench_argv(
        None,
        concurrency=32,
        num_prompts=128,
        url="http://127.0.0.1:30000",
        run_dir=tmp_path,
        extra="--random-input-len 1024 --random-output-len 256",
    )
    assert argv[:3] == ["python3", "-m", "sglang.bench_serving"]
    flags = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert flags["--backend"] == "sglang"
    assert flags["--base-url"] == "http://127.0.0.1:30000"
    assert flags["--dataset-name"] == "random"
    assert flags["--max-concurrency"] == "32" and flags["--num-prompts"] == "128"
    assert flags["--output-file"] == str(tmp_path / "bench.jsonl")
    assert flags["--random-input-len"] == "1024"
    assert default_num_prompts(1) == 16 and default_num_prompts(64) == 256


def test_a_template_is_filled_in_per_argument(tmp_path: Path) -> None:
    argv = bench_argv(
        "bench --c {concurrency} --label 'run {concurrency}' --dir {run_dir}",
        concurrency=8,
        num_prompts=32,
        url="http://h:1",
        run_dir=tmp_path,
    )
    assert argv == ["bench", "--c", "8", "--label", "run 8", "--dir", str(tmp_path)]


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("bench --c {conc}", r"unknown field \{conc\}"),
        ("bench 'unclosed", "No closing quotation"),
        ("bench {", "write a brace as"),
        ("", "--bench-cmd is empty"),
    ],
)
def test_a_bad_template_is_refused(tmp_path: Path, template: str, message: str) -> None:
    with pytest.raises(CaptureError, match=message):
        bench_argv(template, concurrency=1, num_prompts=1, url="u", run_dir=tmp_path)


def test_a_phase_is_recorded_with_its_times_and_results(tmp_path: Path) -> None:
    append = (
        "import sys; open(sys.argv[1], 'a').write('{\"max_concurrency\": 4}\\n'); "
        "sys.exit(int(sys.argv[2]))"
    )
    bench = str(tmp_path / "bench.jsonl")
    children = Children()
    ok = run_phase(Phase(0, 4, 16, [sys.executable, "-c", append, bench, "0"]), tmp_path, children)
    failed = run_phase(Phase(1, 8, 32, [sys.executable, "-c", "exit(3)"]), tmp_path, children)
    assert (ok.exit_code, ok.results) == (0, 1)
    assert (failed.exit_code, failed.results) == (3, 0)
    records = [json.loads(line) for line in (tmp_path / "phases.jsonl").read_text().splitlines()]
    assert [r["concurrency"] for r in records] == [4, 8]
    assert records[1]["exit_code"] == 3 and "interrupted" not in records[1]
    marks = load_phase_marks([tmp_path / "phases.jsonl"])
    assert marks["results"].to_list() == [1, 0]
    assert marks["start"][0] <= marks["end"][0] <= marks["start"][1]
    assert (tmp_path / ".capture" / "bench-c4.log").exists()
