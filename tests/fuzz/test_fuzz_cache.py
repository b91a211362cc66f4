"""Random damage to a cache entry (its manifest, its pieces) or to its input behind the input's
size and mtime: a load gives the lines of the input as it is now (the entry rebuilt), or a
declared ``ToolkitError``; never a stale or wrong table, never a hang on a FIFO or a device."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers.fuzz import budget
from hypothesis import event, given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.load import cache as cache_io
from toolkit.load.sglang.log import load_sglang_log

pytestmark = [pytest.mark.fuzz, pytest.mark.usefixtures("cache_beside_input")]

LINES = [
    "[2026-05-25 21:40:{s:02d} PP0] Decode batch, #running-req: {r}, #token: {t}, "
    "token usage: 0.{u:02d}, cuda graph: True, gen throughput (token/s): {g}.10, #queue-req: 0",
    "[2026-05-25 21:40:{s:02d} PP1] Prefill batch, #new-seq: {r}, #new-token: {t}, "
    "#cached-token: 0, token usage: 0.{u:02d}, #running-req: {r}, #queue-req: 0",
    '[2026-05-25 21:40:{s:02d}] INFO:     127.0.0.1:4{u:04d} - "POST /generate HTTP/1.1" 200 OK',
]


def _text(n: int = 300) -> str:
    return "".join(
        LINES[i % 3].format(s=i % 60, r=1 + i % 9, t=100 + 7 * i, u=i % 100, g=200 + i) + "\n"
        for i in range(n)
    )


def _table(path: Path, cache: bool) -> tuple[pl.DataFrame, int]:
    log = load_sglang_log(path, cache=cache)
    return log.batches, log.coverage()["lines"]


def _pieces(entry: Path) -> list[Path]:
    return sorted(p for p in entry.iterdir() if p.suffix == ".parquet")


damage = st.one_of(
    st.tuples(st.just("manifest-byte"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("manifest-cut"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("manifest-number"), st.integers(0, 10**6), st.integers(-(10**6), 10**6)),
    st.tuples(
        st.sampled_from(["piece-byte", "piece-cut", "piece-grow", "piece-swap"]),
        st.integers(0, 10**6),
        st.integers(1, 255),
    ),
    st.tuples(
        st.sampled_from(["piece-fifo", "piece-device", "piece-dir", "piece-gone"]),
        st.integers(0, 10**6),
        st.just(0),
    ),
    st.tuples(st.just("input-digit"), st.integers(0, 10**6), st.integers(0, 9)),
)


def _numbers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every integer in a JSON value."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [path]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _numbers(v, (*path, k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _numbers(v, (*path, i))]
    return []


def _damage(entry: Path, path: Path, kind: str, at: int, value: int) -> None:
    manifest = entry / cache_io.MANIFEST
    pieces = _pieces(entry)
    piece = pieces[at % len(pieces)]
    if kind == "manifest-byte":
        data = bytearray(manifest.read_bytes())
        data[at % len(data)] ^= value
        manifest.write_bytes(bytes(data))
    elif kind == "manifest-cut":
        manifest.write_bytes(manifest.read_bytes()[: at % manifest.stat().st_size])
    elif kind == "manifest-number":
        doc = json.loads(manifest.read_text())
        where = _numbers(doc)
        *parents, last = where[at % len(where)]
        holder = doc
        for key in parents:
            holder = holder[key]
        holder[last] += value or 1
        manifest.write_text(json.dumps(doc))
    elif kind == "piece-byte":
        data = bytearray(piece.read_bytes())
        data[at % len(data)] ^= value
        piece.write_bytes(bytes(data))
    elif kind == "piece-cut":
        piece.write_bytes(piece.read_bytes()[: at % piece.stat().st_size])
    elif kind == "piece-grow":
        piece.write_bytes(piece.read_bytes() + bytes([value]) * (1 + at % 64))
    elif kind == "piece-swap":
        other = pieces[(at + 1) % len(pieces)]
        piece.write_bytes(other.read_bytes())
    elif kind == "piece-gone":
        piece.unlink()
    else:
        piece.unlink()
        if kind == "piece-fifo":
            os.mkfifo(piece)
        elif kind == "piece-device":
            piece.symlink_to("/dev/zero")
        else:
            piece.mkdir()
    if kind == "input-digit":
        data = bytearray(path.read_bytes())
        digits = [i for i, b in enumerate(data) if 48 <= b <= 57]
        i = digits[at % len(digits)]
        st_ = path.stat()
        data[i] = 48 + value
        path.write_bytes(bytes(data))
        os.utime(path, ns=(st_.st_atime_ns, st_.st_mtime_ns))


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An input, its cache entry, and a pristine copy of both."""
    path = tmp_path / "server.log"
    path.write_text(_text())
    load_sglang_log(path)
    root = tmp_path / cache_io.CACHE_NAME
    (entry,) = [e.path for e in cache_io.entries(root)]
    keep = tmp_path / "pristine"
    shutil.copytree(entry, keep / "entry")
    shutil.copy2(path, keep / "server.log")
    return path, entry, keep


@budget(12)
@given(damage=damage)
def test_damage_yields_the_current_truth_or_a_declared_error(
    built: tuple[Path, Path, Path], damage: tuple[str, int, int]
) -> None:
    path, entry, keep = built
    root = entry.parent
    for child in root.iterdir():  # back to the pristine entry and input
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
    shutil.copytree(keep / "entry", entry)
    shutil.copy2(keep / "server.log", path)
    _damage(entry, path, *damage)
    event(f"damage: {damage[0]}")
    truth = _table(path, cache=False)
    try:
        batches, lines = _table(path, cache=True)
    except ToolkitError:
        event("outcome: declared error")
        return
    event("outcome: the input's lines")
    assert lines == truth[1]
    assert batches.equals(truth[0])
    again = _table(path, cache=True)  # and what the cache holds now is whole
    assert again[1] == truth[1] and again[0].equals(truth[0])
