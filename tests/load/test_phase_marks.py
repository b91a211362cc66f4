"""Phase files (``phases.jsonl``): recognized by content, read on the log's clock."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from toolkit.errors import ParseError
from toolkit.load.phase_marks import PHASE_FORMAT, load_phase_marks, phase_file_problems
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff
from toolkit.schema.bench import PHASE_MARKS


def _phase(i: int, c: int, start: str, end: str, **more: object) -> str:
    record = {"phase": i, "concurrency": c, "num_prompts": 4 * c, "start": start, "end": end}
    record |= {"exit_code": 0, "results": 1, "command": "python3 -m sglang.bench_serving"}
    return json.dumps(record | more) + "\n"


@pytest.fixture
def phases(tmp_path: Path) -> Path:
    path = tmp_path / "phases.jsonl"
    path.write_text(
        _phase(1, 8, "2025-05-25T21:41:00.500", "2025-05-25T21:42:00.000")
        + _phase(0, 1, "2025-05-25T21:40:00.000", "2025-05-25T21:40:50.250")
        + _phase(2, 32, "2025-05-25T21:42:05.000", "2025-05-25T21:42:07.000", exit_code=None,
                 interrupted=True)
    )  # fmt: skip
    return path


def test_recognized_by_content(phases: Path, tmp_path: Path) -> None:
    renamed = phases.rename(tmp_path / "times.log")
    assert sniff(renamed) == PHASE_FORMAT


def test_rows_in_time_order_on_the_logs_clock(phases: Path) -> None:
    marks = load_phase_marks([phases], clock_offset_s=-3600.0)
    assert marks.schema == PHASE_MARKS
    assert marks["concurrency"].to_list() == [1, 8, 32]
    assert marks["start"][0] == datetime(2025, 5, 25, 20, 40, 0)
    assert marks["end"][1] == datetime(2025, 5, 25, 20, 42, 0)
    assert marks["interrupted"].to_list() == [False, False, True]
    assert marks["exit_code"].to_list() == [0, 0, None]
    assert marks["lineno"].to_list() == [2, 1, 3]


def test_a_broken_line_is_left_out_or_raised_in_strict_mode(phases: Path) -> None:
    with phases.open("a") as f:
        f.write('{"phase": 3, "concurrency": 64, "start": "2025-05-25T21:43:00", "en')
    assert load_phase_marks([phases]).height == 3
    assert phase_file_problems([phases]) == [(str(phases), 4, "not a JSON object")]
    with pytest.raises(ParseError, match=r"phases.jsonl:4: not a JSON object"):
        load_phase_marks([phases], strict=True)


@pytest.mark.parametrize(
    ("start", "end"),
    [
        ("2025-05-25T21:40:10", "2025-05-25T21:40:00"),  # ends before it starts
        ("2025-05-25T21:40:00Z", "2025-05-25T21:40:10Z"),  # not local time
        ("yesterday", "2025-05-25T21:40:10"),
    ],
)
def test_times_must_be_local_and_in_order(tmp_path: Path, start: str, end: str) -> None:
    path = tmp_path / "phases.jsonl"
    path.write_text(_phase(0, 1, start, end))
    with pytest.raises(ParseError, match="start and end must be local times"):
        load_phase_marks([path], strict=True)


def test_a_run_shifts_its_marks_by_the_clock_offset(phases: Path, tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text("clock_offset_s = 7200.0\n")
    marks = load_run(tmp_path).phase_marks
    assert marks is not None
    assert marks["start"][0] == datetime(2025, 5, 25, 23, 40, 0)


def test_a_run_without_a_phase_file_has_no_marks(tmp_path: Path) -> None:
    assert load_run(tmp_path).phase_marks is None


def test_a_run_says_which_phase_lines_it_left_out(phases: Path) -> None:
    with phases.open("a") as f:
        f.write("not json\n")
    (entry,) = [m for m in load_run(phases.parent).mismatches if m["input"] == "phase file"]
    assert (
        entry["files"] == "phases.jsonl" and "phases.jsonl:4: not a JSON object" in entry["detail"]
    )
