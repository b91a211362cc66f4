"""GPU traces share the line cache: a second load reads Parquet, equal to the first."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit import load_gpu_trace
from toolkit.load import cache as cache_io

TRACE = TEST_DATA / "gpu" / "smi-8gpu-loop.csv"

pytestmark = pytest.mark.usefixtures("cache_beside_input")


def _copy(tmp_path: Path) -> Path:
    path = tmp_path / "gpu.csv"
    shutil.copy(TRACE, path)
    return path


def test_a_cached_trace_equals_a_fresh_one(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    fresh = load_gpu_trace(path, cache=False)
    first = load_gpu_trace(path)
    (entry,) = cache_io.entries(tmp_path / cache_io.CACHE_NAME)
    second = load_gpu_trace(path, clock_offset_s=2.0)
    for table in ("samples", "skipped", "unavailable"):
        assert getattr(first, table).equals(getattr(fresh, table)), table
    assert second.sources == fresh.sources
    shifted = fresh.samples.get_column("ts") + timedelta(seconds=2)
    assert second.samples.get_column("ts").equals(shifted)
    assert entry.source == str(path)


def test_a_damaged_gpu_entry_is_rebuilt(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    expected = load_gpu_trace(path).samples
    (entry,) = cache_io.entries(tmp_path / cache_io.CACHE_NAME)
    (entry.path / "samples.parquet").write_bytes(b"PAR1 cut")
    assert load_gpu_trace(path).samples.equals(expected)
