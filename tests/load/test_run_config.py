"""``run.toml``: every key optional, unknown keys and wrong types are errors naming them."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit import ParseError
from toolkit.load.run_config import RunConfig, read_run_config


def test_absent_file_gives_defaults(tmp_path: Path) -> None:
    assert read_run_config(tmp_path) == RunConfig()


def test_all_keys(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text(
        'label = "PP8"\n'
        'command = "python -m sglang.launch_server --pp-size 8 --pp-async-batch-depth 8"\n'
        'hardware = "8x RTX PRO 6000 Blackwell"\n'
        'interconnect = "PCIe"\n'
        "clock_offset_s = -1.5\n"
        "synthetic = true\n"
        'notes = "seed incident"\n'
        "[gpu_trace]\n"
        'fields = "timestamp, index,utilization.gpu"\n'
    )
    config = read_run_config(tmp_path)
    assert config.label == "PP8" and config.interconnect == "pcie"
    assert config.clock_offset_s == -1.5 and config.synthetic
    assert config.gpu_trace_fields == ("timestamp", "index", "utilization.gpu")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('lable = "PP8"\n', "unknown key 'lable'"),
        ("synthetic = 1\n", "wrong type"),
        ('interconnect = "infiniband"\n', "pcie or nvlink"),
        ('[gpu_trace]\nfeilds = "x"\n', "gpu_trace.feilds"),
        ('label = "unclosed\n', "invalid toml"),
    ],
)
def test_bad_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "run.toml").write_text(text)
    with pytest.raises(ParseError, match=message) as e:
        read_run_config(tmp_path)
    assert "run.toml" in str(e.value)
