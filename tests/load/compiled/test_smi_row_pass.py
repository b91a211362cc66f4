"""The compiled pass over nvidia-smi CSV rows gives the CSV reader's rows, and takes the
common ones.

Each check loads the same trace twice, with the pass and with the reader alone, and asks for
identical tables: on every fixture, and on rows generated at each boundary of the layout
(times, numbers, units, separators, cut and longer rows, bytes outside printable ASCII).
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest.mock import patch

import pytest
from helpers import TEST_DATA
from helpers.fuzz import sprinkled
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.load import compiled
from toolkit.load.compiled import primitives, smi_rows
from toolkit.load.gpu.smi import load_smi_csv

FIXTURES = sorted((TEST_DATA / "gpu").glob("smi-*.csv")) + sorted(
    (TEST_DATA.parent.parent / "data").rglob("gpu.csv")
)
HEADER = (
    "timestamp, index, utilization.gpu [%], memory.used [MiB], power.draw [W], "
    "clocks.current.sm [MHz]"
)
ROW = "2026/05/25 21:40:21.123, {gpu}, 45 %, 81234 MiB, 312.45 W, 2400 MHz"
# With text cells, as most queries have them (the reader keeps them stripped, [N/A] as null).
NAMED = (
    "timestamp, index, name, uuid, utilization.gpu [%], power.draw [W]",
    "2026/05/25 21:40:21.123, {gpu}, NVIDIA H100 80GB HBM3, GPU-3f1a2b4c-0d5e, 45 %, 312.45 W",
)


def _both(path: Path, fields: list[str] | None = None) -> tuple[object, object]:
    with_pass = load_smi_csv(path, path.name, fields=fields)
    with patch.dict(os.environ, {compiled.SWITCH: "0"}):
        alone = load_smi_csv(path, path.name, fields=fields)
    return with_pass, alone


def _same(a, b) -> None:
    assert a.lines == b.lines
    assert a.samples.equals(b.samples)
    assert a.skipped.equals(b.skipped)
    assert a.unavailable.equals(b.unavailable)
    assert a.notes == b.notes


NOHEADER_FIELDS = {
    "smi-noheader.csv": "timestamp,index,utilization.gpu,memory.used,power.draw",
    "smi-noheader-nounits.csv": "index,utilization.gpu,memory.used,power.draw",
}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_loads_the_same_with_the_pass(path: Path) -> None:
    fields = NOHEADER_FIELDS.get(path.name)
    _same(*_both(path, fields.split(",") if fields else None))


def test_the_pass_takes_a_clean_trace(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text(HEADER + "\n" + "\n".join(ROW.format(gpu=i % 8) for i in range(64)) + "\n")
    layout = smi_rows.layout(["ts", "gpu", "float", "float", "float", "float"],
                            [None, None, "%", "MiB", "W", "MHz"])  # fmt: skip
    assert layout is not None
    rows = path.read_bytes().split(b"\n", 1)[1]
    block = smi_rows._typed_block(rows, layout, ["ts", "gpu", "u", "m", "p", "c"])
    assert block.lines == block.rows.height == 64 and not block.left_lines.size
    assert block.rows.get_column("lineno").to_list()[:2] == [0, 1]
    with_pass, alone = _both(path)
    _same(with_pass, alone)
    assert with_pass.samples.get_column("power_w").to_list()[:2] == [312.45, 312.45]


NOISE = st.sampled_from(
    [b"0", b"9", b".", b",", b", ", b" ", b"%", b"-", b"\t", b"\r", b"[N/A]", "é".encode(), b"\xff",
     b"1e5", b"+", b"MiB", b"2026/02/30 00:00:00", b"24:00:00", b".12", b".1234", b""]
)  # fmt: skip


@settings(max_examples=60)
@given(
    data=st.data(), query=st.sampled_from([(HEADER, ROW), NAMED]), end=st.sampled_from([b"\n", b""])
)
def test_generated_rows_load_the_same_with_the_pass(
    tmp_path: Path, data, query, end: bytes
) -> None:
    header, row = query
    body = data.draw(st.lists(
        st.integers(0, 12).map(lambda g: row.format(gpu=g).encode()).flatmap(
            lambda r: st.composite(lambda draw: sprinkled(draw, r, NOISE))()
        ),
        min_size=1, max_size=12,
    ))  # fmt: skip
    path = tmp_path / "smi.csv"
    clean = [row.format(gpu=i).encode() for i in range(4)]
    path.write_bytes(header.encode() + b"\n" + b"\n".join([*clean, *body]) + end)
    _same(*_both(path))


def test_blocks_cycle_through_their_buffers_and_grow_for_a_long_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(smi_rows, "BLOCK_BYTES", 64)
    rows = [ROW.format(gpu=i % 8) for i in range(40)]
    rows[17] = rows[17].replace(", 45 %", ", " + "4" * 300 + " %")  # longer than four blocks
    path = tmp_path / "smi.csv"
    path.write_text(HEADER + "\n" + "\n".join(rows) + "\n" + ROW.format(gpu=3))  # no last newline
    with path.open("rb") as f:
        f.readline()
        blocks = [bytes(b) for b in smi_rows._blocks(f, buffers=2)]  # each copied as it comes
    assert b"".join(blocks) == path.read_bytes().split(b"\n", 1)[1]
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and len(blocks) > 8
    with_pass, alone = _both(path)  # more blocks than buffers, typed two at a time
    _same(with_pass, alone)
    assert with_pass.samples.height == 41
    long_row = with_pass.samples.filter(lineno=19)  # the reader's number, 4.4e299
    assert long_row.get_column("util_pct").item() > 4e299


def test_a_pass_that_does_not_load_is_named_once_and_the_reader_types_the_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_llvm() -> None:
        raise RuntimeError("no LLVM here")

    with pytest.warns(RuntimeWarning, match="nvidia-smi row pass does not load here.*no LLVM"):
        assert not primitives.loads("nvidia-smi row", no_llvm)
    path = tmp_path / "smi.csv"
    path.write_text(HEADER + "\n" + ROW.format(gpu=0) + "\n")
    monkeypatch.setattr(smi_rows, "ready", lambda: False)
    assert load_smi_csv(path, path.name).samples.get_column("power_w").to_list() == [312.45]
