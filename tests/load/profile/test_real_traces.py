"""Recorded traces, when you have some: set ``PPSCOPE_REAL_TRACES`` to a folder of PyTorch
profiler traces (a Holistic Trace Analysis checkout's ``tests/data``, your SGLang profiles) and
each one must be told by content and load whole, or be refused as no Kineto trace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.errors import ParseError
from toolkit.load.profile import is_torch_trace, load_profile_trace

FOLDER = os.environ.get("PPSCOPE_REAL_TRACES")
FILES = sorted(
    p
    for p in (Path(FOLDER).rglob("*.json*") if FOLDER else [])
    if p.is_file() and p.name.endswith((".json", ".json.gz"))
)


@pytest.mark.skipif(not FILES, reason="set PPSCOPE_REAL_TRACES to a folder of traces")
@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_recorded_trace_loads_whole(path: Path) -> None:
    if not is_torch_trace(path):
        with pytest.raises(ParseError):  # an execution trace, a config: no traceEvents
            load_profile_trace(path)
        return
    trace = load_profile_trace(path)
    assert trace.cut is None and trace.events_read > 0
    assert trace.events_read >= trace.events.height
