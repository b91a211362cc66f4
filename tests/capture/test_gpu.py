"""GPU telemetry of a capture with stand-ins for ``nvidia-smi`` and ``dcgmi``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.fake_sglang import wait_until
from helpers.fake_tools import install_dcgmi, install_nvidia_smi

from toolkit.capture.gpu import gpu_tool, record_inventory, start_sampler
from toolkit.capture.processes import Children
from toolkit.load.gpu.trace import load_compute_apps, load_gpu_trace, load_topology
from toolkit.load.sniff import sniff


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory first on PATH; PATH keeps only what Python needs otherwise."""
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_SMI_PIDS", str(tmp_path / "pids"))
    (tmp_path / "pids").mkdir()
    return path


def test_nvidia_smi_trace_list_and_topology(tmp_path: Path, bin_dir: Path) -> None:
    install_nvidia_smi(bin_dir, tmp_path / "pids")
    assert gpu_tool() == "nvidia-smi"
    children = Children()
    files = record_inventory(tmp_path, children)
    assert sniff(files["gpus"]) == "nvidia-smi-list"
    assert load_topology(files["topology"]).interconnect == "nvlink"
    apps = load_compute_apps(files["processes"])
    assert apps["pid"].to_list() == [4100, 4101]
    assert apps["used_memory_mib"].to_list() == [71234.0, 71234.0]
    assert apps["uuid"].null_count() == 0
    sampler = start_sampler("nvidia-smi", tmp_path, children)
    try:
        assert wait_until(lambda: sampler.path.read_text().count("\n") >= 7)
    finally:
        sampler.stop(children)
    trace = load_gpu_trace(sampler.path)
    assert sorted(trace.samples["gpu"].unique().to_list()) == [0, 1]
    assert trace.samples["util_pct"].null_count() == 0
    assert trace.samples["ts"].null_count() == 0


def test_dcgmi_rounds_are_timed(tmp_path: Path, bin_dir: Path) -> None:
    install_dcgmi(bin_dir)
    assert gpu_tool() == "dcgmi"
    children = Children()
    assert record_inventory(tmp_path, children) == {}  # no nvidia-smi to list the GPUs
    sampler = start_sampler("dcgmi", tmp_path, children)
    try:
        assert wait_until(lambda: sampler.rounds >= 4)
    finally:
        sampler.stop(children)
    assert sampler.interval_s is not None and sampler.interval_s > 0
    assert sniff(sampler.path) == "dcgmi-dmon"
    trace = load_gpu_trace(sampler.path, interval_s=sampler.interval_s, start=sampler.first_round)
    samples = trace.samples.filter(trace.samples["sm_active"].is_not_null())
    assert samples.height >= 2 and samples["ts"].null_count() == 0
    assert samples["ts"].min() >= sampler.first_round.replace(microsecond=0)


def test_no_gpu_tool(bin_dir: Path) -> None:
    assert os.environ["PATH"].startswith(str(bin_dir))
    if gpu_tool() is not None:  # the machine has a real one in /usr/bin
        pytest.skip("a GPU tool is installed on this machine")
    assert gpu_tool() is None
