"""nvidia-smi dmon, dcgmi dmon and dcgm-exporter: spot values and the same quantity, same column."""

from __future__ import annotations

from datetime import datetime

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError
from toolkit.load.gpu.trace import load_gpu_trace

DATA = TEST_DATA / "gpu"


def _row(trace, lineno: int) -> dict:
    return trace.samples.filter(pl.col("lineno") == lineno).row(0, named=True)


# ---------------------------------------------------------------------- nvidia-smi dmon
def test_dmon_mutc_with_date_and_time() -> None:
    trace = load_gpu_trace(DATA / "dmon-mutc-td.txt")
    row = _row(trace, 5)  # after the stray empty line
    assert row["ts"] == datetime(2024, 1, 4, 13, 54, 36)
    assert row["mem_used_mib"] == 74.0 and row["bar1_mb"] == 10.0 and row["ccpm_mb"] == 0.0
    assert row["pcie_rx_bytes_s"] == 217e6 and row["pcie_tx_bytes_s"] == 677e6  # MB/s → B/s
    assert row["mem_clock_mhz"] == 6250.0 and row["sm_clock_mhz"] == 1695.0  # mclk, pclk
    assert row["jpg_util_pct"] == 0.0 and row["ofa_util_pct"] == 0.0
    blank = trace.skipped.filter(pl.col("reason") == "blank line")
    assert blank.get_column("lineno").to_list() == [4]


def test_dmon_legacy_selection_with_dashes() -> None:
    trace = load_gpu_trace(DATA / "dmon-legacy-pucvmet.txt")
    row = _row(trace, 6)  # GPU 3, first round
    assert row["gpu"] == 3 and row["power_w"] == 86.0 and row["temp_c"] == 70.0
    assert row["util_pct"] == 18.0 and row["mem_used_mib"] == 11660.0
    assert row["pviol_pct"] == 0.0 and row["tviol_bool"] == 0.0 and row["pci_errs"] == 0.0
    assert row["sbecc_errs"] is None  # "-"
    counts = dict(trace.unavailable.select("field", "count").iter_rows())
    assert counts == {"sbecc": 8, "dbecc": 8}
    assert trace.samples.get_column("sample").to_list() == [0] * 4 + [1] * 4


def test_dmon_utilization_only_and_rounds() -> None:
    trace = load_gpu_trace(DATA / "dmon-u.txt", interval_s=1.0, start=datetime(2026, 5, 25, 21, 0))
    df = trace.samples
    assert df.get_column("util_pct").to_list() == [97.0, 44.0, 100.0, 41.0]
    assert df.get_column("ts").to_list()[-1] == datetime(2026, 5, 25, 21, 0, 1)


def test_dmon_time_only_new_driver_columns_and_repeated_header() -> None:
    trace = load_gpu_trace(DATA / "dmon-puc-t-repeated.txt")
    df = trace.samples
    assert df.get_column("temp_c").to_list()[:2] == [71.0, 63.0]  # gtemp → temp_c
    assert df.get_column("mem_temp_c").null_count() == 6  # mtemp "-"
    assert df.get_column("elapsed_s").to_list() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]  # midnight
    headers = trace.skipped.filter(pl.col("reason") == "header").get_column("lineno")
    assert headers.to_list() == [1, 2, 7, 8]


def test_dmon_row_that_does_not_fit_its_header(write_log) -> None:
    text = "# gpu    sm   mem\n# Idx     %     %\n    0    97    35\n    1    44\n"
    path = write_log(text)
    trace = load_gpu_trace(path)
    assert trace.samples.height == 1
    (row,) = trace.skipped.filter(pl.col("lineno") == 4).iter_rows(named=True)
    assert row["reason"] == "row has 2 of 3 fields"
    with pytest.raises(ParseError, match=r":4: row has 2 of 3 fields"):
        load_gpu_trace(path, strict=True)


# ---------------------------------------------------------------------- dcgmi dmon
def test_dcgmi_profiling_block_all_na_then_ratios() -> None:
    trace = load_gpu_trace(DATA / "dcgmi-prof-8gpu.txt", interval_s=1.0)
    df = trace.samples
    assert df.get_column("sample").max() == 2
    first = df.filter(pl.col("sample") == 0)
    assert first.get_column("sm_active").null_count() == 8
    row = _row(trace, 11)  # GPU 0, second block
    assert row["gr_engine_active"] == 0.981 and row["sm_active"] == 0.912
    assert row["tensor_active"] == 0.51 and row["dram_active"] == 0.598
    assert df.get_column("elapsed_s").max() == 2.0
    ending = trace.skipped.filter(pl.col("reason") == "end of capture").get_column("line")
    assert ending.to_list() == ["^C", "dmon was stopped due to receiving a signal"]
    assert trace.summary()[0]["problems"] == 0


def test_dcgmi_device_fields_land_in_the_nvidia_smi_columns() -> None:
    trace = load_gpu_trace(DATA / "dcgmi-device.txt")
    row = _row(trace, 3)
    assert row["util_pct"] == 97.0 and row["mem_util_pct"] == 31.0 and row["mem_used_mib"] == 78021
    assert row["power_w"] == 612.45 and row["temp_c"] == 61.0
    assert row["sm_clock_mhz"] == 1980.0 and row["mem_clock_mhz"] == 2619.0
    assert row["pcie_tx_bytes_s"] == 864034668.0  # bytes/s already


