"""``foreign-gpu-process``: another process on a GPU the run uses is named with its GPU, stage,
pid, name and memory; none when every listed process is the server's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.diagnose import RunAnalysis, diagnose
from toolkit.diagnose.processes import foreign_gpu_process
from toolkit.diagnose.thresholds import FOREIGN_MEMORY_SHARE

FIXTURE = TEST_DATA / "diagnose" / "pp8-foreign-process"
UUID = "GPU-3f1a2b4c-0d5e-6f70-8192-a3b4c5d6e7f{}"


def _run(tmp_path: Path, extra: list[str], *, listing: bool = True) -> Path:
    """The fixture run with its scheduler rows and ``extra`` CSV rows."""
    run = tmp_path / "run"
    run.mkdir()
    for name in ("server.log", "bench.jsonl", "run.toml"):
        shutil.copy(FIXTURE / name, run / name)
    if listing:
        shutil.copy(FIXTURE / "gpus.txt", run / "gpus.txt")
    lines = (FIXTURE / "apps.csv").read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in lines[1:] if "sglang::" in ln]
    (run / "apps.csv").write_text("\n".join([lines[0], *kept, *extra]) + "\n", encoding="utf-8")
    return run


def test_the_fixture_names_the_process_its_gpu_and_stage() -> None:
    found = foreign_gpu_process(RunAnalysis(FIXTURE))
    assert found is not None and found.id == "foreign-gpu-process"
    row = found.evidence.row(0, named=True)
    assert (row["gpu"], row["stage"], row["pid"]) == (3, "PP3", 51234)
    assert row["process_name"] == "/home/alice/venv/bin/python"
    assert row["used_memory_mib"] == 24000.0
    assert row["memory_share"] == pytest.approx(24000 / 94000)
    assert row["listings"] == "1 of 1" and row["gpu_note"] is None
    assert found.severity == "info" and found.impact is None  # nothing sizes its cost
    assert "large share of the GPU's memory" in found.summary  # 26 % ≥ FOREIGN_MEMORY_SHARE
    assert "pid 51234" in found.summary and "GPU 3 (PP3)" in found.summary
    assert "24000 MiB, 26% of the memory listed there" in found.summary
    assert "foreign-gpu-process" in {f.id for f in diagnose([RunAnalysis(FIXTURE)])}


def test_a_small_foreign_process_is_a_note(tmp_path: Path) -> None:
    small = f"2026/05/01 10:07:30.005, {UUID.format(5)}, 777, python3, 1024 MiB"
    found = foreign_gpu_process(RunAnalysis(_run(tmp_path, [small])))
    assert found is not None and found.severity == "info"
    assert "check whether it computes while the server runs" in found.summary
    assert found.evidence["memory_share"][0] < FOREIGN_MEMORY_SHARE
    assert found.evidence["stage"][0] == "PP5"


def test_no_finding_when_every_process_is_the_server_s(tmp_path: Path) -> None:
    ctx = RunAnalysis(_run(tmp_path, []))
    assert ctx.run.compute_apps is not None and ctx.run.compute_apps.height == 8
    assert foreign_gpu_process(ctx) is None


def test_a_gpu_the_layout_does_not_use_is_left_out_and_counted(tmp_path: Path) -> None:
    """PP8 on a 16-GPU host: a process on GPU 9 is no stage's; one on GPU 1 is."""
    run = _run(tmp_path, [])
    with (run / "gpus.txt").open("a", encoding="utf-8") as f:
        f.writelines(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-0000-{g})\n" for g in (8, 9))
    with (run / "apps.csv").open("a", encoding="utf-8") as f:
        f.write("2026/05/01 10:07:30.009, GPU-0000-9, 600, trainer, 40000 MiB\n")
        f.write(f"2026/05/01 10:07:30.001, {UUID.format(1)}, 601, trainer, 900 MiB\n")
    found = foreign_gpu_process(RunAnalysis(run))
    assert found is not None and found.evidence["pid"].to_list() == [601]
    assert "1 other process(es) on GPUs the run does not use are left out" in found.summary
    assert "large share" not in found.summary  # the large one is on no GPU of the run


def test_an_unmapped_gpu_is_said_so_not_guessed(tmp_path: Path) -> None:
    """Without ``nvidia-smi -L`` (or a trace with uuid) the UUID names the GPU, no index."""
    extra = f"2026/05/01 10:07:30.002, {UUID.format(2)}, 888, python3, 30000 MiB"
    found = foreign_gpu_process(RunAnalysis(_run(tmp_path, [extra], listing=False)))
    assert found is not None
    row = found.evidence.row(0, named=True)
    assert row["gpu"] is None and row["stage"] is None
    assert row["gpu_note"].startswith(UUID.format(2) + ": no nvidia-smi -L listing")
    assert "may not be the run's" not in row["gpu_note"]  # the server holds that GPU too
    assert "a GPU of unknown index" in found.summary


def test_a_listing_that_names_no_gpu_says_so(tmp_path: Path) -> None:
    run = _run(tmp_path, [])
    (run / "apps.csv").write_text(
        "pid, process_name, used_gpu_memory [MiB]\n"
        "85690, sglang::scheduler_PP0, 70000 MiB\n"
        "4242, /usr/bin/python3, 5000 MiB\n",
        encoding="utf-8",
    )
    found = foreign_gpu_process(RunAnalysis(run))
    assert found is not None and found.evidence["pid"].to_list() == [4242]
    assert (
        found.evidence["gpu_note"][0]
        == "the listing names no GPU (no gpu_uuid or gpu_bus_id field)"
    )
