"""The line cache cannot lie: damaged, foreign or stale entries are rebuilt (altered ones with
a note), concurrent builders never fail, leftovers are removed and the directory stays
bounded."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import REPO

from toolkit import load_sglang_log
from toolkit.load import cache as cache_io

DECODE = (
    "[2026-05-25 21:40:{s:02d} PP0] Decode batch, #running-req: {r}, #token: 10, "
    "token usage: 0.10, cuda graph: True, gen throughput (token/s): 248.10, #queue-req: 0\n"
)

pytestmark = pytest.mark.usefixtures("cache_beside_input")


def _log(path: Path, running: int = 8, lines: int = 40) -> Path:
    path.write_text("".join(DECODE.format(s=i % 60, r=running) for i in range(lines)))
    return path


def _entries(root: Path) -> list[Path]:
    return [e.path for e in cache_io.entries(root)]


def _running(path: Path) -> list[int]:
    return load_sglang_log(path).batches.get_column("running_req").unique().to_list()


@pytest.mark.parametrize("damage", ["truncate", "delete", "foreign", "manifest"])
def test_a_damaged_entry_is_rebuilt(tmp_path: Path, damage: str) -> None:
    path = _log(tmp_path / "server.log")
    other = _log(tmp_path / "other.log", running=3, lines=90)
    expected = load_sglang_log(path).batches
    load_sglang_log(other)
    root = tmp_path / cache_io.CACHE_NAME
    entry = next(e for e in _entries(root) if e.name.startswith("server.log."))
    piece = entry / "part-00000.parquet"
    if damage == "truncate":
        piece.write_bytes(piece.read_bytes()[:-100])
    elif damage == "delete":
        piece.unlink()
    elif damage == "foreign":
        foreign = next(e for e in _entries(root) if e.name.startswith("other.log."))
        piece.write_bytes((foreign / "part-00000.parquet").read_bytes())
    else:
        (entry / cache_io.MANIFEST).write_text("{not json")
    assert load_sglang_log(path).batches.equals(expected)
    assert load_sglang_log(path).batches.equals(expected)  # and the rebuilt entry is whole


def test_an_edit_keeping_size_and_mtime_is_not_served_stale(tmp_path: Path) -> None:
    path = _log(tmp_path / "server.log", running=8)
    assert _running(path) == [8]
    st = path.stat()
    _log(path, running=9)  # same length, other content
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    assert _running(path) == [9]


def test_concurrent_builders_never_fail(tmp_path: Path) -> None:
    path = _log(tmp_path / "server.log", lines=3000)
    code = (
        "import sys; from toolkit import load_sglang_log; "
        "print(load_sglang_log(sys.argv[1]).batches.height)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in results]
    assert {out.strip() for out, _ in results} == {"3000"}
    root = tmp_path / cache_io.CACHE_NAME
    assert len(_entries(root)) == 1
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]


def test_leftovers_of_a_killed_build_and_the_old_layout_are_removed(tmp_path: Path) -> None:
    path = _log(tmp_path / "server.log")
    root = tmp_path / cache_io.CACHE_NAME
    root.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    host = cache_io._host()
    leftover = root / f".tmp-server.log.0123456789abcdef.{host}.{dead}.abcd1234"
    leftover.mkdir()
    (leftover / "part-00000.parquet").write_bytes(b"half")
    old = root / "server.log.0123456789abcdef.partial"
    old.write_bytes(b"half")
    load_sglang_log(path)
    assert not leftover.exists() and not old.exists()


def test_entries_are_evicted_least_recently_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = [_log(tmp_path / f"s{i}.log", lines=200 + i) for i in range(3)]
    load_sglang_log(paths[0])
    root = tmp_path / cache_io.CACHE_NAME
    one = cache_io.entries(root)[0].bytes
    monkeypatch.setenv("PPSCOPE_CACHE_MAX", str(int(one * 2.5)))
    load_sglang_log(paths[1])
    load_sglang_log(paths[0])  # used again: now the most recent
    load_sglang_log(paths[2])
    names = {e.name.split(".")[0] for e in _entries(root)}
    assert names == {"s0", "s2"}


def test_no_temporary_store_leaks_without_a_writable_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _log(tmp_path / "server.log")
    monkeypatch.setattr(cache_io, "cache_dir", lambda p: None)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    for _ in range(3):
        log = load_sglang_log(path)
        assert log.batches.height == 40
        del log
    gc.collect()
    assert not list(temp.iterdir())


def test_cache_info_and_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from toolkit.cli.main import main

    path = _log(tmp_path / "server.log")
    load_sglang_log(path)
    assert main(["cache", "info", str(tmp_path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    (root,) = info["caches"]
    assert root["entries"] == 1 and root["bytes"] > 0
    assert root["sources"] == [str(path)]
    assert main(["cache", "clear", str(tmp_path)]) == 0
    assert not _entries(tmp_path / cache_io.CACHE_NAME)
