"""SGLang logs from hostile bytes: every physical line becomes one event at its own line number,
or the loader raises a declared ``ToolkitError`` (strict mode); nothing else escapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget, count_lines, mutated, seeds
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load import compression
from toolkit.load.sglang.log import load_sglang_log

pytestmark = pytest.mark.fuzz

CORPUS = seeds(TEST_DATA / "sglang", suffixes=(".log",))


def _check(path: Path, data: bytes, strict: bool) -> None:
    try:
        log = load_sglang_log(path, strict=strict, cache=False)
        events = log.events
        summary = log.summary()
        launches = [launch.facts() for launch in log.launches]
    except ToolkitError as e:
        assert str(e)
        assert strict or "no such file" not in str(e)
        return
    lines = log.coverage()["lines"]
    if compression.codec_of(path) is None:  # a compressed file's lines are those it holds
        assert lines == count_lines(data)
    assert events.get_column("lineno").to_list() == list(range(1, lines + 1))
    assert summary["files"] and len(launches) == len(log.launches)


@budget(30)
@given(data=mutated(CORPUS), strict=st.booleans())
def test_mutated_logs(tmp_path: Path, data: bytes, strict: bool) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(data)
    _check(path, data, strict)


@budget(15)
@given(data=st.binary(max_size=3000))
def test_arbitrary_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(data)
    _check(path, data, strict=False)
