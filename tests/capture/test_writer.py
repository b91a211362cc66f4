"""``run.toml`` of a capture: keys from /server_info, the GPU list and the topology."""

from __future__ import annotations

import tomllib
from datetime import datetime
from pathlib import Path

from toolkit.capture.writer import (
    command_of,
    hardware_of,
    interconnect_of,
    label_of,
    model_of,
    run_toml,
    write_run_toml,
)


def test_label_and_model_from_server_info() -> None:
    info = {"tp_size": 1, "pp_size": 8, "dp_size": 1, "model_path": "moonshotai/Kimi-K2"}
    assert label_of(info) == "PP8"
    assert label_of({"server_args": {"tp_size": 8, "pp_size": 1}}) == "TP8"
    assert label_of({}) is None and label_of(None) is None
    assert model_of(info) == "moonshotai/Kimi-K2"
    assert model_of(info | {"served_model_name": "kimi"}) == "kimi"


def test_a_command_only_when_stated() -> None:
    assert command_of({"tp_size": 8}) is None
    assert command_of({"launch_command": ["python", "-m", "sglang.launch_server"]}) == (
        "python -m sglang.launch_server"
    )


def test_hardware_and_interconnect_from_the_listings(tmp_path: Path) -> None:
    gpus = tmp_path / "gpus.txt"
    gpus.write_text(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n"
        "GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-cccc)\n"
    )
    assert hardware_of(gpus) == "2x NVIDIA H100 80GB HBM3, 1x NVIDIA A100-SXM4-40GB"
    topo = tmp_path / "topo.txt"
    topo.write_text(
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tPHB\t0-15\t0\nGPU1\tPHB\t X \t0-15\t0\n\nLegend:\n"
    )
    assert interconnect_of(topo) == "pcie"
    assert hardware_of(None) is None and interconnect_of(tmp_path / "nope.txt") is None


def test_run_toml_round_trips_awkward_text(tmp_path: Path) -> None:
    values = {
        "label": 'PP8 "fixed" \\ ünï\x7f',
        "model": None,
        "clock_offset_s": -7199.5,
        "notes": "line one\nline two",
        "gpu_trace": {"interval_s": 0.104, "start": datetime(2025, 5, 25, 21, 40, 21, 250_000)},
    }
    text = run_toml(values)
    assert tomllib.loads(text)["label"] == values["label"]
    config = write_run_toml(tmp_path, values)
    assert config.label == values["label"] and config.model is None
    assert config.clock_offset_s == -7199.5 and config.notes == "line one\nline two"
    assert config.gpu_trace_start == datetime(2025, 5, 25, 21, 40, 21, 250_000)
    assert not (tmp_path / ".run.toml.part").exists()
