"""The machine's GPU name and count come from one normalizer, whatever states them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.analyze.model.machine import hardware_gpus
from toolkit.run_analysis import RunAnalysis


@pytest.mark.parametrize(
    ("text", "count", "name"),
    [
        ("8x NVIDIA RTX PRO 6000", 8, "NVIDIA RTX PRO 6000"),
        ("8 × H200", 8, "H200"),
        ("4*A100-SXM4-80GB", 4, "A100-SXM4-80GB"),
        ("2 GPUs of  L40S", 2, "L40S"),
        ("H200", None, "H200"),
        ("NVIDIA H100 80GB HBM3", None, "NVIDIA H100 80GB HBM3"),
        ("8x", None, "8x"),
        ("  ", None, None),
        (None, None, None),
    ],
)
def test_hardware_text_splits_into_count_and_name(
    text: str | None, count: int | None, name: str | None
) -> None:
    assert hardware_gpus(text) == (count, name)


def test_a_count_in_run_toml_hardware_is_never_said_twice(tmp_path: Path) -> None:
    """run.toml ``hardware = "8x NVIDIA RTX PRO 6000"`` and no GPU trace: the machine is
    ``8× NVIDIA RTX PRO 6000``, not ``8× 8x NVIDIA RTX PRO 6000``."""
    run = tmp_path / "pp8"
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-underfilled", run)
    toml = (run / "run.toml").read_text()
    (run / "run.toml").write_text(toml + 'hardware = "8x NVIDIA RTX PRO 6000"\n')
    machine = RunAnalysis(run).machine
    assert (machine.gpus, machine.gpu) == (8, "NVIDIA RTX PRO 6000")
    assert machine.describe() == "8× NVIDIA RTX PRO 6000"
    assert machine.gpu_from == "run.toml hardware"
