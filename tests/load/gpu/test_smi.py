"""nvidia-smi --query-gpu CSV: spot values of every variant (units, nounits, noheader, drivers)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError
from toolkit.load.gpu.smi import parse_fields
from toolkit.load.gpu.trace import load_gpu_trace
from toolkit.load.run_config import read_run_config

DATA = TEST_DATA / "gpu"


def _row(trace, lineno: int) -> dict:
    return trace.samples.filter(pl.col("lineno") == lineno).row(0, named=True)


def test_units_and_milliseconds() -> None:
    trace = load_gpu_trace(DATA / "smi-lms-single.csv")
    first = _row(trace, 2)
    assert first["ts"] == datetime(2024, 1, 16, 14, 44, 16, 977000)
    assert first["pstate"] == "P8"
    assert first["temp_c"] == 25.0  # temperature.gpu prints no unit
    assert first["mem_total_mib"] == 23028.0 and first["mem_free_mib"] == 22494.0
    last = _row(trace, 6)
    assert last["elapsed_s"] == pytest.approx(0.118)  # -lms jitter: 4 ms, then 105 ms


def test_eight_gpus_interleaved_with_names_uuids_and_bus_ids() -> None:
    trace = load_gpu_trace(DATA / "smi-8gpu-loop.csv")
    df = trace.samples
    assert df.get_column("gpu").to_list() == list(range(8)) * 3
    row = _row(trace, 6)  # iteration 0, GPU 4
    assert row["name"] == "NVIDIA H100 80GB HBM3"  # spaces inside a value
    assert row["uuid"].startswith("GPU-") and row["pci_bus_id"] == "00000000:9A:00.0"
    assert row["util_pct"] == 45.0 and row["power_w"] == 350.33
    assert row["sm_clock_mhz"] == 1815.0 and row["mem_clock_mhz"] == 2619.0
    assert row["power_limit_w"] == 700.0 and row["mem_total_mib"] == 81559.0
    # Rows of one iteration carry their own milliseconds.
    assert df.filter(pl.col("lineno") < 10).get_column("ts").n_unique() == 8


def test_nounits_keeps_header_units_and_bracketed_na() -> None:
    trace = load_gpu_trace(DATA / "smi-nounits.csv")
    row = _row(trace, 2)
    assert row["power_w"] == 176.98 and row["util_pct"] == 97.0 and row["sm_clock_mhz"] == 1965.0
    assert row["mem_temp_c"] is None  # bare N/A
    assert _row(trace, 5)["util_pct"] is None  # [N/A]
    missing = {
        (r["field"], r["value"]): r["count"] for r in trace.unavailable.iter_rows(named=True)
    }
    assert missing == {("temperature.memory", "N/A"): 4, ("utilization.gpu [%]", "[N/A]"): 1}
    assert set(trace.unavailable.get_column("kind")) == {"unsupported"}


def test_noheader_needs_the_field_list() -> None:
    with pytest.raises(ParseError, match="without a header") as e:
        load_gpu_trace(DATA / "smi-noheader.csv")
    assert e.value.lineno == 1
    trace = load_gpu_trace(
        DATA / "smi-noheader.csv", fields="timestamp,index,utilization.gpu,memory.used,power.draw"
    )
    row = _row(trace, 1)
    assert row["ts"] == datetime(2026, 5, 25, 21, 40, 21, 107000)
    assert row["gpu"] == 0 and row["util_pct"] == 98.0 and row["mem_used_mib"] == 81234.0


def test_noheader_fields_from_run_toml(tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text(
        '[gpu_trace]\nfields = "index, utilization.gpu, memory.used, power.draw"\n'
    )
    config = read_run_config(tmp_path)
    trace = load_gpu_trace(DATA / "smi-noheader-nounits.csv", fields=config.gpu_trace_fields)
    assert trace.samples.get_column("power_w").to_list() == [612.45, 345.67, 609.99, 331.27]
    assert trace.samples.get_column("ts").null_count() == 4  # the query had no timestamp


def test_old_driver_not_supported_throttle_alias_and_crlf() -> None:
    trace = load_gpu_trace(DATA / "smi-old-driver-crlf.csv")
    gpu0, gpu1 = trace.samples.sort("gpu").iter_rows(named=True)
    assert gpu0["power_w"] is None and gpu1["util_pct"] is None  # [Not Supported]
    assert gpu0["fan_pct"] == 23.0 and gpu1["power_w"] == 9.34
    # clocks_throttle_reasons.* is the old name of clocks_event_reasons.*
    assert gpu0["clock_event_reasons"] == "0x0000000000000001"
    # the header printed canonical names for the aliases clocks.gr / clocks.mem
    assert gpu1["gr_clock_mhz"] == 1404.0 and gpu1["mem_clock_mhz"] == 5705.0
    assert trace.unavailable.get_column("value").to_list() == ["[Not Supported]"] * 2


def test_mixed_models_without_index() -> None:
    trace = load_gpu_trace(DATA / "smi-mixed-models.csv")
    assert trace.samples.get_column("name").to_list() == ["GeForce GTX 1080 Ti", "GeForce GTX 1050"]
    assert trace.samples.get_column("gpu").null_count() == 2  # never guessed from position
    assert trace.summary()[0]["gpus"] == 2


def test_flags_and_unknown_fields_are_kept() -> None:
    trace = load_gpu_trace(DATA / "smi-flags.csv")
    row = _row(trace, 2)
    assert row["persistence_mode"] == "Enabled" and row["display_mode"] == "Disabled"
    assert row["driver_version"] == "550.54.15"
    assert row["pcie_link_gen"] == 5.0 and row["pcie_link_width"] == 16.0
    assert row["power_avg_w"] == 402.15 and row["power_instant_w"] == 455.9
    assert row["mem_reserved_mib"] == 529.0


def test_header_aliases_and_unknown_names() -> None:
    fields = parse_fields(
        ["gpu_name", "clocks.sm [MHz]", "fan.speed [%]", "ecc.errors.corrected.volatile.total"]
    )
    assert [f.column for f in fields] == [
        "name",
        "sm_clock_mhz",
        "fan_pct",
        "ecc_errors_corrected_volatile_total",
    ]
    assert [f.kind for f in fields] == ["str", "float", "float", "str"]


def test_clock_offset_shifts_timestamps() -> None:
    plain = load_gpu_trace(DATA / "smi-8gpu-loop.csv").samples.get_column("ts")
    shifted = load_gpu_trace(DATA / "smi-8gpu-loop.csv", clock_offset_s=-7200.5).samples
    delta = (plain - shifted.get_column("ts")).dt.total_milliseconds().unique().to_list()
    assert delta == [7_200_500]
    assert shifted.get_column("elapsed_s").max() == pytest.approx(0.214)


def test_declared_columns_and_types() -> None:
    from toolkit.schema.gpu import SAMPLES

    df = load_gpu_trace(DATA / "smi-flags.csv").samples
    assert df.columns[: len(SAMPLES)] == SAMPLES.names()
    assert dict(list(df.schema.items())[: len(SAMPLES)]) == dict(SAMPLES)
