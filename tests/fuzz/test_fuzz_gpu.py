"""GPU files from hostile bytes: a trace whose every physical line is a sample line or a skipped
line, or a declared ``ToolkitError``; companion files load or raise one."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fuzz import budget, count_lines, mutated
from helpers.gpu_fixtures import EXPECTED, OTHERS
from helpers.gpu_fixtures import GPU_DATA as DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import (
    load_compute_apps,
    load_gpu_list,
    load_gpu_trace,
    load_topology,
    summarize_gpu_file,
)

pytestmark = pytest.mark.fuzz

TRACES = [(DATA / name).read_bytes() for name in sorted(EXPECTED)]
BAD = [p.read_bytes() for p in sorted((DATA / "bad").iterdir()) if p.is_file()]
COMPANIONS = [(DATA / name).read_bytes() for name in sorted(OTHERS)]
FIELDS = "timestamp,index,utilization.gpu,memory.used,power.draw"


def check_accounting(trace, data: bytes) -> None:
    """Every physical line is in exactly one place, at its own line number."""
    (source,) = trace.sources
    assert source["lines"] == count_lines(data)
    assert source["sample_lines"] + trace.skipped.height == source["lines"]
    skipped = trace.skipped.get_column("lineno").to_list()
    assert len(set(skipped)) == len(skipped)
    assert all(1 <= n <= source["lines"] for n in skipped)
    used = set(trace.samples.get_column("lineno").to_list())
    assert not used & set(skipped)
    lines = data.split(b"\n")
    for n, line in trace.skipped.select("lineno", "line").iter_rows():
        raw = lines[n - 1].removesuffix(b"\r").decode("utf-8", "replace")
        assert line == raw or raw.startswith(line) or line.strip() == raw.strip(), (n, line, raw)


def _read(path: Path, data: bytes, strict: bool) -> None:
    try:
        trace = load_gpu_trace(path, fields=FIELDS, strict=strict)
    except ToolkitError as e:
        assert str(e)
    else:
        check_accounting(trace, data)
    try:
        summarize_gpu_file(path, fields=FIELDS, strict=strict)
    except ToolkitError as e:
        assert str(e)


@budget(60)
@given(data=mutated(TRACES + BAD), strict=st.booleans())
def test_mutated_traces(tmp_path: Path, data: bytes, strict: bool) -> None:
    path = tmp_path / "trace.txt"
    path.write_bytes(data)
    _read(path, data, strict)


@budget(20)
@given(data=mutated(COMPANIONS))
def test_mutated_companions(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "companion.txt"
    path.write_bytes(data)
    for read in (load_topology, load_gpu_list, load_compute_apps, summarize_gpu_file):
        try:
            read(path)
        except ToolkitError as e:
            assert str(e)


@budget(20)
@given(data=st.binary(max_size=3000), strict=st.booleans())
def test_arbitrary_bytes(tmp_path: Path, data: bytes, strict: bool) -> None:
    path = tmp_path / "trace.txt"
    path.write_bytes(data)
    _read(path, data, strict)
