"""The compiled lane gives every line it takes the plan's own row, and takes the common lines.

Each check types the same lines twice, with the lane and with the plan alone, and asks for
identical frames: on every fixture, and on lines generated at each boundary of the lane's form
(wrappers, dates, rank tags, keys, values, separators, bytes outside printable ASCII).
"""

from __future__ import annotations

import os
from pathlib import Path
from unittest.mock import patch

import polars as pl
import pytest
from helpers import TEST_DATA
from helpers.fuzz import sprinkled
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.load import compiled
from toolkit.load import text as lines_io
from toolkit.load.compiled import log_lines
from toolkit.load.sglang import chunks
from toolkit.load.sglang.chunks import Job, file_job

FIXTURES = sorted((TEST_DATA / "sglang").glob("*.log")) + sorted(
    (TEST_DATA.parent.parent / "data").rglob("*.log")
)
DECODE = (
    "Decode batch, #running-req: 8, #token: 23659, token usage: 0.07, cuda graph: True, "
    "gen throughput (token/s): 227.03, #queue-req: 0"
)
PREFILL = (
    "Prefill batch. #new-seq: 3, #new-token: 2604, #cached-token: 0, token usage: 0.07, "
    "#running-req: 2, #queue-req: 4, "
)
ACCESS = 'INFO:     127.0.0.1:48344 - "POST /generate HTTP/1.1" 200 OK'
JOURNAL = {
    "journald-short": "May 25 21:46:02 gpu-node-1 python3[85690]: ",
    "journald-short-precise": "May 25 21:46:02.123456 gpu-node-1 python3[85690]: ",
    "raw": "",
}


def _both(job: Job, data: bytes) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """(with the lane, the plan alone, lines the lane took) for one chunk of ``data``."""
    chunks.lane_loading().join()  # till then chunks are typed by the plan alone
    assert chunks._LANE_READY.is_set()
    chunk = lines_io.Chunk(0, data, data.count(b"\n"), {})
    table = log_lines.shape_table(list(job.shapes))
    assert table is not None
    taken = log_lines.scan(data, chunk.lines, job.wrapper, job.year, table).line.size
    with_lane = chunks._typed_lines(job, chunk, 1)[0]
    with patch.dict(os.environ, {compiled.SWITCH: "0"}):
        alone = chunks._typed_lines(job, chunk, 1)[0]
    return with_lane, alone, taken


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_every_fixture_types_the_same_with_the_lane(path: Path) -> None:
    job = file_job(path)
    if job.wrapper not in log_lines.WRAPPER_CODES:
        pytest.skip(f"the lane reads no {job.wrapper} lines")
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        data += b"\n"
    with_lane, alone, _ = _both(job, data)
    assert with_lane.equals(alone)


def test_the_lane_takes_the_steady_state_lines(tmp_path: Path) -> None:
    head = JOURNAL["journald-short"]
    lines = [f"{head}[2026-05-25 21:46:02 PP{i % 8}] {DECODE}" for i in range(64)]
    lines.append(f"{head}[2026-05-25 21:46:02] {ACCESS}")
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n")
    with_lane, alone, taken = _both(file_job(path), path.read_bytes())
    assert taken == len(lines)
    assert with_lane.equals(alone)
    assert with_lane.get_column("running_req").to_list()[:2] == [8, 8]


# Bytes a mutation puts in: the separators and digits of the form, and what it refuses.
NOISE = st.sampled_from(
    [b"0", b"9", b".", b",", b", ", b" ", b":", b": ", b"]", b"[", b"%", b"-", b"\t", b"\r",
     b"\x1b[0m", "é".encode(), b"\xff", b"True", b"nan", b"1e5", b"+", b"PP", b"]: ", b""]
)  # fmt: skip
DATES = st.sampled_from(
    ["2026-05-25 21:46:02", "2026-02-29 00:00:00", "2024-02-29 23:59:59", "2026-13-01 00:00:00",
     "2026-05-25 24:00:00", "2026-05-25 21:46:60", "0001-01-01 00:00:00", "2026-05-25 21:46:02.123",
     "2026-05-25 21:46:02.12", "2026-05-25 21:46:02.1234", "21:46:02"]
)  # fmt: skip
JOURNAL_TIMES = st.sampled_from(
    ["May 25 21:46:02", "May  5 21:46:02", "May 05 21:46:02", "Feb 29 21:46:02", "may 25 21:46:02",
     "Dec 31 23:59:59", "May 25 21:46:60", "Jun 31 00:00:00"]
)  # fmt: skip
TAGS = st.lists(st.sampled_from(["PP3", "TP1", "DP0", "EP2", "ATTN_CP1", "MOE_DP0", "XP1", "PP"]),
                max_size=3)  # fmt: skip


@st.composite
def lines(draw: st.DrawFn, wrapper: str) -> bytes:
    message = draw(st.sampled_from([DECODE, PREFILL, ACCESS, DECODE + ", ", "Decode batch. "]))
    prefix = f"[{draw(DATES)}{''.join(' ' + t for t in draw(TAGS))}] "
    head = JOURNAL[wrapper]
    if wrapper != "raw":
        head = draw(JOURNAL_TIMES) + head[15:] if wrapper == "journald-short" else head
    line = (head + prefix + message).encode()
    return sprinkled(draw, line, NOISE)


@settings(max_examples=60)
@given(data=st.data(), wrapper=st.sampled_from(sorted(JOURNAL)), year=st.sampled_from([2026, None]))
def test_generated_lines_type_the_same_with_the_lane(data, wrapper: str, year: int | None) -> None:
    steady = (JOURNAL[wrapper] + "[2026-05-25 21:46:02 PP0] " + DECODE).encode()
    body = data.draw(st.lists(lines(wrapper), min_size=1, max_size=12))
    job = Job(wrapper, year, tuple(chunks.sample_shapes([DECODE, PREFILL.rstrip(", ")])))
    with_lane, alone, taken = _both(job, b"\n".join([steady, *body]) + b"\n")
    assert taken >= 1
    assert with_lane.equals(alone)
