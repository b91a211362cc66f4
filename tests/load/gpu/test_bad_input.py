"""Bad GPU traces: clear errors in strict mode, counted skips with line numbers otherwise."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.errors import ParseError, ToolkitError
from toolkit.load.gpu.trace import load_gpu_trace

BAD = TEST_DATA / "gpu" / "bad"


def test_half_written_last_row() -> None:
    trace = load_gpu_trace(BAD / "cut-last-row.csv")
    assert trace.samples.height == 3
    header, row = trace.skipped.iter_rows(named=True)
    assert (header["lineno"], header["reason"]) == (1, "header")
    assert row["lineno"] == 5 and row["reason"].startswith("cut row: 4 of 5 fields")
    assert row["line"].endswith("41 %, 812")
    assert trace.summary()[0]["problems"] == 1
    with pytest.raises(ParseError, match=r"cut-last-row.csv:5: cut row") as e:
        load_gpu_trace(BAD / "cut-last-row.csv", strict=True)
    assert e.value.lineno == 5 and "41 %, 812" in str(e.value)


def test_driver_errors_are_counted_not_dropped() -> None:
    trace = load_gpu_trace(BAD / "unknown-error.csv")
    assert trace.samples.height == 4  # the rows stay: timestamp and index are fine
    assert trace.samples.filter(pl.col("lineno") == 3).row(0, named=True)["mem_used_mib"] == 81230
    errors = trace.unavailable.filter(pl.col("kind") == "error")
    counts = {(r["field"], r["value"]): r["count"] for r in errors.iter_rows(named=True)}
    assert counts[("utilization.gpu [%]", "[Unknown Error]")] == 1
    assert counts[("temperature.gpu", "[GPU is lost]")] == 1
    assert sum(counts.values()) == 7
    first = errors.sort("first_lineno").row(0, named=True)
    assert first["first_lineno"] == 3
    with pytest.raises(
        ParseError, match=r"unknown-error.csv:3: field .* holds '\[Unknown Error\]'"
    ):
        load_gpu_trace(BAD / "unknown-error.csv", strict=True)


def test_header_repeated_mid_file() -> None:
    trace = load_gpu_trace(BAD / "repeated-header.csv")
    assert trace.samples.get_column("lineno").to_list() == [2, 3, 6, 7]
    reasons = dict(trace.skipped.select("lineno", "reason").iter_rows())
    assert reasons == {1: "header", 4: "blank line", 5: "repeated header"}
    assert trace.summary()[0]["problems"] == 0
    assert load_gpu_trace(BAD / "repeated-header.csv", strict=True).samples.height == 4


def test_header_only() -> None:
    trace = load_gpu_trace(BAD / "header-only.csv")
    assert trace.samples.height == 0
    (summary,) = trace.summary()
    assert summary["samples"] == 0 and summary["gpus"] == 0 and summary["lines"] == 1
    assert "only a header" in summary["notes"][0]


def test_extra_fields_and_unreadable_index() -> None:
    trace = load_gpu_trace(BAD / "extra-fields.csv")
    assert trace.samples.get_column("lineno").to_list() == [2, 5]
    reasons = dict(trace.skipped.select("lineno", "reason").iter_rows())
    assert reasons[3] == "row has 5 fields, the header 4"
    assert reasons[4] == "no readable timestamp or GPU index"


def test_mixed_models_and_odd_values_keep_their_rows(write_log) -> None:
    text = (
        "index, name, power.draw [W]\n"
        "0, NVIDIA H100 80GB HBM3, 612.45 W\n"
        "1, NVIDIA A100-SXM4-80GB, 75 watts\n"
    )
    trace = load_gpu_trace(write_log(text))
    assert trace.samples.get_column("name").to_list()[1] == "NVIDIA A100-SXM4-80GB"
    (row,) = trace.unavailable.iter_rows(named=True)
    assert (row["value"], row["kind"], row["first_lineno"]) == ("75 watts", "unreadable", 3)


def test_empty_and_missing_files(write_log, tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="no such file"):
        load_gpu_trace(tmp_path / "nope.csv")
    with pytest.raises(ToolkitError, match="no gpu trace files"):
        load_gpu_trace([])
    with pytest.raises(ToolkitError):
        load_gpu_trace(write_log(""))


def test_binary_garbage_is_not_a_trace(write_log) -> None:
    from toolkit.errors import UnknownFormat

    with pytest.raises(UnknownFormat):
        load_gpu_trace(write_log(bytes(range(256)) * 4))


def test_another_query_appended_mid_file() -> None:
    trace = load_gpu_trace(BAD / "two-queries.csv")
    df = trace.samples
    assert df.get_column("util_pct").to_list() == [98.0, 44.0, 12.0, 10.0]  # not swapped
    assert df.get_column("power_w").to_list() == [612.45, 345.67, 120.0, 118.31]
    assert df.get_column("temp_c").to_list() == [None, None, 41.0, 40.0]
    assert dict(trace.skipped.select("lineno", "reason").iter_rows()) == {1: "header", 4: "header"}
    assert trace.summary()[0]["lines"] == 6


def test_an_invalid_byte_keeps_every_row(tmp_path: Path) -> None:
    """A trace holding a byte that is not UTF-8 (a cut write, a stray binary dump) is read
    whole, the byte replaced; its rows keep their values."""
    path = tmp_path / "gpu.csv"
    path.write_bytes(
        b"timestamp, index, utilization.gpu [%], memory.used [MiB]\n"
        b"2026/05/25 21:40:21.007, 0, 76 %, 81047 MiB\n"
        b"2026/05/25 21:40:21.107, 0, 7\xff %, 81047 MiB\n"
        b"2026/05/25 21:40:21.207, 0, 58 %, 81047 MiB\n"
    )
    trace = load_gpu_trace(path)
    assert trace.samples.height == 3
    assert trace.samples["util_pct"].to_list() == [76.0, None, 58.0]
    assert trace.samples["mem_used_mib"].to_list() == [81047.0] * 3
    unreadable = trace.unavailable.row(0, named=True)
    assert (unreadable["first_lineno"], unreadable["count"]) == (3, 1)
