"""The pass in byte-range chunks: any chunk size gives the same tables, and no line, however
long, is held whole or takes more than linear time."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit import load_sglang_log
from toolkit.load import text as lines_io
from toolkit.load.sglang import store

FIXTURES = sorted((TEST_DATA / "sglang").glob("*.log"))
CAP = lines_io.LINE_CAP
JOURNAL = "May 25 21:40:21 node-1 python3[85690]: "
PREFIX = "[2026-05-25 21:40:21 PP3] "
DECODE = (
    "Decode batch, #running-req: 8, #token: 10, token usage: 0.10, cuda graph: True, "
    "gen throughput (token/s): 248.10, #queue-req: 0"
)


def _tables(path: Path) -> dict[str, pl.DataFrame]:
    log = load_sglang_log(path, cache=False)
    return {
        "events": log.events,
        "batches": log.batches,
        "startup": log.startup,
        "errors": log.errors,
        "other": log.other,
        "http": log.http,
    }


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_small_chunks_give_the_same_tables(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _tables(path)
    monkeypatch.setattr(store, "CHUNK_BYTES", 700)  # many chunks, lines cut at chunk ends
    chunked = _tables(path)
    for name, df in whole.items():
        assert chunked[name].equals(df), name


# One line of each family, grown to about ``size`` bytes by repeating text where a parser
# might backtrack: word runs after a summary, repeated markers, unclosed lists, key lists.
FAMILIES = {
    "decode": lambda n: PREFIX + DECODE + ", #x: 1" * (n // 7),
    "prefill": lambda n: PREFIX + "Prefill batch, #new-seq: 1, " + "#new-token: 1, " * (n // 15),
    "summary": lambda n: PREFIX + "max_total_num_tokens=327680, " + "a" * n,
    "capture": lambda n: PREFIX + "Capture cuda graph begin." + " end." * (n // 5),
    "graph-bs": lambda n: PREFIX + "Capture cuda graph bs [" + "1, " * (n // 3),
    "kv": lambda n: PREFIX + "KV Cache is allocated." + " K size: 1" * (n // 10),
    "server_args": lambda n: "[2026-05-25 21:40:21] server_args=ServerArgs(" + "a=1, " * (n // 5),
    "http": lambda n: (
        '[2026-05-25 21:40:21] INFO:     1.2.3.4:5 - "GET /' + "x" * n + ' HTTP/1.1" 200'
    ),
    "traceback": lambda n: "Traceback (most recent call last): " + '  File "x' * (n // 9),
    "progress": lambda n: "Loading: " + "█" * (n // 3) + " 10/23 [00:01<00:02, 3.1it/s]",
    "journald": lambda n: JOURNAL + "x: " * (n // 3),
    "nul": lambda n: "\0" * n,
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_line_of_each_family_at_one_megabyte(write_log, family: str) -> None:
    line = FAMILIES[family](CAP - 4096)
    assert len(line.encode()) < CAP
    normal = f"{JOURNAL}{PREFIX}{DECODE}\n"
    path = write_log(f"{normal}{line}\n{normal}{line}\n{normal}")  # twice: sampled as a shape
    log = load_sglang_log(path, cache=False)
    cov = log.coverage()
    assert cov["lines"] == 5 and sum(cov["counts"].values()) == 5
    assert log.batches.filter(pl.col("lineno").is_in([1, 3, 5])).height == 3
    assert log.events.get_column("message")[1] is not None


@pytest.mark.parametrize("family", ["decode", "summary", "nul", "journald"])
def test_a_line_over_the_cap_is_kept_cut_with_its_length(write_log, family: str) -> None:
    line = FAMILIES[family](3 * CAP)
    size = len(line.encode())
    path = write_log(f"{PREFIX}{DECODE}\n{line}\n{PREFIX}{DECODE}")
    log = load_sglang_log(path, cache=False)
    assert log.coverage()["lines"] == 3
    assert log.batches.get_column("lineno").to_list() == [1, 3]
    cut = log.other.filter(pl.col("lineno") == 2).row(0, named=True)
    assert cut["kind"] == "other" and cut["line_bytes"] == size
    assert len(cut["message"].encode()) <= CAP
    assert log.coverage()["cut_lines"] == 1


def test_chunks_read_alone_equal_chunks_read_in_one_pass(tmp_path: Path) -> None:
    lines = [f"line {i} " + "x" * (i * 37 % 300) for i in range(500)]
    lines[100] = "y" * 5000  # longer than the cap below
    path = tmp_path / "a.log"
    path.write_text("\n".join(lines))
    one_pass = list(lines_io.iter_chunks(path, 1000, cap=2048))
    alone = [
        c
        for k in range(lines_io.chunk_count(path.stat().st_size, 1000))
        if (c := lines_io.read_chunk(path, k, 1000, cap=2048)) is not None
    ]
    assert one_pass == alone
    assert sum(c.lines for c in one_pass) == 500
    assert [n for c in one_pass for n in c.long.values()] == [5000]


@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_chunks_read_into_reused_buffers_equal_fresh_ones(tmp_path: Path, suffix: str) -> None:
    lines = [f"line {i} " + "x" * (i * 37 % 300) for i in range(500)]
    lines[100] = "y" * 5000  # longer than the cap below
    lines[200] = "z" * 1500  # longer than a chunk, under the cap
    text = ("\n".join(lines) + "\n").encode()
    path = tmp_path / f"a.log{suffix}"
    path.write_bytes(gzip.compress(text) if suffix else text)
    fresh = list(lines_io.iter_chunks(path, 1000, cap=2048))
    reused = [  # each copied as it comes: its buffer is read into again two chunks later
        lines_io.Chunk(c.index, bytes(c.data), c.lines, c.long)
        for c in lines_io.iter_chunks(path, 1000, cap=2048, buffers=2)
    ]
    assert reused == fresh and len(fresh) > 50
    assert sum(c.lines for c in reused) == 500
    assert [n for c in reused for n in c.long.values()] == [5000]


def test_two_files_of_one_name_without_cache(tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "server.log", tmp_path / "b" / "server.log"
    for path, running in ((a, 3), (b, 5)):
        path.parent.mkdir()
        path.write_text(
            f"{PREFIX}{DECODE.replace('#running-req: 8', f'#running-req: {running}')}\n"
        )
    log = load_sglang_log([a, b], cache=False)
    assert sorted(log.batches.get_column("running_req").to_list()) == [3, 5]


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_vectorized_error_records_equal_the_row_by_row_reader(path: Path) -> None:
    from toolkit.load.sglang.error_records import group_errors

    log = load_sglang_log(path, cache=False)
    log.errors  # noqa: B018 - builds the spans
    spans = log._error_spans()
    rows = (
        log._resolved(log.scan().join(spans.lazy(), on=["source", "lineno"], how="semi"))
        .collect()
        .sort("_order", "lineno")
    )
    records, _ = group_errors(rows)
    assert log.errors.equals(records)
