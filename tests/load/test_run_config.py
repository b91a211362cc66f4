"""``run.toml``: every key optional; unknown keys, wrong types and values out of range are
``ConfigError`` naming the key and its line."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pytest

from toolkit import ConfigError, ParseError, ToolkitError
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
        ("synthetic = 1\n", "must be true or false"),
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


@pytest.mark.parametrize(
    ("text", "lineno", "message"),
    [
        ('label = "PP8"\n\nlable = "x"\n', 3, "unknown key 'lable'"),
        ('label = "PP8"\nsynthetic = 1\n', 2, "must be true or false, not an integer"),
        ('notes = "a"\n[gpu_trace]\nfeilds = "x"\n', 3, "gpu_trace.feilds"),
        ("[gpu_trace]\nfields = 3\n", 2, "must be a string"),
        ("gpu_trace.fields = 3\n", 1, "must be a string"),
        ('label = "x"\n[extra]\nk = 1\n', 2, "unknown key 'extra'"),
        ('\n"hardware" = 8\n', 2, "'hardware' must be a string"),
        ('label = "a"\ninterconnect = "ib"\n', 2, "pcie or nvlink"),
        ('label = "a"\nlabel = "b"\n', 2, "invalid toml"),
        ('[gpu_trace]\nfields = "timestamp,,index"\n', 2, "empty field name"),
    ],
)
def test_errors_carry_the_line_of_the_key(
    tmp_path: Path, text: str, lineno: int, message: str
) -> None:
    (tmp_path / "run.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        read_run_config(tmp_path)
    assert e.value.lineno == lineno
    assert str(e.value).startswith(f"{tmp_path / 'run.toml'}:{lineno}: ")


@pytest.mark.parametrize(
    "value",
    ["inf", "-inf", "nan", "+nan", "1e300", "864001", "-1e7", "99999999999999999999999"],
)
def test_clock_offset_must_be_finite_and_bounded(tmp_path: Path, value: str) -> None:
    (tmp_path / "run.toml").write_text(f'label = "x"\nclock_offset_s = {value}\n')
    with pytest.raises(ConfigError, match="finite number of seconds") as e:
        read_run_config(tmp_path)
    assert e.value.lineno == 2


def test_clock_offset_within_ten_days(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text("clock_offset_s = -864000\n")
    assert read_run_config(tmp_path).clock_offset_s == -864000.0


@pytest.mark.parametrize(
    "content",
    [
        b"a = " + b"[" * 5000 + b"]" * 5000 + b"\n",
        b"clock_offset_s = " + b"9" * 5000 + b"\n",
        b'label = "\xff\xfe"\n',
        b"label = 'x'\x00\n",
    ],
)
def test_hostile_files_are_config_errors(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "run.toml").write_bytes(content)
    with pytest.raises(ConfigError):
        read_run_config(tmp_path)


def test_a_pipe_named_run_toml_is_rejected(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "run.toml")
    with pytest.raises(ToolkitError, match="named pipe"):
        read_run_config(tmp_path)


def test_config_error_is_a_parse_error() -> None:
    assert issubclass(ConfigError, ParseError) and issubclass(ConfigError, ToolkitError)


def test_a_trace_without_time_gets_its_start(tmp_path: Path) -> None:
    """``[gpu_trace] start``: when the first sample of a dcgmi trace was taken (local time)."""
    (tmp_path / "run.toml").write_text(
        "[gpu_trace]\ninterval_s = 0.104\nstart = 2025-05-25T21:40:21.250\n"
    )
    config = read_run_config(tmp_path)
    assert config.gpu_trace_interval_s == 0.104
    assert config.gpu_trace_start == datetime(2025, 5, 25, 21, 40, 21, 250_000)


@pytest.mark.parametrize(
    "value", ['"2025-05-25T21:40:21"', "2025-05-25T21:40:21Z", "2025-05-25", "21:40:21"]
)
def test_a_start_is_a_local_date_time(tmp_path: Path, value: str) -> None:
    (tmp_path / "run.toml").write_text(f'label = "x"\n[gpu_trace]\nstart = {value}\n')
    with pytest.raises(ConfigError, match=r"gpu_trace\.start must be a local date-time") as e:
        read_run_config(tmp_path)
    assert e.value.lineno == 3


def test_trace_nodes_map_files_to_node_ranks(tmp_path: Path) -> None:
    """``[gpu_trace.nodes]``: which node of a multi-node launch wrote each trace file."""
    (tmp_path / "run.toml").write_text('[gpu_trace.nodes]\n"gpu-a.csv" = 0\n"node-b/gpu.csv" = 1\n')
    config = read_run_config(tmp_path)
    assert config.gpu_trace_nodes == (("gpu-a.csv", 0), ("node-b/gpu.csv", 1))
    assert RunConfig().gpu_trace_nodes == ()


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ('[gpu_trace.nodes]\n"a.csv" = -1\n', 2, "gpu_trace.nodes.a.csv must be a node rank"),
        ('[gpu_trace.nodes]\n"a.csv" = "1"\n', 2, "not a string"),
        ('[gpu_trace.nodes]\n"a.csv" = true\n', 2, "not a boolean"),
        ('[gpu_trace]\nnodes = {"a.csv" = 1.5}\n', 2, "not a number"),
        ('[gpu_trace]\nnodes = "a.csv"\n', 2, "must be a table of trace file = node rank"),
    ],
)
def test_bad_trace_nodes_name_the_key_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    (tmp_path / "run.toml").write_text(text)
    with pytest.raises(ConfigError, match=message) as e:
        read_run_config(tmp_path)
    assert e.value.lineno == line
