"""Damaged inputs are used as far as they are readable, named with ``path:line``; commands exit 1
("some input failed, the rest were used") and never advise adding what is there."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.diagnose.inputs import INPUTS
from toolkit.errors import ParseError
from toolkit.load.bench.results import load_bench
from toolkit.load.damage import CUT_LINE, SHOWN, collecting, damage_rows, damaged, input_damage
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

RUN = TEST_DATA / "diagnose" / "tp8-decline"  # a log and three benchmark results


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return Path(shutil.copytree(RUN, tmp_path / "run"))


def _cut(path: Path, keep: int = 40) -> int:
    """Cut the file's last line ``keep`` characters in, as a killed writer leaves it; its
    line number."""
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:-1], lines[-1][:keep]]))
    return len(lines)


def _diagnose(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["diagnose", "-q", str(run)])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_cut_last_bench_line_keeps_the_lines_before_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = load_run(RUN, cache=False).bench.runs.height
    line = _cut(run / "bench.jsonl")
    loaded = load_run(run, cache=False)
    assert loaded.bench.runs.height == whole - 1
    code, out, err = _diagnose(run, capsys)
    assert code == 1
    assert "some input failed, the rest were used" in err
    assert f"bench.jsonl:{line}: {CUT_LINE}" in err
    assert "add the `sglang.bench_serving" not in out


def test_a_broken_first_line_keeps_the_lines_after_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = run / "bench.jsonl"
    first = bench.read_text().splitlines()[0]
    bench.write_text(first[:-20] + "\n" + first + "\n")  # line 1 broken, line 2 whole
    assert load_run(run, cache=False).bench.runs["lineno"].to_list() == [2]
    code, out, err = _diagnose(run, capsys)
    assert code == 1 and "bench.jsonl:1: not valid JSON" in err
    assert "add the `sglang.bench_serving" not in out
    assert "could not be read" not in out


def test_no_readable_line_says_the_results_could_not_be_read(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = run / "bench.jsonl"
    lines = bench.read_text().splitlines()
    bench.write_text("".join(line[:-20] + "\n" for line in lines))  # every line broken
    assert load_run(run, cache=False).bench is None
    code, out, err = _diagnose(run, capsys)
    assert code == 1 and "bench.jsonl:1: not valid JSON" in err
    assert "add the `sglang.bench_serving" not in out
    assert "could not be read" in out


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda line: line[: len(line) // 2], "not valid JSON"),
        (lambda line: line.replace('"sglang-oai"', '"sglang\\ud800"'), "lone surrogate"),
        (lambda line: "[" + line + "]", "expected one JSON object per line"),
        (lambda line: line.replace("{", '{"n": 1' + "0" * 30 + ", ", 1), "out of range"),
    ],
)
def test_a_bad_middle_bench_line_is_named_and_the_others_used(
    run: Path, capsys: pytest.CaptureFixture[str], change, reason: str
) -> None:
    bench = run / "bench.jsonl"
    lines = bench.read_text().splitlines()
    whole = [json.loads(line)["max_concurrency"] for line in lines]
    bad = change(lines[1])
    assert bad != lines[1]
    bench.write_text("\n".join([lines[0], bad, *lines[2:]]) + "\n")
    loaded = load_run(run, cache=False)
    assert loaded.bench.runs["max_concurrency"].to_list() == [whole[0], *whole[2:]]
    [row] = input_damage(loaded)
    assert (row["input"], row["files"]) == ("damaged benchmark results", "bench.jsonl")
    assert row["detail"].startswith("bench.jsonl:2: ") and reason in row["detail"]
    code, out, err = _diagnose(run, capsys)
    assert code == 1 and "some input failed, the rest were used" in err
    assert "bench.jsonl:2: " in err
    assert "add the `sglang.bench_serving" not in out
    assert "Inputs read only in part: benchmark results" in out


def test_strict_parse_raises_the_first_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench.jsonl"
    lines = (RUN / "bench.jsonl").read_text().splitlines()
    path.write_text("\n".join([lines[0], "{", *lines[1:]]) + "\n")
    assert main(["parse", "-q", str(path)]) == 1  # read past, named
    assert "damaged, line 2: not valid JSON" in capsys.readouterr().out
    assert main(["parse", "-q", "--strict", str(path)]) == 2
    assert "bench.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_bad_middle_metrics_lines_are_named(run: Path) -> None:
    path = run / "metrics.jsonl"
    lines = (TEST_DATA / "prometheus" / "metrics.jsonl").read_text().splitlines()
    lines[2] = lines[2][:50]
    lines[4] = '{"ts": "2026-05-01T10:05:30", "text": "x\\ud800"}'
    path.write_text("\n".join(lines) + "\n")
    loaded = load_run(run, cache=False)
    assert loaded.metrics.scrapes == len(lines) - 2
    [row] = input_damage(loaded)
    assert row["input"] == "damaged metrics"
    assert row["detail"].startswith("metrics.jsonl:3: not a JSON object")
    assert "; metrics.jsonl:5: a lone surrogate escape" in row["detail"]


def test_a_damaged_file_names_its_first_places_and_counts_the_rest() -> None:
    errors = [ParseError("run/bench.jsonl", n, "not valid JSON") for n in range(2, 12)]
    [row] = damage_rows(list(errors), "benchmark results")
    assert row["detail"].count("bench.jsonl:") == SHOWN
    assert row["detail"].endswith(f"bench.jsonl:{SHOWN + 1}: not valid JSON (and 5 more)")


def test_a_bad_line_in_an_extra_export_keeps_the_results_beside_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (TEST_DATA / "bench" / "aiperf" / "flat" / "profile_export.jsonl").read_text()
    lines = lines.splitlines()
    lines[3] = lines[3][: len(lines[3]) // 2]
    (run / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    assert load_run(run, cache=False).bench is not None
    code, out, err = _diagnose(run, capsys)
    assert code == 1 and "profile_export.jsonl:4" in err
    assert "add the `sglang.bench_serving" not in out


def test_an_unreadable_metrics_file_keeps_the_others(run: Path) -> None:
    shutil.copy(TEST_DATA / "prometheus" / "metrics.jsonl", run / "metrics.jsonl")
    good = load_run(run, cache=False).metrics.samples.height
    text = (TEST_DATA / "prometheus" / "query_range.json").read_text()
    (run / "query_range.json").write_text(text[: len(text) // 2])
    loaded = load_run(run, cache=False)
    assert loaded.metrics.samples.height == good
    rows = input_damage(loaded)
    assert [r["files"] for r in rows] == ["query_range.json"]


def test_a_cut_last_server_info_line_does_not_refuse_the_run(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {"ts": "2026-05-01T10:05:30.000", "phase": None, "when": "start",
            "endpoint": "/server_info", "info": {"tp_size": 8, "pp_size": 1}}  # fmt: skip
    text = json.dumps(call) + "\n" + json.dumps({**call, "when": "end"})
    (run / "server_info.jsonl").write_text(text[:-25])
    assert load_run(run, cache=False).server_info["lineno"].unique().to_list() == [1]
    code, _out, err = _diagnose(run, capsys)
    assert code == 1 and f"server_info.jsonl:2: {CUT_LINE}" in err


def test_outside_a_collection_damage_is_raised() -> None:
    error = ParseError("x.jsonl", 3, CUT_LINE)
    with collecting() as found:
        damaged(error)
    assert found == [error]
    with pytest.raises(ParseError):
        damaged(error)


def test_results_loaded_alone_carry_their_cut_line(tmp_path: Path) -> None:
    path = tmp_path / "bench.jsonl"
    shutil.copy(RUN / "bench.jsonl", path)
    line = _cut(path)
    results = load_bench(path)
    assert [(e.lineno, e.reason) for e in results.damaged] == [(line, CUT_LINE)]


def test_a_cut_last_metrics_line_keeps_the_scrapes_before_it(run: Path) -> None:
    path = run / "metrics.jsonl"
    shutil.copy(TEST_DATA / "prometheus" / "metrics.jsonl", path)
    line = _cut(path, keep=300)
    loaded = load_run(run, cache=False)
    assert loaded.metrics.scrapes == line - 1
    details = [r["detail"] for r in input_damage(loaded)]
    assert details == [f"metrics.jsonl:{line}: {CUT_LINE}"]


def test_parse_names_a_cut_line_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bench.jsonl"
    shutil.copy(RUN / "bench.jsonl", path)
    line = _cut(path)
    assert main(["parse", "-q", str(path)]) == 1
    assert f"damaged, line {line}: {CUT_LINE}" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["diff", "model", "timeline"])
def test_every_command_on_runs_exits_1_on_damage(
    run: Path, tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = _cut(run / "bench.jsonl")
    argv = {
        "diff": ["diff", "-q", str(run), str(run)],
        "model": ["model", "-q", str(run)],
        "timeline": ["timeline", "-q", str(run), "-o", str(tmp_path / "t.json")],
    }[command]
    assert main(argv) == 1
    assert f"bench.jsonl:{line}: {CUT_LINE}" in capsys.readouterr().err


def test_a_bad_server_info_line_keeps_the_other_calls(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {"ts": "2026-05-01T10:05:30.000", "phase": None, "when": "start",
            "endpoint": "/server_info", "info": {"tp_size": 8, "pp_size": 1}}  # fmt: skip
    lines = [json.dumps(call), '{"ts": "2026-05-01T10:06:00", "info": 3}', json.dumps(call)]
    (run / "server_info.jsonl").write_text("\n".join(lines) + "\n")
    assert load_run(run, cache=False).server_info["lineno"].unique().sort().to_list() == [1, 3]
    code, _out, err = _diagnose(run, capsys)
    assert code == 1 and "server_info.jsonl:2: not a server_info call" in err


def test_a_lone_surrogate_in_a_server_info_call_is_named(run: Path) -> None:
    call = {"ts": "2026-05-01T10:05:30.000", "phase": None, "when": "start",
            "endpoint": "/server_info", "info": {"tp_size": 8, "pp_size": 1}}  # fmt: skip
    bad = json.dumps({**call, "info": {"tp_size": 8, "model_path": "m"}}).replace(
        "model", "\\udc00"
    )
    (run / "server_info.jsonl").write_text("\n".join([json.dumps(call), bad, json.dumps(call)]))
    loaded = load_run(run, cache=False)
    assert loaded.server_info["lineno"].unique().sort().to_list() == [1, 3]
    [row] = input_damage(loaded)
    assert row["detail"].startswith("server_info.jsonl:2: a lone surrogate escape (\\udc00)")


def test_a_cut_last_phase_line_is_named_and_exits_1(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"phase": 0, "concurrency": 8, "num_prompts": 8, "start": "2026-05-01T10:07:00",
           "end": "2026-05-01T10:07:30", "exit_code": 0, "results": 1}  # fmt: skip
    text = json.dumps(row) + "\n" + json.dumps({**row, "phase": 1})
    (run / "phases.jsonl").write_text(text[:-30])
    code, _out, err = _diagnose(run, capsys)
    assert code == 1 and "phases.jsonl:2: not a JSON object" in err


def _calls() -> str:
    call = {"ts": "2026-05-01T10:05:30.000", "phase": None, "when": "start",
            "endpoint": "/server_info", "info": {"tp_size": 8, "pp_size": 1}}  # fmt: skip
    return "".join(json.dumps({**call, "phase": i}) + "\n" for i in range(3))


def _phase_rows() -> str:
    row = {"phase": 0, "concurrency": 8, "num_prompts": 8, "start": "2026-05-01T10:07:00",
           "end": "2026-05-01T10:07:30", "exit_code": 0, "results": 1}  # fmt: skip
    return "".join(json.dumps({**row, "phase": i}) + "\n" for i in range(3))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("bench.jsonl", (RUN / "bench.jsonl").read_text()),
        (
            "profile_export.jsonl",
            (TEST_DATA / "bench/aiperf/flat/profile_export.jsonl").read_text(),
        ),
        ("metrics.jsonl", (TEST_DATA / "prometheus" / "metrics.jsonl").read_text()),
        ("server_info.jsonl", _calls()),
        ("phases.jsonl", _phase_rows()),
    ],
)
def test_parse_reads_around_a_bad_middle_line_and_strict_stops_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    lines = text.splitlines()
    lines[1] = lines[1][: len(lines[1]) // 2]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    assert main(["parse", "-q", str(path)]) == 1
    out = capsys.readouterr().out
    assert "damaged, line 2: " in out or "line 2 left out: " in out
    assert main(["parse", "-q", "--strict", str(path)]) == 2
    assert f"{name}:2: " in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("metrics.jsonl", (TEST_DATA / "prometheus" / "metrics.jsonl").read_text()),
        ("server_info.jsonl", _calls()),
        ("phases.jsonl", _phase_rows()),
    ],
)
def test_a_damaged_first_line_does_not_hide_the_file(
    run: Path, capsys: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    # The file is still recognized by the records after its first line, which is named.
    (run / name).write_text("{cut\n" + text.split("\n", 1)[1])
    code, _out, err = _diagnose(run, capsys)
    assert code == 1 and f"{name}:1: " in err


def test_unreadable_server_info_is_not_advised_to_be_recorded(run: Path) -> None:
    call = {"ts": "2026-05-01T10:05:30.000", "endpoint": "/server_info", "info": 3}
    (run / "server_info.jsonl").write_text(json.dumps(call) + "\n" + json.dumps(call) + "\n")
    ctx = RunAnalysis(run)
    assert ctx.run.server_info.height == 0
    why = INPUTS["launch settings"].why(ctx)
    assert why.startswith("the run holds server info that could not be read")
    assert "server_info.jsonl:1" in why
