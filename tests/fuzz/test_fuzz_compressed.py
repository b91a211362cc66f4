"""Damaged compressed inputs (zstd, xz, bzip2, lz4, zip, tar): every one is sniffed and loaded
as far as its stream goes, or refused with one declared ``ToolkitError``; nothing else escapes
and the lines read are numbered without a gap."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget, mutated, seeds
from hypothesis import given

from toolkit.errors import ToolkitError
from toolkit.load.gpu.trace import load_gpu_trace
from toolkit.load.sglang.log import load_sglang_log
from toolkit.load.sniff import sniff

pytestmark = pytest.mark.fuzz

CORPUS = seeds(TEST_DATA / "compressed")


@budget(30)
@given(data=mutated(CORPUS))
def test_mutated_compressed_inputs(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "input"
    path.write_bytes(data)
    try:
        fmt = sniff(path)
        if fmt == "sglang-log":
            log = load_sglang_log(path, cache=False)
            lines = log.coverage()["lines"]
            assert log.events.get_column("lineno").to_list() == list(range(1, lines + 1))
        elif fmt == "nvidia-smi-csv":
            trace = load_gpu_trace(path, cache=False)
            (summary,) = trace.summary()
            assert summary["sample_lines"] + summary["skipped"] == summary["lines"]
    except ToolkitError as e:
        assert str(e).startswith(str(path))
