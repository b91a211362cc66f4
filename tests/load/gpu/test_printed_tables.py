"""GPU traces pasted as tables printed for people: a query CSV re-printed by ``column -t``, and
the default ``nvidia-smi`` table (once, or every ``-l N`` seconds). Both load as traces and say
in a caveat that the table was re-printed or printed for people."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA
from helpers.gpu_fixtures import GPU_DATA as DATA
from hypothesis import given
from hypothesis import strategies as st

from toolkit.cli.main import main
from toolkit.errors import ParseError
from toolkit.load.gpu.reprint import as_csv_line
from toolkit.load.gpu.trace import load_gpu_trace, sniff_gpu_format, summarize_gpu_file
from toolkit.load.run import load_run
from toolkit.load.sniff import sniff

PADDED = DATA / "smi-column-t-s.txt"
SPLIT = DATA / "smi-column-t.txt"
LOOP = DATA / "smi-table-l1-2gpu.txt"
OLD = DATA / "smi-table-old-untimed.txt"
NEW_FORMATS = {"nvidia-smi-csv-reprinted", "nvidia-smi-table"}


# ---------------------------------------------------------------- column -t re-prints
@pytest.mark.parametrize("path", [PADDED, SPLIT], ids=["column -t -s,", "column -t"])
def test_a_reprinted_query_reads_as_the_csv(path: Path) -> None:
    trace = load_gpu_trace(path, cache=False)
    s = trace.samples
    assert s["gpu"].to_list() == [0, 1, 0, 1]
    assert set(s["name"]) == {"NVIDIA H100 80GB HBM3"}  # single spaces stay in the value
    assert s["ts"][1] == datetime(2026, 1, 5, 10, 0, 0, 2000)  # the milliseconds kept
    assert s["util_pct"].to_list() == [50.0, 7.0, 100.0, None]
    assert s["mem_used_mib"].to_list() == [1000.0, 1000.0, 78000.0, 78011.0]
    assert s["power_w"][0] == pytest.approx(312.45)
    assert s["temp_c"].to_list() == [41.0, 38.0, 44.0, 45.0]
    cell = trace.unavailable.row(0, named=True)
    assert (cell["value"], cell["kind"], cell["count"]) == ("[N/A]", "unsupported", 1)
    # the header is skipped as printed, not as rewritten
    (header,) = trace.skipped.rows(named=True)
    assert header["reason"] == "header"
    assert header["line"] == path.read_text().splitlines()[0]


def test_a_crlf_reprint_reads_the_same(tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    path.write_bytes(PADDED.read_bytes().replace(b"\n", b"\r\n"))
    crlf = load_gpu_trace(path, cache=False).samples.drop("source")
    assert crlf.equals(load_gpu_trace(PADDED, cache=False).samples.drop("source"))


def test_a_reprint_is_a_caveat_in_parse_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "--json", "--no-cache", str(PADDED)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert entry["format"] == "nvidia-smi-csv-reprinted"
    (caveat,) = entry["caveats"]
    assert caveat["kind"] == "reprinted-table" and caveat["affects"] == "gpu_busy"
    assert caveat["count"] == entry["samples"] == 4
    assert "column -t" in caveat["detail"]


_CELL = st.from_regex(r"[A-Za-z0-9.:/\[\]%-]{1,6}( [A-Za-z0-9.:/%-]{1,6}){0,2}", fullmatch=True)


@given(st.lists(st.lists(_CELL, min_size=2, max_size=5), min_size=1, max_size=4))
def test_padded_columns_give_the_csv_back(rows: list[list[str]]) -> None:
    width = min(len(r) for r in rows)
    rows = [r[:width] for r in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(width)]
    for cells in rows:  # what column -t -s, prints: each field padded, two spaces between
        padded = "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        assert as_csv_line(padded) == ", ".join(cells)
        split = "  ".join(", ".join(cells).split(" "))  # plain column -t: every space a break
        assert as_csv_line(split) == ", ".join(cells)


def test_a_padded_process_list_is_not_claimed_as_a_gpu_query(tmp_path: Path) -> None:
    apps = (DATA / "apps-8gpu.csv").read_text().splitlines()
    path = tmp_path / "apps.txt"
    path.write_text("\n".join("   ".join(c.strip() for c in ln.split(",")) for ln in apps) + "\n")
    assert sniff_gpu_format(path) is None


# ---------------------------------------------------------------- the default table
def test_each_print_of_nvidia_smi_l_is_one_sample_per_gpu() -> None:
    trace = load_gpu_trace(LOOP, cache=False)
    s = trace.samples
    assert s["sample"].to_list() == [0, 0, 1, 1, 2, 2]
    assert s["gpu"].to_list() == [0, 1, 0, 1, 0, 1]
    assert s["ts"].unique().sort().to_list() == [
        datetime(2026, 1, 5, 10, 0, sec) for sec in (0, 1, 2)
    ]
    assert s["elapsed_s"].to_list() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]
    assert set(s["name"]) == {"NVIDIA H100 80GB HBM3"}
    assert s["pci_bus_id"][:2].to_list() == ["00000000:18:00.0", "00000000:2A:00.0"]
    assert s["util_pct"].to_list() == [0.0, 0.0, 100.0, 97.0, 64.0, 21.0]
    assert s["power_w"].to_list() == [70.0, 71.0, 612.0, 598.0, 455.0, 301.0]
    assert set(s["power_limit_w"]) == {700.0}
    assert s["mem_used_mib"][2] == 77990.0 and set(s["mem_total_mib"]) == {81559.0}
    assert s["temp_c"].to_list() == [34.0, 36.0, 51.0, 49.0, 53.0, 50.0]
    assert set(s["pstate"]) == {"P0"}
    # the fan prints N/A on these boards: unsupported, not a problem
    (fan,) = trace.unavailable.rows(named=True)
    assert (fan["field"], fan["value"], fan["kind"]) == ("Fan", "N/A", "unsupported")
    assert fan["count"] == 6
    (summary,) = trace.summary()
    assert summary["problems"] == 0 and summary["notes"] == []
    assert summary["sample_lines"] + summary["skipped"] == summary["lines"]
    reasons = set(trace.skipped["reason"])
    assert reasons == {"table frame", "print time", "blank line"}


def test_the_old_narrow_table_without_a_date_is_untimed() -> None:
    trace = load_gpu_trace(OLD, cache=False)
    s = trace.samples
    assert s["gpu"].to_list() == [0, 1, 2]
    assert s["name"].to_list() == ["NVIDIA A100-SXM...", "NVIDIA A100-SXM...", "NVIDIA GeForce ..."]
    assert s["ts"].null_count() == 3 and s["sample"].to_list() == [0, 0, 0]
    assert s["power_w"].to_list() == [61.0, None, 150.0]
    assert s["fan_pct"].to_list() == [None, None, 30.0]
    assert s["util_pct"].to_list() == [0.0, 87.0, 98.0]
    assert s["mem_used_mib"].to_list() == [0.0, 38021.0, 10000.0]
    (summary,) = trace.summary()
    assert any("untimed" in n for n in summary["notes"])
    (caveat,) = summary["caveats"]
    assert caveat["kind"] == "default-table" and "untimed" in caveat["detail"]
    power = trace.unavailable.filter(pl.col("field") == "Pwr:Usage").row(0, named=True)
    assert (power["value"], power["kind"]) == ("N/A", "unsupported")


def test_untimed_prints_are_placed_by_the_interval(tmp_path: Path) -> None:
    text = LOOP.read_text().splitlines(keepends=True)
    path = tmp_path / "no-dates.txt"
    path.write_text("".join(ln for ln in text if not ln.startswith("Mon Jan")))
    trace = load_gpu_trace(path, interval_s=1.0, cache=False)
    assert trace.samples["ts"].null_count() == 6
    assert trace.samples["elapsed_s"].to_list() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]


def test_a_windows_table_names_the_driver_model(tmp_path: Path) -> None:
    text = LOOP.read_text().replace("Persistence-M", "     TCC/WDDM")
    path = tmp_path / "windows.txt"
    path.write_text(text.replace("          On  |", "        WDDM  |"))
    assert sniff_gpu_format(path) == "nvidia-smi-table"
    trace = load_gpu_trace(path, cache=False)
    assert trace.samples.height == 6 and trace.summary()[0]["problems"] == 0


def test_the_default_table_is_a_caveat_in_parse_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "--json", "--no-cache", str(LOOP)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["files"]
    assert (entry["format"], entry["gpus"], entry["samples"]) == ("nvidia-smi-table", 2, 6)
    (caveat,) = entry["caveats"]
    assert caveat["kind"] == "default-table" and caveat["affects"] == "gpu_busy"
    assert "3 print(s)" in caveat["detail"] and "1 s apart" in caveat["detail"]


def test_a_cut_print_is_a_problem_and_strict_mode_stops_there(tmp_path: Path) -> None:
    lines = LOOP.read_text().splitlines(keepends=True)
    path = tmp_path / "cut.txt"
    cut = next(i for i, ln in enumerate(lines) if ln.startswith("|   1  NVIDIA"))
    path.write_text("".join(lines[: cut + 1]))
    entry = summarize_gpu_file(path)
    assert entry["samples"] == 1 and entry["problems"] == 1
    assert entry["first_problems"][0]["lineno"] == cut + 1
    with pytest.raises(ParseError, match="second row"):
        load_gpu_trace(path, strict=True, cache=False)


def test_a_run_directory_reads_the_table(tmp_path: Path) -> None:
    shutil.copy(LOOP, tmp_path / "smi.log")
    run = load_run(tmp_path)
    assert run.gpu is not None and run.gpu.samples.height == 6


def test_a_run_notes_an_untimed_table(tmp_path: Path) -> None:
    shutil.copy(OLD, tmp_path / "smi.txt")
    run = load_run(tmp_path)
    assert run.untimed_gpu_files == [str(tmp_path / "smi.txt")]
    (note,) = [m for m in run.mismatches if m["files"] == "smi.txt"]
    assert "nvidia-smi table pasted without its date lines" in note["detail"]


# ---------------------------------------------------------------- claiming nothing else
def test_no_other_test_file_is_claimed() -> None:
    mine = {PADDED, SPLIT, LOOP, OLD}
    for path in sorted(TEST_DATA.rglob("*")):
        if path.is_file() and path not in mine and path.suffix not in (".gz", ".parquet"):
            try:
                fmt = sniff(path)
            except Exception:  # unreadable fixtures (damaged on purpose) say nothing here
                continue
            assert fmt not in NEW_FORMATS, path


@pytest.mark.parametrize(
    "text",
    [
        "timestamp, index, utilization.gpu [%]\n2026/01/05 10:00:00.000, 0, 5 %\n",
        "==============NVSMI LOG==============\n\nTimestamp   : Mon Jan  5 10:00:00 2026\n",
        "Mon Jan  5 10:00:00 2026\n[2026-01-05 10:00:00] Decode batch. #running-req: 1\n",
        "name  value\nfoo  1\n",
    ],
    ids=["plain csv", "nvidia-smi -q", "a log after a date", "a padded table of other names"],
)
def test_other_text_is_not_a_printed_gpu_table(text: str, tmp_path: Path) -> None:
    path = tmp_path / "f.txt"
    path.write_text(text)
    assert sniff_gpu_format(path) not in NEW_FORMATS
