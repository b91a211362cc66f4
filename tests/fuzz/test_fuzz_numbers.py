"""Hostile numbers in every place a number is read (batch fields, rank tags, journald pids,
timestamps, phase and benchmark concurrencies, prompt counts): a table with the value kept as
text or a line left out and named, or a declared error; never an undeclared exception, and
nothing beyond its limit reaches an analysis that sizes work by it."""

from __future__ import annotations

import json
import re

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load.bench.results import load_bench
from toolkit.load.limits import LIMITS
from toolkit.load.phase_marks import load_phase_marks, phase_file_problems
from toolkit.load.sglang.log import load_sglang_log

pytestmark = pytest.mark.fuzz

LOG = (TEST_DATA / "diagnose" / "pp8-not-applied" / "server.log").read_text().splitlines()
BENCH = json.loads((TEST_DATA / "diagnose" / "pp8-not-applied" / "bench.jsonl").read_text())

numbers = st.one_of(
    st.integers(-(2**80), 2**80),
    st.sampled_from([2**31, 2**61, 2**63 - 1, 2**63, 2**64, 10**7, LIMITS["concurrency"].most + 1]),
    st.integers(20, 400).map(lambda n: 10**n),
)
"""Integers near and past every width a reader may hold them in."""
texts = st.one_of(
    numbers.map(str),
    st.sampled_from(["nan", "inf", "-inf", "1e309", "0x10", "1_000", "٣", "", "-0"]),
)


@budget(15)
@given(value=texts, place=st.sampled_from(("field", "rank", "pid", "year", "ms")))
def test_a_log_with_a_hostile_number(tmp_path_factory: pytest.TempPathFactory, value: str,
                                     place: str) -> None:  # fmt: skip
    lines = list(LOG)
    i = next(n for n, line in enumerate(lines) if "Decode batch" in line)
    if place == "field":
        lines[i] = re.sub(r"#running-req: \d+", f"#running-req: {value}", lines[i])
    elif place == "rank":
        lines[i] = lines[i].replace(" PP0]", f" PP{value}]", 1)
    elif place == "year":
        lines[i] = f"[{value[:8]:0>4}-05-01" + lines[i][len("[2026-05-01") :]
    elif place == "ms":
        lines[i] = lines[i][:20] + f".{value[:6]}" + lines[i][20:]
    else:
        lines = [f"May 01 10:00:00 node python3[{value if n == i else 7}]: {x}"
                 for n, x in enumerate(lines)]  # fmt: skip
    path = tmp_path_factory.mktemp("log") / "server.log"
    path.write_text("\n".join(lines) + "\n")
    log = load_sglang_log(path, cache=False)
    batches = log.batches
    assert batches.height
    assert all(ts is None or 1 <= ts.year <= 9999 for ts in batches["ts"].to_list())
    log.rank_sizes()


@budget(15)
@given(key=st.sampled_from(("concurrency", "num_prompts", "phase")), value=numbers)
def test_a_phase_file_with_a_hostile_number(tmp_path_factory: pytest.TempPathFactory, key: str,
                                            value: int) -> None:  # fmt: skip
    row = {"phase": 0, "concurrency": 8, "num_prompts": 8, "start": "2026-05-01T10:07:00",
           "end": "2026-05-01T10:07:30", "exit_code": 0, "results": 1}  # fmt: skip
    path = tmp_path_factory.mktemp("phases") / "phases.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, key: value}) + "\n")
    table = load_phase_marks([path])
    assert table["concurrency"].max() <= LIMITS["concurrency"].most
    assert table["num_prompts"].max() <= LIMITS["num_prompts"].most
    read = {n for _f, n, _why in phase_file_problems([path])}
    assert table.height + len(read) == 2


@budget(15)
@given(key=st.sampled_from(("max_concurrency", "num_prompts", "completed")), value=numbers)
def test_results_with_a_hostile_number(tmp_path_factory: pytest.TempPathFactory, key: str,
                                       value: int) -> None:  # fmt: skip
    path = tmp_path_factory.mktemp("bench") / "bench.jsonl"
    path.write_text(json.dumps(BENCH) + "\n" + json.dumps({**BENCH, key: value}) + "\n")
    try:
        results = load_bench(path)
    except ToolkitError as e:
        assert "bench.jsonl:2" in str(e)
        return
    runs = results.runs
    assert runs.height + len(results.damaged) == 2
    for column in ("concurrency", "max_concurrency"):
        assert (runs[column].max() or 0) <= LIMITS["concurrency"].most
