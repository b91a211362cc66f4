"""MIG: an instance is a dimension of its GPU (``mig_instance``, ``mig_profile``, ``entity``),
never another GPU; GPU counts stay per physical GPU whatever tool listed the instances."""

from __future__ import annotations

import polars as pl
from helpers.gpu_fixtures import GPU_DATA as DATA

from toolkit.load.gpu.samples import gpu_count, mig_count
from toolkit.load.gpu.trace import load_gpu_list, load_gpu_trace, summarize_gpu_file
from toolkit.schema.gpu import SAMPLES


def test_exporter_instances_are_rows_of_their_gpu() -> None:
    trace = load_gpu_trace(DATA / "exporter-mig.prom", cache=False)
    (summary,) = trace.summary()
    assert (summary["gpus"], summary["mig_instances"], summary["samples"]) == (2, 3, 4)
    samples = trace.samples
    parts = samples.filter(pl.col("mig_instance").is_not_null())
    assert parts.get_column("gpu").unique().to_list() == [2]
    whole = samples.filter(pl.col("mig_instance").is_null())
    assert whole.get_column("gpu").to_list() == [1]
    assert "entity" not in summary["metrics"]


def test_dcgmi_instance_rows_are_kept_with_their_entity_and_noted() -> None:
    trace = load_gpu_trace(DATA / "dcgmi-mig.txt", interval_s=1.0, cache=False)
    (summary,) = trace.summary()
    assert (summary["gpus"], summary["mig_instances"], summary["samples"]) == (1, 2, 8)
    assert summary["sample_lines"] + summary["skipped"] == summary["lines"] == 10
    first = trace.samples.filter(pl.col("sample") == 0)
    assert first.get_column("entity").to_list() == [None, "GPU-I 1", "GPU-I 2", "GPU-CI 0"]
    assert first.get_column("gpu").to_list() == [0, None, None, None]
    assert first.get_column("mig_instance").to_list() == [None, 1, 2, None]
    assert first.get_column("sm_active").to_list() == [0.412, 0.327, 0.085, 0.327]
    assert first.get_column("mem_used_mib").to_list()[3] is None  # N/A for a compute instance
    assert summary["notes"] == [
        "6 rows of MIG instances (GPU-I, GPU-CI) name no GPU (dcgmi dmon does not print which "
        "GPU an instance is part of): kept with their entity, counted as no GPU"
    ]
    assert "entity" not in summary["metrics"] and "entity" in SAMPLES


def test_smi_on_mig_gpus_reports_no_utilization() -> None:
    trace = load_gpu_trace(DATA / "smi-mig.csv", cache=False)
    (summary,) = trace.summary()
    assert (summary["gpus"], summary["samples"], summary["unavailable"]) == (2, 4, 8)
    assert trace.samples.get_column("util_pct").null_count() == 4
    assert trace.samples.get_column("mig_mode_current").unique().to_list() == ["Enabled"]
    assert summary["notes"] == [
        "MIG is enabled (GPU 0, 1): nvidia-smi reports no utilization under MIG; DCGM's "
        "GR_ENGINE_ACTIVE (dcgmi dmon -e 1001, dcgm-exporter) measures a MIG GPU's load"
    ]
    flags = load_gpu_trace(DATA / "smi-flags.csv", cache=False).summary()[0]
    assert not any("MIG" in n for n in flags["notes"])


def test_listing_counts_gpus_not_devices() -> None:
    assert summarize_gpu_file(DATA / "list-mig.txt") | {"path": ""} == {
        "path": "",
        "format": "nvidia-smi-list",
        "gpus": 2,
        "mig_devices": 5,
    }
    listing = load_gpu_list(DATA / "list-mig.txt")
    assert listing.get_column("gpu").to_list() == [0, 0, 0, 0, 1, 1, 1]


def test_counts_by_the_best_identity() -> None:
    frame = pl.DataFrame(
        {
            "gpu": [0, 0, 0, None, 1],
            "mig_instance": [None, 1, 2, 7, None],
            "uuid": ["GPU-a", "GPU-a", "GPU-a", None, "GPU-b"],
        },
        schema_overrides={"gpu": pl.Int32, "mig_instance": pl.Int32},
    )
    assert gpu_count(frame) == 2
    assert mig_count(frame) == 3
    by_uuid = frame.drop("gpu")
    assert gpu_count(by_uuid) == 2  # the instance row without a UUID names no GPU
    assert gpu_count(frame.filter(pl.col("gpu").is_null()).drop("uuid")) == 1  # a lower bound
