"""Ranks mapped to GPUs by identity: the scheduler processes a compute-apps listing shows, the
UUIDs ``CUDA_VISIBLE_DEVICES`` names, and CUDA ordinals only as a stated guess.

The runs are the sample's PP8 run (``nvidia-smi --query-gpu=timestamp,index,name,uuid,…``,
``--query-compute-apps=timestamp,gpu_uuid,gpu_bus_id,pid,process_name,used_memory`` whose
rows are SGLang's ``sglang::scheduler_PP<k>`` processes), its GPUs given to the stages in a
shuffled order.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from helpers import SAMPLE

from toolkit.load.gpu.identity import (
    ASSUMED_ORDER,
    SCHEDULERS,
    VISIBLE_UUIDS,
    identify_roles,
    scheduler_ranks,
)
from toolkit.load.gpu.roles import gpu_roles
from toolkit.run_analysis import RunAnalysis

SHUFFLE = (2, 0, 3, 1, 6, 4, 7, 5)
"""Stage k runs on the GPU of nvidia-smi index SHUFFLE[k]."""


@pytest.fixture(scope="module")
def sample() -> RunAnalysis:
    return RunAnalysis(SAMPLE / "pp8")


def _uuids(sample: RunAnalysis) -> dict[int, str]:
    inventory = sample.run.gpu_inventory
    assert inventory is not None
    return dict(inventory.select("gpu", "uuid").unique().iter_rows())


def _shuffled_apps(run_dir: Path, uuids: dict[int, str]) -> None:
    """The compute-apps listing with each GPU's process titled by the stage SHUFFLE puts on it."""
    stage_of = {gpu: pp for pp, gpu in enumerate(SHUFFLE)}
    apps = run_dir / "compute-apps.csv"
    header, *rows = apps.read_text().splitlines()
    out = [header]
    for row in rows:
        cells = row.split(", ")
        gpu = next(g for g, u in uuids.items() if u == cells[1])
        cells[4] = f"sglang::scheduler_PP{stage_of[gpu]}"
        out.append(", ".join(cells))
    apps.write_text("\n".join(out) + "\n")


def _with_command(run_dir: Path, env: str) -> None:
    toml = run_dir / "run.toml"
    text = toml.read_text().replace('command = "python3', f'command = "{env} python3')
    toml.write_text(text)


def _copy(tmp_path: Path) -> Path:
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    return run_dir


def _per_gpu(sample: RunAnalysis) -> dict[int, float]:
    """The sample's busy share per GPU index (stage k ran on GPU k there)."""
    return dict(sample.busy.select("pp", "busy_pct").iter_rows())


def test_scheduler_titles_give_each_rank_its_gpu() -> None:
    apps = pl.DataFrame(
        {
            "process_name": [
                "sglang::scheduler_PP1_TP1",
                "sglang::scheduler_PP1_TP1",  # its small context on GPU 0
                "sglang::scheduler_DP1_TP0_EP0",
                "python train.py",
                "sglang::scheduler",
            ],
            "uuid": ["GPU-b", "GPU-a", "GPU-c", "GPU-d", "GPU-e"],
            "gpu": [5, 0, 2, 3, 4],
            "used_memory_mib": [70000.0, 500.0, 60000.0, 9000.0, 1000.0],
        }
    )
    ranks = scheduler_ranks(apps).sort("dp", "pp", "tp")
    assert ranks.rows() == [(0, 0, 0, 4, "GPU-e"), (0, 1, 1, 5, "GPU-b"), (1, 0, 0, 2, "GPU-c")]


def test_shuffled_visible_uuids_and_the_processes_agree(
    tmp_path: Path, sample: RunAnalysis
) -> None:
    uuids = _uuids(sample)
    run_dir = _copy(tmp_path)
    _shuffled_apps(run_dir, uuids)
    _with_command(run_dir, "CUDA_VISIBLE_DEVICES=" + ",".join(uuids[g] for g in SHUFFLE))
    ctx = RunAnalysis(run_dir)
    assert ctx.gpu_mapping is not None and ctx.gpu_mapping.witness == SCHEDULERS
    roles = ctx.roles
    assert roles is not None
    assert dict(roles.select("pp", "gpu").iter_rows()) == dict(enumerate(SHUFFLE))
    per_gpu = _per_gpu(sample)
    busy = dict(ctx.busy.select("pp", "busy_pct").iter_rows())
    assert busy == pytest.approx({pp: per_gpu[gpu] for pp, gpu in enumerate(SHUFFLE)})
    assert not [m for m in ctx.mismatches if m["input"] == "GPU mapping"]


