"""Property tests: generated nvidia-smi CSV and dmon traces read back exactly; cut files never
lose a line or raise anything but ParseError."""

from __future__ import annotations

from datetime import datetime, timedelta

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import ParseError, UnknownFormat
from toolkit.load.gpu.trace import load_gpu_trace

SETTINGS = settings(max_examples=30, deadline=None)
T0 = datetime(2026, 5, 25, 21, 40, 21)

# query name → (header as printed, unit, column, value strategy)
CSV_FIELDS = {
    "utilization.gpu": ("utilization.gpu [%]", "%", "util_pct", st.integers(0, 100)),
    "memory.used": ("memory.used [MiB]", "MiB", "mem_used_mib", st.integers(0, 81920)),
    "power.draw": ("power.draw [W]", "W", "power_w", st.integers(0, 70000)),  # centiwatts
    "clocks.sm": ("clocks.current.sm [MHz]", "MHz", "sm_clock_mhz", st.integers(0, 2000)),
    "temperature.gpu": ("temperature.gpu", None, "temp_c", st.integers(20, 95)),
}
UNAVAILABLE = ["[N/A]", "[Not Supported]", "N/A"]


def _cell(name: str, value: int, units: bool) -> tuple[str, float]:
    unit = CSV_FIELDS[name][1]
    number = f"{value // 100}.{value % 100:02d}" if name == "power.draw" else str(value)
    real = value / 100 if name == "power.draw" else float(value)
    return (f"{number} {unit}" if units and unit else number), real


@st.composite
def csv_traces(draw):
    names = draw(st.lists(st.sampled_from(sorted(CSV_FIELDS)), min_size=1, max_size=5, unique=True))
    gpus = draw(st.integers(1, 8))
    rounds = draw(st.integers(1, 6))
    units = draw(st.booleans())
    header = draw(st.booleans())
    rows, expected = [], []
    for r in range(rounds):
        for g in range(gpus):
            ts = T0 + timedelta(milliseconds=100 * r + 2 * g)
            cells = [ts.strftime("%Y/%m/%d %H:%M:%S.") + f"{ts.microsecond // 1000:03d}", str(g)]
            values = {}
            for name in names:
                if draw(st.integers(0, 9)) == 0:
                    cells.append(draw(st.sampled_from(UNAVAILABLE)))
                    values[CSV_FIELDS[name][2]] = None
                else:
                    text, real = _cell(name, draw(CSV_FIELDS[name][3]), units)
                    cells.append(text)
                    values[CSV_FIELDS[name][2]] = real
            rows.append(", ".join(cells))
            expected.append({"ts": ts, "gpu": g, **values})
    head = ", ".join(["timestamp", "index", *(CSV_FIELDS[n][0] for n in names)])
    text = "\n".join(([head] if header else []) + rows) + "\n"
    return text, ["timestamp", "index", *names], header, expected


@SETTINGS
@given(csv_traces())
def test_csv_reads_back_exactly(write_log, trace) -> None:
    text, fields, header, expected = trace
    path = write_log(text, "trace.csv")
    loaded = load_gpu_trace(path, fields=None if header else fields)
    df = loaded.samples
    assert df.height == len(expected)
    assert loaded.skipped.get_column("reason").to_list() == (["header"] if header else [])
    first = 2 if header else 1
    assert df.get_column("lineno").to_list() == list(range(first, first + len(expected)))
    for want, got in zip(expected, df.iter_rows(named=True), strict=True):
        for key, value in want.items():
            assert got[key] == value, (key, got[key], value)
    cells = sum(v is None for row in expected for v in row.values())
    assert int(loaded.unavailable.get_column("count").sum() or 0) == cells


@SETTINGS
@given(csv_traces(), st.integers(0, 10_000))
def test_cut_csv_never_loses_a_line(write_log, trace, cut) -> None:
    text, fields, header, _ = trace
    data = text.encode()[: cut % (len(text) + 1)]
    path = write_log(data, "cut.csv")
    try:
        loaded = load_gpu_trace(path, fields=None if header else fields)
    except ParseError as e:  # a cut that leaves no header and no field list
        assert not header or not data.strip() or "without a header" in str(e)
        return
    except UnknownFormat:  # cut inside the header: nothing left says nvidia-smi
        assert b"\n" not in data  # not even one whole line left
        return
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    counted = loaded.samples.height + loaded.skipped.height
    assert counted == lines


