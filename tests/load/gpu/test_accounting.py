"""Every physical line of a GPU trace is a sample line or a skipped line with its reason, at its
own line number whatever the terminators; malformed headers are skipped rows (or a ParseError
in strict mode), never a polars exception."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers.fuzz import count_lines
from helpers.gpu_fixtures import EXPECTED
from helpers.gpu_fixtures import GPU_DATA as DATA

from toolkit.errors import ParseError
from toolkit.load.gpu.trace import load_gpu_trace

DMON = (
    "#Date       Time        gpu     sm    mem\n"
    "#YYYYMMDD   HH:MM:SS    Idx      %      %\n"
    " 20240104   13:54:35      0      6      1\n"
    " 20240104   13:54:36      0      7      2\n"
)


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _reasons(trace) -> dict[int, str]:
    return dict(trace.skipped.select("lineno", "reason").iter_rows())


def _accounted(trace, data: bytes) -> None:
    (source,) = trace.sources
    assert source["lines"] == count_lines(data)
    assert source["sample_lines"] + trace.skipped.height == source["lines"]


def test_dmon_rows_whose_date_or_time_does_not_parse(tmp_path: Path) -> None:
    text = (
        DMON
        + " 2024XX04   13:54:37      0      8      3\n 20240104   25:99:00      0      9      4\n"
    )
    path = _write(tmp_path, "dmon.txt", text)
    trace = load_gpu_trace(path)
    assert trace.samples.get_column("lineno").to_list() == [3, 4]
    assert _reasons(trace)[5] == _reasons(trace)[6] == "date or time does not parse"
    _accounted(trace, text.encode())
    with pytest.raises(ParseError, match=r"dmon.txt:5: date or time does not parse"):
        load_gpu_trace(path, strict=True)


def test_dmon_time_only_and_gpu_index_that_do_not_parse(tmp_path: Path) -> None:
    text = "# gpu  sm\n# Idx   %\n    0  10\n    x  11\n"
    trace = load_gpu_trace(_write(tmp_path, "dmon.txt", text))
    assert _reasons(trace)[4] == "gpu index does not parse"
    text = "#Time gpu  sm\n#HH:MM:SS Idx %\n10:00:00 0 10\n99:00:00 0 11\n"
    trace = load_gpu_trace(_write(tmp_path, "dmon-t.txt", text))
    assert _reasons(trace)[4] == "date or time does not parse"


@pytest.mark.parametrize("names", ["gpu sm sm", "gpu gpu sm", "Date Time gpu sm date"])
def test_dmon_header_with_a_repeated_column(tmp_path: Path, names: str) -> None:
    n = len(names.split())
    text = f"#{names}\n" + " ".join(["1"] * n) + "\n" + " ".join(["2"] * n) + "\n"
    path = _write(tmp_path, "dmon.txt", text)
    trace = load_gpu_trace(path)
    assert trace.samples.height == 0
    reasons = _reasons(trace)
    assert reasons[1].startswith("header repeats column")
    assert reasons[2] == reasons[3] and reasons[2].startswith("under a header that repeats")
    _accounted(trace, text.encode())
    with pytest.raises(ParseError, match=r"dmon.txt:1: header repeats column"):
        load_gpu_trace(path, strict=True)


def test_dmon_columns_named_like_the_readers_own(tmp_path: Path) -> None:
    text = "# gpu lineno source sample\n# Idx - - -\n 0 1 2 3\n"
    trace = load_gpu_trace(_write(tmp_path, "dmon.txt", text))
    assert trace.samples.get_column("lineno").to_list() == [3]
    assert {"lineno_2", "source_2", "sample_2"} <= set(trace.samples.columns)


def test_smi_header_wrapped_over_two_lines(tmp_path: Path) -> None:
    text = (
        "timestamp, index, utilization.gpu [%], memory.used\n"
        " [MiB], power.draw [W]\n"
        "2026/05/25 21:40:21.107, 0, 98 %, 81234 MiB, 612.45 W\n"
    )
    path = _write(tmp_path, "smi.csv", text)
    trace = load_gpu_trace(path)
    reasons = _reasons(trace)
    assert reasons[1] == "header" and 2 in reasons and 3 in reasons
    _accounted(trace, text.encode())
    with pytest.raises(ParseError, match=r"smi.csv:2: "):
        load_gpu_trace(path, strict=True)


def test_smi_rows_longer_than_the_header(tmp_path: Path) -> None:
    source = (DATA / "smi-nounits.csv").read_text().splitlines()
    text = "\n".join([source[0].split(", index")[0] + ", index, utilization.gpu [%]", *source[1:]])
    path = _write(tmp_path, "smi.csv", text + "\n")
    trace = load_gpu_trace(path)
    assert trace.samples.height == 0
    assert set(_reasons(trace).values()) == {"header", "row has 9 fields, the header 3"}
    _accounted(trace, (text + "\n").encode())
    with pytest.raises(ParseError, match=r"smi.csv:2: row has 9 fields"):
        load_gpu_trace(path, strict=True)


def test_smi_blank_lines_before_the_header(tmp_path: Path) -> None:
    text = "\n" * 150 + "timestamp, index, utilization.gpu [%]\n2026/05/25 21:40:21.107, 0, 98 %\n"
    trace = load_gpu_trace(_write(tmp_path, "smi.csv", text))
    assert _reasons(trace)[151] == "header"
    assert trace.samples.get_column("lineno").to_list() == [152]
    _accounted(trace, text.encode())


TERMINATORS = {
    "vt": b"\x0b",
    "fs": b"\x1c",
    "ls": "\u2028".encode(),
    "lone-cr": b"\r",
    "nel": "\x85".encode(),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("odd", sorted(TERMINATORS))
def test_line_numbers_are_physical(tmp_path: Path, name: str, odd: str) -> None:
    """A byte ``str.splitlines`` splits on, put at the start of a blank line and of the last
    line, moves no line number: the samples keep those of the clean file."""
    clean = (DATA / name).read_bytes()
    fields = (
        "timestamp,index,utilization.gpu,memory.used,power.draw" if "noheader" in name else None
    )
    if name == "smi-noheader-nounits.csv":
        fields = "index,utilization.gpu,memory.used,power.draw"
    want = load_gpu_trace(_write(tmp_path, "clean", clean), fields=fields)
    body = clean.rstrip(b"\r\n")
    cut = body.rfind(b"\n") + 1
    data = body[:cut] + b"\n" + TERMINATORS[odd] + b"\n" + body[cut:] + b"\r\r\n"
    got = load_gpu_trace(_write(tmp_path, "odd", data), fields=fields)
    _accounted(got, data)
    kept = got.samples.get_column("lineno").to_list()
    before = [n for n in want.samples.get_column("lineno").to_list() if n <= cut_line(body)]
    assert kept[: len(before)] == before


def cut_line(body: bytes) -> int:
    """Lines before the last line of ``body``."""
    return body.count(b"\n")


def test_exporter_counts_every_line(tmp_path: Path) -> None:
    text = (DATA / "exporter-2x-two-scrapes.prom").read_bytes()
    data = text.replace(b"# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n", b"\x0b\r\n", 1)
    data = b"# HELP DCGM_FI_DEV_XID only a help line\n" + data
    trace = load_gpu_trace(_write(tmp_path, "e.prom", data))
    _accounted(trace, data)
    assert trace.samples.height == 4
    assert trace.skipped.filter(pl.col("lineno") == 1).height == 1