def test_visible_uuids_alone_map_through_the_listing(tmp_path: Path, sample: RunAnalysis) -> None:
    uuids = _uuids(sample)
    run_dir = _copy(tmp_path)
    (run_dir / "compute-apps.csv").unlink()
    _with_command(run_dir, "CUDA_VISIBLE_DEVICES=" + ",".join(uuids[g] for g in SHUFFLE))
    ctx = RunAnalysis(run_dir)
    assert ctx.gpu_mapping is not None and ctx.gpu_mapping.witness == VISIBLE_UUIDS
    assert not ctx.gpu_mapping.guess
    assert ctx.roles is not None
    assert dict(ctx.roles.select("pp", "gpu").iter_rows()) == dict(enumerate(SHUFFLE))


def test_processes_that_contradict_the_ordinals_win_and_are_named(
    tmp_path: Path, sample: RunAnalysis
) -> None:
    """CUDA_VISIBLE_DEVICES=0,…,7 in CUDA's default order; the processes show the stages on
    other GPUs: each stage is read from the GPU its process holds, and the note says so."""
    uuids = _uuids(sample)
    run_dir = _copy(tmp_path)
    _shuffled_apps(run_dir, uuids)
    _with_command(run_dir, "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")
    ctx = RunAnalysis(run_dir)
    assert ctx.roles is not None
    assert dict(ctx.roles.select("pp", "gpu").iter_rows()) == dict(enumerate(SHUFFLE))
    assert ctx.roles.filter(pl.col("pp") == 0)["label"][0] == "PP0 (GPU 2)"
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU mapping"]
    assert "PP0 on GPU 2 (ordinal 0)" in note["detail"]
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in note["detail"]


def test_ordinals_are_a_stated_guess_without_an_identity(
    tmp_path: Path, sample: RunAnalysis
) -> None:
    run_dir = _copy(tmp_path)
    (run_dir / "compute-apps.csv").unlink()
    ctx = RunAnalysis(run_dir)
    mapping = ctx.gpu_mapping
    assert mapping is not None and mapping.witness == ASSUMED_ORDER and mapping.guess
    assert ctx.roles_note is not None and "a guess" in ctx.roles_note
    assert not [m for m in ctx.mismatches if m["input"] == "GPU mapping"]  # identical GPUs
    # on a machine of mixed models the guess is likely wrong: said as a mismatch
    csv = run_dir / "gpu.csv"
    lines = csv.read_text().splitlines()
    mixed = [lines[0]] + [
        ln.replace("NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA H100 80GB HBM3")
        if ln.split(", ")[1] in {"4", "5", "6", "7"}
        else ln
        for ln in lines[1:]
    ]
    csv.write_text("\n".join(mixed) + "\n")
    ctx = RunAnalysis(run_dir)
    (note,) = [m for m in ctx.mismatches if m["input"] == "GPU mapping"]
    assert "mixes GPU models" in note["detail"] and "NVIDIA H100 80GB HBM3" in note["detail"]
    # with CUDA_DEVICE_ORDER=PCI_BUS_ID the ordinals are the indices: nothing to say
    _with_command(run_dir, "CUDA_DEVICE_ORDER=PCI_BUS_ID")
    ctx = RunAnalysis(run_dir)
    assert ctx.gpu_mapping is not None and not ctx.gpu_mapping.guess
    assert not [m for m in ctx.mismatches if m["input"] == "GPU mapping"]


def test_identify_roles_keeps_ranks_no_process_shows() -> None:
    roles = gpu_roles({"pp_size": 2, "tp_size": 2})
    apps = pl.DataFrame(
        {
            "process_name": ["sglang::scheduler_PP1_TP0"],
            "uuid": ["GPU-x"],
            "gpu": [0],
            "used_memory_mib": [1000.0],
        }
    )
    mapping = identify_roles(roles, apps=apps)
    rows = {(r["pp"], r["tp"]): r["gpu"] for r in mapping.roles.iter_rows(named=True)}
    assert rows == {(0, 0): 0, (0, 1): 1, (1, 0): 0, (1, 1): 3}
    assert mapping.note.startswith("1 of 4 ranks") and mapping.witness == SCHEDULERS
    assert "PP1 on GPU 0 (ordinal 2)" in mapping.problems[0]