DMON_COLUMNS = {
    "pwr": ("W", "power_w", 1.0),
    "gtemp": ("C", "temp_c", 1.0),
    "sm": ("%", "util_pct", 1.0),
    "mem": ("%", "mem_util_pct", 1.0),
    "fb": ("MB", "mem_used_mib", 1.0),
    "rxpci": ("MB/s", "pcie_rx_bytes_s", 1e6),
    "mclk": ("MHz", "mem_clock_mhz", 1.0),
}


@st.composite
def dmon_traces(draw):
    names = draw(
        st.lists(st.sampled_from(sorted(DMON_COLUMNS)), min_size=1, max_size=7, unique=True)
    )
    option = draw(st.sampled_from(["", "T", "DT"]))
    gpus = draw(st.integers(1, 4))
    rounds = draw(st.integers(1, 5))
    every = draw(st.sampled_from([0, 2, 3]))  # re-print the header every n rounds
    time_names = {"": [], "T": ["Time"], "DT": ["Date", "Time"]}[option]
    time_units = {"": [], "T": ["HH:MM:SS"], "DT": ["YYYYMMDD", "HH:MM:SS"]}[option]
    lead = "#" if time_names else "# "
    head = [
        lead + "  ".join([*time_names, "gpu", *names]) + " ",
        lead + "  ".join([*time_units, "Idx", *(DMON_COLUMNS[n][0] for n in names)]) + " ",
    ]
    lines, expected = list(head), []
    for r in range(rounds):
        if every and r and r % every == 0:
            lines += head
        if draw(st.booleans()):
            lines.append("")
        ts = T0 + timedelta(seconds=r)
        stamp = {
            "": [],
            "T": [ts.strftime("%H:%M:%S")],
            "DT": [ts.strftime("%Y%m%d"), ts.strftime("%H:%M:%S")],
        }
        for g in range(gpus):
            cells, values = [*stamp[option], str(g)], {"gpu": g, "sample": r}
            for n in names:
                if draw(st.integers(0, 7)) == 0:
                    cells.append("-")
                    values[DMON_COLUMNS[n][1]] = None
                else:
                    v = draw(st.integers(0, 99999))
                    cells.append(str(v))
                    values[DMON_COLUMNS[n][1]] = v * DMON_COLUMNS[n][2]
            if option == "DT":
                values["ts"] = ts
            lines.append(" " + "  ".join(f"{c:>5}" for c in cells) + " ")
            expected.append(values)
    return "\n".join(lines) + "\n", expected


@SETTINGS
@given(dmon_traces())
def test_dmon_reads_back_exactly(write_log, trace) -> None:
    text, expected = trace
    loaded = load_gpu_trace(write_log(text, "dmon.txt"))
    df = loaded.samples
    assert df.height == len(expected)
    for want, got in zip(expected, df.iter_rows(named=True), strict=True):
        for key, value in want.items():
            assert got[key] == value, (key, got[key], value)
    lines = text.count("\n")
    assert df.height + loaded.skipped.height == lines
    assert set(loaded.skipped.get_column("reason")) <= {"header", "blank line"}


@SETTINGS
@given(dmon_traces(), st.integers(0, 10_000))
def test_cut_dmon_never_loses_a_line(write_log, trace, cut) -> None:
    text, _ = trace
    data = text.encode()[: cut % (len(text) + 1)]
    if not data.strip():
        return
    path = write_log(data, "dmon.txt")
    try:
        loaded = load_gpu_trace(path)
    except UnknownFormat:  # cut inside the names line: nothing left says dmon
        assert b"\n" not in data
        return
    lines = data.count(b"\n") + (1 if not data.endswith(b"\n") else 0)
    assert loaded.samples.height + loaded.skipped.height == lines
    assert isinstance(loaded.samples, pl.DataFrame)
