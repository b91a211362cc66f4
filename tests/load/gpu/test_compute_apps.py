"""``--query-compute-apps`` listings: counted per GPU and listing (a looped capture is a series),
mapped to GPU indices by UUID (or bus id) when an inventory is at hand, and never mistaken for
a GPU trace."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from helpers.gpu_fixtures import GPU_DATA as DATA

from toolkit.errors import ParseError, UnknownFormat
from toolkit.load.gpu.trace import (
    load_compute_apps,
    load_gpu_list,
    load_gpu_trace,
    processes_per_gpu,
    sniff_gpu_format,
    summarize_gpu_file,
)
from toolkit.load.run import load_run
from toolkit.schema.gpu import APP_COUNTS

LOOP = DATA / "apps-loop-timestamp.csv"


def test_a_looped_listing_is_apps_not_a_trace() -> None:
    assert sniff_gpu_format(LOOP) == "nvidia-smi-apps"
    with pytest.raises(UnknownFormat, match="nvidia-smi-apps is no time series"):
        load_gpu_trace(LOOP, cache=False)
    summary = summarize_gpu_file(LOOP)
    assert summary == {
        "path": str(LOOP),
        "format": "nvidia-smi-apps",
        "gpus": 8,
        "processes": 25,
        "listings": 3,
        "most_per_gpu": 2,
    }


def test_processes_per_gpu_over_time() -> None:
    apps = load_compute_apps(LOOP, load_gpu_list(DATA / "list-8gpu.txt"))
    assert apps.height == 25  # every row kept
    counts = processes_per_gpu(apps)
    assert counts.schema == APP_COUNTS
    per_listing = counts.group_by("snapshot", maintain_order=True).agg(
        pl.col("gpu").sort(), pl.col("processes").sum()
    )
    assert per_listing.get_column("processes").to_list() == [8, 9, 8]
    assert per_listing.get_column("gpu").to_list()[2] == list(range(7))  # GPU 7's is gone
    gpu0 = counts.filter(pl.col("gpu") == 0)
    assert gpu0.get_column("processes").to_list() == [1, 2, 2]
    assert gpu0.get_column("used_memory_mib").to_list() == [78000.0, 80048.0, 80048.0]
    assert [t.second for t in gpu0.get_column("ts")] == [21, 22, 23]


def test_a_process_name_with_commas_is_kept_whole() -> None:
    apps = load_compute_apps(LOOP)
    leftover = apps.filter(pl.col("pid") == 71234)
    assert leftover.get_column("process_name").unique().to_list() == ["/opt/venvs/a,b/bin/python3"]
    assert leftover.get_column("used_memory_mib").to_list() == [2048.0, 2048.0]


def test_rows_map_by_bus_id_through_a_trace_and_mig_uuids_to_their_gpu(tmp_path: Path) -> None:
    samples = load_gpu_trace(DATA / "smi-8gpu-loop.csv", cache=False).samples
    apps = load_compute_apps(DATA / "apps-nounits-bus.csv", samples)
    assert apps.get_column("gpu").to_list() == [0, 1]
    mig = tmp_path / "apps.csv"
    mig.write_text(
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
        "MIG-50f1c4c9-1508-5e8d-bb06-d08145b22e01, 4242, python3, 9000 MiB\n"
        "MIG-GPU-5679a9d0-6f32-6a97-ff37-fce5fd1a2ac9/2/0, 4243, python3, 8000 MiB\n"
        "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16, 4244, python3, 100 MiB\n"
    )
    apps = load_compute_apps(mig, load_gpu_list(DATA / "list-mig.txt"))
    assert apps.get_column("gpu").to_list() == [0, 1, 0]
    counts = processes_per_gpu(apps)
    assert counts.height == 3 and counts.get_column("snapshot").unique().to_list() == [0]


def test_short_rows_and_surplus_fields_without_a_name_are_errors(tmp_path: Path) -> None:
    short = tmp_path / "short.csv"
    short.write_text("pid, process_name, used_gpu_memory [MiB]\n85690, python3\n")
    with pytest.raises(ParseError, match=r"short\.csv:2: row has 2 fields, header 3"):
        load_compute_apps(short)
    extra = tmp_path / "extra.csv"
    extra.write_text("pid, used_gpu_memory [MiB]\n85690, 100 MiB, 7\n")
    with pytest.raises(ParseError, match=r"extra\.csv:2: row has 3 fields, header 2"):
        load_compute_apps(extra)


def test_a_run_maps_its_listing_by_its_inventory(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(DATA / "smi-8gpu-loop.csv", run / "gpu.csv")
    shutil.copy(LOOP, run / "apps.csv")
    loaded = load_run(run, cache=False)
    assert loaded.files["nvidia-smi-apps"] == [run / "apps.csv"]
    apps = loaded.compute_apps
    assert apps is not None and apps.height == 25
    assert apps.get_column("gpu").null_count() == 0  # from the trace's uuid column
    assert load_gpu_trace(run / "gpu.csv", cache=False).samples.get_column("gpu").n_unique() == 8
    shutil.copy(DATA / "list-8gpu.txt", run / "gpus.txt")
    listed = load_run(run, cache=False).compute_apps
    assert listed is not None and listed.get_column("gpu").equals(apps.get_column("gpu"))
    assert load_run(DATA.parent / "diagnose" / "tp8", cache=False).compute_apps is None
