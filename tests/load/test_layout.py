"""``resolve_layout`` and ``Run.layout``: one answer to the layout, from the strongest witness."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit import load_run
from toolkit.errors import ToolkitError
from toolkit.load.gpu.roles import device_index, gpu_roles, unresolved_devices
from toolkit.load.layout import resolve_layout
from toolkit.load.sglang.server_args import parse_launch_command
from toolkit.run_analysis import RunAnalysis

DATA = TEST_DATA


def test_the_dump_wins_and_the_startup_summary_resolves_settings() -> None:
    args = {"tp_size": 1, "pp_size": 8, "pp_async_batch_depth": 8, "max_running_requests": None}
    facts = {"max_running_requests": {"PP0": 2048, "PP7": 1024}, "max_total_num_tokens": 327680}
    layout = resolve_layout(args, facts, command={"pp_size": 4}, tags={"pp": 8})
    assert (layout.pp, layout.tp, layout.layout_from) == (8, 1, "ServerArgs")
    assert layout.max_running_requests == 1024  # the smallest rank's value binds
    assert (layout.loop_size, layout.label) == (16, "PP8")
    assert layout.describe() == "PP8, async depth 8"


def test_the_command_when_no_dump_was_printed() -> None:
    flags = {"tp_size": 2, "pp_size": 4, "pp_max_micro_batch_size": 4}
    layout = resolve_layout(None, command=flags, tags={"pp": 4})
    assert (layout.label, layout.layout_from) == ("PP4xTP2", "launch command")
    assert layout.pp_max_micro_batch_size == 4


def test_rank_tags_alone_give_a_lower_bound() -> None:
    layout = resolve_layout({}, tags={"pp": 4, "tp": 1})
    assert (layout.pp, layout.layout_from, layout.label) == (4, "rank tags", "PP4")
    assert resolve_layout(None).label is None
    assert resolve_layout(None).describe() == "—"


def test_old_name_of_the_micro_batch_cap() -> None:
    assert resolve_layout({"pp_size": 2, "max_micro_batch_size": 6}).pp_max_micro_batch_size == 6


def test_a_pp_log_without_a_dump_is_laid_out_from_its_rank_tags(tmp_path: Path) -> None:
    source = (DATA / "sglang" / "v0.5.23-pp8.log").read_text().splitlines(keepends=True)
    kept = [line for line in source if "server_args=" not in line]
    (tmp_path / "server.log").write_text("".join(kept))
    run = load_run(tmp_path)
    assert run.launch is not None and not run.launch.server_args  # started, dump not printed
    assert (run.layout.pp, run.layout.layout_from) == (8, "rank tags")
    assert run.label == "PP8"


def test_a_run_toml_command_lays_out_a_run_without_a_dump(tmp_path: Path) -> None:
    (tmp_path / "server.log").write_text("[2026-01-01 00:00:00] nothing here yet\n")
    (tmp_path / "run.toml").write_text(
        'command = "python -m sglang.launch_server --model-path m --tp 2 --pp-size 2"\n'
    )
    run = load_run(tmp_path)
    assert (run.layout.label, run.layout.layout_from) == ("PP2xTP2", "launch command")


def test_the_command_places_the_gpus() -> None:
    """``base_gpu_id``/``gpu_id_step`` from the command when no dump was printed, and its
    ``CUDA_VISIBLE_DEVICES`` (ordinal k is the k-th listed GPU)."""

    flags = parse_launch_command(
        "CUDA_VISIBLE_DEVICES=4,5,6,7 python -m sglang.launch_server --model-path m "
        "--pp-size 2 --tp 2 --base-gpu-id 0"
    )
    layout = resolve_layout(None, command=flags)
    assert layout.visible_devices == (4, 5, 6, 7) and layout.base_gpu_id == 0
    roles = gpu_roles(layout)
    assert roles["gpu"].to_list() == [4, 5, 6, 7] and roles["pp"].to_list() == [0, 0, 1, 1]
    assert roles["label"].to_list()[2] == "PP1 TP0 (GPU 6)"
    shifted = resolve_layout({"pp_size": 2, "base_gpu_id": 2, "gpu_id_step": 1}, command=flags)
    assert gpu_roles(shifted)["gpu"].to_list() == [6, 7]  # ordinals 2, 3 of the listed GPUs


def test_visible_devices_by_uuid_map_through_the_inventory() -> None:
    """UUIDs (whole, a unique prefix, a MIG device of a GPU) are kept and resolved by an
    inventory of the run; without one their ranks have no index and are named by UUID."""

    uuids = "GPU-ef775c08-e61a-4d3c-9a1e-5c0ffee00001,GPU-480048db"
    env = {"__env__": {"CUDA_VISIBLE_DEVICES": uuids}}
    layout = resolve_layout(None, command={"pp_size": 2, **env})
    assert layout.visible_devices == ("GPU-ef775c08-e61a-4d3c-9a1e-5c0ffee00001", "GPU-480048db")
    blind = gpu_roles(layout)
    assert blind["gpu"].to_list() == [None, None]
    assert blind["label"].to_list()[1] == "PP1 (GPU-480048db)"
    inventory = pl.DataFrame(
        {
            "gpu": [0, 3, 5],
            "uuid": [
                "GPU-11111111-2222-3333-4444-555555555555",
                "GPU-480048db-5f45-1c2d-8e9f-0a1b2c3d4e5f",
                "GPU-EF775C08-E61A-4D3C-9A1E-5C0FFEE00001",
            ],
        },
        schema={"gpu": pl.Int32, "uuid": pl.String},
    )
    roles = gpu_roles(layout, inventory=inventory)
    assert roles.select("pp", "gpu").rows() == [(1, 3), (0, 5)]
    assert unresolved_devices(layout.visible_devices, inventory) == []
    assert unresolved_devices(("GPU-deadbeef", 2), inventory) == ["GPU-deadbeef"]
    mig = "MIG-GPU-480048db-5f45-1c2d-8e9f-0a1b2c3d4e5f/1/0"
    assert device_index(mig, inventory) == 3
    assert device_index("GPU-", inventory) is None  # a prefix of all three: not one GPU
    odd = {"__env__": {"CUDA_VISIBLE_DEVICES": "0,nvidia1"}}
    assert resolve_layout(None, command={"pp_size": 2, **odd}).visible_devices is None


def test_too_few_visible_devices_for_the_layout_is_an_error() -> None:
    short = resolve_layout(None, command={"pp_size": 4, "__env__": {"CUDA_VISIBLE_DEVICES": "0,1"}})
    with pytest.raises(ToolkitError, match="CUDA_VISIBLE_DEVICES lists 2 GPUs"):
        gpu_roles(short)


def test_stages_are_mapped_to_gpus_without_a_dump(tmp_path: Path) -> None:
    """No ``server_args=`` line: the rank tags say PP8, and every stage gets its GPU."""

    source = (DATA / "sglang" / "v0.5.23-pp8.log").read_text().splitlines(keepends=True)
    (tmp_path / "server.log").write_text("".join(s for s in source if "server_args=" not in s))
    roles = RunAnalysis(tmp_path).roles
    assert roles is not None
    assert roles["gpu"].to_list() == list(range(8)) and roles["pp"].to_list() == list(range(8))


def _uuid_run(tmp_path: Path, listed: str) -> Path:
    """A PP2 launch on the GPUs ``listed`` by UUID, with an nvidia-smi trace printing uuid."""
    (tmp_path / "run.toml").write_text(
        f'command = "CUDA_VISIBLE_DEVICES={listed} python -m sglang.launch_server '
        '--model-path m --pp-size 2"\n'
    )
    rows = ["timestamp, index, uuid, utilization.gpu [%], memory.used [MiB]"]
    for k in range(3):
        for gpu, uuid in enumerate(UUIDS):
            rows.append(f"2026/05/01 10:00:0{k}.{gpu:03d}, {gpu}, {uuid}, {10 * gpu} %, 100 MiB")
    (tmp_path / "gpu.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


UUIDS = [f"GPU-{g}a3f0c1d-2b4e-4c6f-8a9b-{g:012d}" for g in range(4)]


def test_a_run_resolves_visible_uuids_through_its_trace(tmp_path: Path) -> None:
    run = load_run(_uuid_run(tmp_path, f"{UUIDS[3]},{UUIDS[1][:12]}"))
    roles = RunAnalysis(run).roles
    assert roles is not None
    assert roles.select("pp", "gpu").sort("pp").rows() == [(0, 3), (1, 1)]
    assert not [m for m in run.mismatches if m["input"] == "CUDA_VISIBLE_DEVICES"]


def test_a_visible_uuid_the_run_does_not_list_is_said(tmp_path: Path) -> None:
    run = load_run(_uuid_run(tmp_path, f"{UUIDS[0]},GPU-ffffffff-0000"))
    roles = RunAnalysis(run).roles
    assert roles is not None
    assert roles.select("pp", "gpu").sort("pp").rows() == [(0, 0), (1, None)]
    notes = [m for m in run.mismatches if m["input"] == "CUDA_VISIBLE_DEVICES"]
    assert len(notes) == 1 and notes[0]["files"] == "run.toml"
    assert notes[0]["detail"].startswith("GPU-ffffffff-0000 is named by UUID")