def test_dcgmi_wide_counters_kept_under_their_short_names() -> None:
    trace = load_gpu_trace(DATA / "dcgmi-nvlink-wide.txt")
    row = _row(trace, 4)
    assert row["nlxmitb"] == 27639705550710.0 and row["nlrcvb"] == 18445120764362.0


def test_dcgmi_old_header_not_watched_and_failure_line() -> None:
    trace = load_gpu_trace(DATA / "dcgmi-dcgm17.txt")
    assert trace.samples.get_column("sm_active").to_list() == [0.512, 0.498, 0.53, 0.501]
    assert trace.samples.get_column("tensor_active").null_count() == 4  # N/W
    assert trace.unavailable.row(0, named=True)["value"] == "N/W"
    with pytest.raises(ParseError, match=r":7: dcgmi message"):
        load_gpu_trace(DATA / "dcgmi-dcgm17.txt", strict=True)


# ---------------------------------------------------------------------- dcgm-exporter
def test_exporter_oldest_labels() -> None:
    trace = load_gpu_trace(DATA / "exporter-v1-labels.prom")
    gpu0 = trace.samples.filter(pl.col("gpu") == 0).row(0, named=True)
    assert gpu0["util_pct"] == 87.0 and gpu0["mem_used_mib"] == 11275.0
    assert gpu0["power_w"] == 58.124 and gpu0["sm_clock_mhz"] == 1380.0 and gpu0["temp_c"] == 45
    assert gpu0["xid_errors"] == 0.0  # unknown metric kept under its own name
    assert gpu0["name"] is None and gpu0["host"] is None


def test_exporter_two_scrapes_with_interval() -> None:
    start = datetime(2026, 5, 25, 21, 40)
    trace = load_gpu_trace(DATA / "exporter-2x-two-scrapes.prom", interval_s=15, start=start)
    df = trace.samples.sort("sample", "gpu")
    assert df.get_column("sample").to_list() == [0, 0, 1, 1]
    assert df.get_column("ts").to_list()[2] == datetime(2026, 5, 25, 21, 40, 15)
    assert df.get_column("host").unique().to_list() == ["r6i3n0"]
    assert df.get_column("name").unique().to_list() == ["Tesla V100-SXM2-32GB"]
    assert df.get_column("energy_mj").to_list()[0] == 129931554972.0
    assert df.get_column("power_w").to_list() == [298.116, 167.362, 296.004, 170.881]


def test_exporter_profiling_ratios_blank_and_scrape_times() -> None:
    trace = load_gpu_trace(DATA / "exporter-3x-prof-timed.prom")
    df = trace.samples.sort("sample", "gpu")
    assert df.get_column("ts").to_list()[2] == datetime(2026, 5, 25, 21, 40, 31)
    assert df.get_column("sm_active").to_list()[0] == 0.923411  # a ratio, not percent
    assert df.get_column("pci_bus_id").to_list()[1] == "00000000:28:00.0"
    assert df.get_column("driver_version").unique().to_list() == ["550.54.15"]
    assert df.get_column("pcie_tx_bytes_s").to_list() == [864034668.0, None] * 2  # DCGM blank
    assert trace.unavailable.get_column("count").to_list() == [2]


def test_exporter_mig_instances_are_separate_rows() -> None:
    trace = load_gpu_trace(DATA / "exporter-mig.prom")
    mig = trace.samples.filter(pl.col("gpu") == 2).sort("mig_instance")
    assert mig.get_column("mig_instance").to_list() == [1, 3, 4]
    assert mig.get_column("mig_profile").to_list() == ["2g.12gb", "1g.6gb", "1g.6gb"]
    assert mig.get_column("gr_engine_active").to_list() == [0.6112, 0.029399, 0.0]
    assert mig.get_column("mem_free_mib").to_list() == [1033.0, 2207.0, 5812.0]
    assert mig.get_column("pod").to_list() == ["vllm-7d9c-x2k", "triton-server-f7cb5d77-95xcf", ""]
    assert set(trace.samples.get_column("host")) == {"dcgm-exporter-wwwjh"}  # lowercase label


def test_exporter_pre_2020_lowercase_names() -> None:
    trace = load_gpu_trace(DATA / "exporter-old-lowercase.prom")
    row = trace.samples.filter(pl.col("gpu") == 1).row(0, named=True)
    assert row["util_pct"] == 98.0 and row["power_w"] == 249.02 and row["temp_c"] == 69.0
    assert row["sm_clock_mhz"] == 1530.0 and row["pcie_tx_bytes_s"] == 150990e3  # KB/s
    assert row["uuid"].startswith("GPU-02348a17")


def test_same_quantity_same_column_across_sources() -> None:
    paths = ["smi-8gpu-loop.csv", "dmon-u.txt", "dcgmi-device.txt", "exporter-2x-two-scrapes.prom"]
    trace = load_gpu_trace([DATA / p for p in paths])
    by_source = trace.samples.group_by("source").agg(pl.col("util_pct").drop_nulls().len())
    assert all(n > 0 for n in by_source.get_column("util_pct"))


def test_exporter_garbage_line_is_kept(write_log) -> None:
    text = (
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1"} 12\n'
        "curl: (7) Failed to connect to localhost port 9400\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-2" 13\n'
    )
    path = write_log(text)
    trace = load_gpu_trace(path)
    assert trace.samples.get_column("util_pct").to_list() == [12.0]
    reasons = dict(trace.skipped.select("lineno", "reason").iter_rows())
    assert reasons[4] == "not prometheus text" and reasons[5] == "not prometheus text"
    with pytest.raises(ParseError, match=":4: not prometheus text"):
        load_gpu_trace(path, strict=True)
