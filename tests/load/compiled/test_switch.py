"""One switch for the compiled passes, and proof that each pass types what it should when on."""

from __future__ import annotations

import os
from pathlib import Path
from unittest.mock import patch

from helpers import TEST_DATA

from toolkit.load import compiled
from toolkit.load.gpu.trace import load_gpu_trace
from toolkit.load.sglang import chunks
from toolkit.load.sglang.log import load_sglang_log

LOG = TEST_DATA / "sglang" / "journald-short.log"
GPU = TEST_DATA / "gpu" / "smi-8gpu-loop.csv"


def _blocks(name: str) -> int:
    return compiled.uses().get(name, 0)


def test_the_switch_reads_the_environment() -> None:
    with patch.dict(os.environ, {compiled.SWITCH: "0"}):
        assert not compiled.enabled()
    with patch.dict(os.environ, {compiled.SWITCH: "1"}):
        assert compiled.enabled()
    with patch.dict(os.environ, {}, clear=True):
        assert compiled.enabled()  # on unless turned off


def test_the_log_line_pass_types_batch_lines_when_on_and_none_when_off(tmp_path: Path) -> None:
    chunks.lane_loading().join()  # the pass loads on a thread of its own
    before = _blocks("log-line")
    on = load_sglang_log(LOG, cache=False).batches
    assert _blocks("log-line") > before
    with patch.dict(os.environ, {compiled.SWITCH: "0"}):
        before = _blocks("log-line")
        off = load_sglang_log(LOG, cache=False).batches
        assert _blocks("log-line") == before
    assert on.height and on.equals(off)


def test_the_smi_row_pass_types_rows_when_on_and_none_when_off() -> None:
    before = _blocks("nvidia-smi row")
    on = load_gpu_trace(GPU, cache=False).samples
    assert _blocks("nvidia-smi row") > before
    with patch.dict(os.environ, {compiled.SWITCH: "0"}):
        before = _blocks("nvidia-smi row")
        off = load_gpu_trace(GPU, cache=False).samples
        assert _blocks("nvidia-smi row") == before
    assert on.height and on.equals(off)
