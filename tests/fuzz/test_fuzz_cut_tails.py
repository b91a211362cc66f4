"""A JSONL file whose writer was killed mid-line, or with one damaged line in its middle: every
other line is read and the damaged one is named with its line, for every JSONL family ppscope
reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget
from hypothesis import given
from hypothesis import strategies as st

from toolkit.load.bench.results import load_bench
from toolkit.load.damage import CUT_LINE, collecting
from toolkit.load.phase_marks import load_phase_marks, phase_file_problems
from toolkit.load.prometheus import load_metrics
from toolkit.load.server_info import load_server_info

pytestmark = pytest.mark.fuzz


def _server_info() -> str:
    calls = [
        {"ts": f"2026-05-01T10:0{i}:00.000", "phase": i, "when": "after",
         "endpoint": "/server_info", "info": {"tp_size": 1, "pp_size": 8}}
        for i in range(4)
    ]  # fmt: skip
    return "".join(json.dumps(c) + "\n" for c in calls)


def _phases() -> str:
    rows = [
        {"phase": i, "concurrency": 2**i, "num_prompts": 2**i, "start": f"2026-05-01T10:0{i}:00",
         "end": f"2026-05-01T10:0{i}:30", "exit_code": 0, "results": 1}
        for i in range(4)
    ]  # fmt: skip
    return "".join(json.dumps(r) + "\n" for r in rows)


FAMILIES = {
    "bench.jsonl": (TEST_DATA / "diagnose" / "tp8-decline" / "bench.jsonl").read_text(),
    "profile_export.jsonl": (TEST_DATA / "bench/aiperf/flat/profile_export.jsonl").read_text(),
    "metrics.jsonl": (TEST_DATA / "prometheus" / "metrics.jsonl").read_text(),
    "server_info.jsonl": _server_info(),
    "phases.jsonl": _phases(),
}


def _read(path: Path) -> tuple[int, list[tuple[int | None, str]]]:
    """(records read, (line, reason) of the damage said) of one JSONL file."""
    name = path.name
    if name == "phases.jsonl":
        said = [(n, why) for _f, n, why in phase_file_problems([path])]
        return load_phase_marks([path]).height, said
    with collecting() as found:
        if name == "metrics.jsonl":
            read = load_metrics([path]).scrapes
        elif name == "server_info.jsonl":
            read = load_server_info([path])["lineno"].n_unique()
        else:  # results carry their own damage
            results = load_bench(path)
            read = results.requests.height if "export" in name else results.runs.height
            found = results.damaged
    return read, [(getattr(e, "lineno", None), getattr(e, "reason", str(e))) for e in found]


@budget(20)
@given(name=st.sampled_from(sorted(FAMILIES)), data=st.data())
def test_a_cut_last_line_keeps_the_lines_before_it(
    tmp_path_factory: pytest.TempPathFactory, name: str, data: st.DataObject
) -> None:
    text = FAMILIES[name]
    lines = text.splitlines()
    last = lines[-1]
    keep = data.draw(st.integers(1, len(last) - 1), label="characters kept of the last line")
    path = tmp_path_factory.mktemp("cut") / name
    path.write_text("\n".join([*lines[:-1], last[:keep]]))
    whole = tmp_path_factory.mktemp("whole") / name
    whole.write_text("\n".join(lines[:-1]) + "\n")
    read, said = _read(path)
    assert read == _read(whole)[0] > 0
    lineno = len(lines)
    if name == "phases.jsonl":
        assert [n for n, _ in said] == [lineno]
    else:
        assert said == [(lineno, CUT_LINE)]


CORRUPTIONS = ("cut", "garbage", "list", "surrogate key", "surrogate value")


def _corrupt(line: str, how: str, keep: int) -> str:
    """``line`` damaged one way a file is met damaged: cut short (a torn write), text that is
    no JSON, JSON that is no object, or a lone surrogate escape in its first key or its first
    text value."""
    if how == "cut":
        return line[:keep]
    if how == "garbage":
        return "\x00 not a record \x7f"
    if how == "list":
        return f"[{line}]"
    if how == "surrogate key":
        return line.replace('"', '"\\ud800', 1)
    assert ': "' in line
    return line.replace(': "', ': "\\ud800', 1)


@budget(20)
@given(name=st.sampled_from(sorted(FAMILIES)), how=st.sampled_from(CORRUPTIONS), data=st.data())
def test_a_bad_middle_line_is_named_and_every_other_record_read(
    tmp_path_factory: pytest.TempPathFactory, name: str, how: str, data: st.DataObject
) -> None:
    lines = FAMILIES[name].splitlines()
    index = data.draw(st.integers(1, len(lines) - 2), label="line damaged (0-based)")
    keep = data.draw(st.integers(1, len(lines[index]) - 1), label="characters kept if cut")
    path = tmp_path_factory.mktemp("bad") / name
    path.write_text(
        "\n".join([*lines[:index], _corrupt(lines[index], how, keep), *lines[index + 1 :]]) + "\n"
    )
    rest = tmp_path_factory.mktemp("rest") / name
    rest.write_text("\n".join([*lines[:index], *lines[index + 1 :]]) + "\n")
    read, said = _read(path)
    assert read == _read(rest)[0] > 0
    assert [n for n, _ in said] == [index + 1]
    if name == "bench.jsonl":  # every other run, by its own line
        runs = load_bench(path).runs["lineno"].to_list()
        assert runs == [n for n in range(1, len(lines) + 1) if n != index + 1]
