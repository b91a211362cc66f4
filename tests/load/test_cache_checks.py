"""The cache checks itself: an edited manifest, a piece that is no regular file or not the
one written, an input edited behind its size and mtime, all lead to a rebuild with a note; a full
disk while an entry is written means running without the cache, with one warning."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import polars as pl
import pytest
from helpers import REPO

from toolkit import load_sglang_log
from toolkit.errors import ToolkitError
from toolkit.load import cache as cache_io
from toolkit.load.gpu.trace import load_gpu_trace

DECODE = (
    "[2026-05-25 21:40:{s:02d} PP0] Decode batch, #running-req: {r}, #token: 10, "
    "token usage: 0.10, cuda graph: True, gen throughput (token/s): 248.10, #queue-req: 0\n"
)
SMI = "timestamp, index, utilization.gpu [%], memory.used [MiB]\n" + "".join(
    f"2026/05/25 21:40:{s:02d}.000, 0, {s % 100} %, 1000 MiB\n" for s in range(40)
)

pytestmark = pytest.mark.usefixtures("cache_beside_input")


@pytest.fixture
def notes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The cache's warnings, as they are given. (Not through the warnings module: numba's
    compiler enters ``catch_warnings`` in worker threads, which can leave the process's
    warning state pointing at a list of its own.)"""
    said: list[str] = []

    def warn(message: str, category: type[Warning], stacklevel: int = 1) -> None:
        assert category is cache_io.CacheWarning
        said.append(message)

    monkeypatch.setattr(cache_io, "warnings", SimpleNamespace(warn=warn))
    return said


def _log(path: Path, running: int = 8, lines: int = 40) -> Path:
    path.write_text("".join(DECODE.format(s=i % 60, r=running) for i in range(lines)))
    return path


def _entry(path: Path) -> Path:
    root = path.parent / cache_io.CACHE_NAME
    (found,) = [e.path for e in cache_io.entries(root) if e.path.name.startswith(path.name)]
    return found


def _running(path: Path) -> list[int]:
    return load_sglang_log(path).batches.get_column("running_req").unique().to_list()


def test_the_manifest_carries_checksums_of_itself_and_each_piece(tmp_path: Path) -> None:
    path = _log(tmp_path / "server.log")
    load_sglang_log(path)
    manifest = json.loads((_entry(path) / cache_io.MANIFEST).read_text())
    assert cache_io.read_manifest(_entry(path)) == manifest
    for piece in manifest["pieces"] + manifest["fixes"]:
        assert cache_io.piece_facts(_entry(path) / piece["name"])["sha256"] == piece["sha256"]
    content = manifest["source"]["content"]
    assert content["bytes"] == path.stat().st_size and len(content["crc32"]) == 1


def test_edited_numbers_in_the_manifest_are_detected_and_rebuilt_with_a_note(
    tmp_path: Path,
    notes: list[str],
) -> None:
    path = _log(tmp_path / "server.log", lines=40)
    expected = load_sglang_log(path)
    manifest_path = _entry(path) / cache_io.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["lines"] = 4000
    manifest["counts"] = {k: v * 100 for k, v in manifest["counts"].items()}
    manifest_path.write_text(json.dumps(manifest))
    again = load_sglang_log(path)
    assert len(notes) == 1 and "edited (checksum mismatch); rebuilt" in notes[0]
    assert again.coverage()["lines"] == expected.coverage()["lines"] == 40
    assert again.batches.equals(expected.batches)
    assert json.loads(manifest_path.read_text())["lines"] == 40  # rebuilt


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_piece_that_is_no_regular_file_is_refused_unopened(
    tmp_path: Path, notes: list[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    path = _log(tmp_path / "server.log")
    expected = load_sglang_log(path).batches
    piece = _entry(path) / "part-00000.parquet"
    piece.unlink()
    if kind == "fifo":
        os.mkfifo(piece)
    elif kind == "device":
        piece.symlink_to("/dev/zero")
    else:
        piece.mkdir()
    odd_opens: list[str] = []  # files opened that were no regular file at the time
    real_open = os.open

    def spy(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        with contextlib.suppress(OSError):
            if not stat.S_ISREG(os.stat(name).st_mode):
                odd_opens.append(str(name))
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    assert load_sglang_log(path).batches.equals(expected)
    assert str(piece) not in odd_opens
    assert len(notes) == 1 and "part-00000.parquet" in notes[0] and "rebuilt" in notes[0]


def test_a_piece_rewritten_to_its_recorded_size_is_caught_by_its_checksum(
    tmp_path: Path,
    notes: list[str],
) -> None:
    path = _log(tmp_path / "server.log", running=8)
    other = _log(tmp_path / "other.log", running=3)  # same shape: pieces of equal size
    expected = load_sglang_log(path).batches
    load_sglang_log(other)
    piece, foreign = (_entry(p) / "part-00000.parquet" for p in (path, other))
    assert piece.stat().st_size == foreign.stat().st_size
    piece.write_bytes(foreign.read_bytes())
    assert load_sglang_log(path).batches.equals(expected)
    assert len(notes) == 1 and "checksum" in notes[0]


def test_an_edit_behind_size_and_mtime_between_sampled_blocks_is_not_served_stale(
    tmp_path: Path,
) -> None:
    """A 2 MiB log: the key's fingerprint samples its head, tail and 16 blocks of 4 KiB; the
    edit lies between them, so only the whole-content check can see it."""
    lines = (2 << 20) // len(DECODE.format(s=0, r=8))
    path = _log(tmp_path / "server.log", running=8, lines=lines)
    assert _running(path) == [8]
    data = bytearray(path.read_bytes())
    size = len(data)
    sampled = [(0, 64 << 10), (size - (64 << 10), size)]
    sampled += [(size * k // 17, size * k // 17 + (4 << 10)) for k in range(1, 17)]
    at = next(
        i
        for i in range(70 << 10, size, len(DECODE.format(s=0, r=8)))
        if all(not (a - 200 <= i < b + 200) for a, b in sampled)
    )
    start = data.rindex(b"\n", 0, at) + 1
    end = data.index(b"\n", start)
    line = bytes(data[start:end])
    assert b"#running-req: 8," in line
    data[start:end] = line.replace(b"#running-req: 8,", b"#running-req: 9,")
    fingerprint = cache_io.fingerprint(path)
    st = path.stat()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert cache_io.fingerprint(path) == fingerprint  # the key alone cannot tell
    assert sorted(_running(path)) == [8, 9]


def test_a_large_input_is_checked_at_its_ends_and_random_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_io, "CONTENT_BLOCK", 1024)
    monkeypatch.setattr(cache_io, "WHOLE_CHECK", 4096)
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * 10_000)
    recorded = cache_io.content_blocks(path)
    assert len(recorded["crc32"]) == 10 and cache_io.same_content(path, recorded)
    for at in (0, 9_999):  # the first and last blocks are checked every time
        data = bytearray(b"x" * 10_000)
        data[at] = ord("y")
        path.write_bytes(bytes(data))
        assert not cache_io.same_content(path, recorded)
    monkeypatch.setattr(cache_io, "CHECKED_BLOCKS", 2)
    data = bytearray(b"x" * 10_000)
    data[5_000] = ord("y")
    path.write_bytes(bytes(data))
    seen = [cache_io.same_content(path, recorded) for _ in range(200)]
    assert False in seen  # drawn at random: an edit in the middle is found over reuses


# ----------------------------------------------------------------------------- full disk
def _full_disk(monkeypatch: pytest.MonkeyPatch, *, where: str, half: bool = False) -> None:
    """Parquet writes under ``where`` fail as polars reports a full disk (after writing half
    the file when ``half``)."""
    real = pl.DataFrame.write_parquet

    def write(self: pl.DataFrame, file: Any, *args: Any, **kwargs: Any) -> Any:
        if where in str(file):
            if half:
                real(self, file, *args, **kwargs)
                data = Path(file).read_bytes()
                Path(file).write_bytes(data[: len(data) // 2])
            raise pl.exceptions.ComputeError(
                "parquet: File out of specification: underlying IO error: "
                "No space left on device (os error 28)"
            )
        return real(self, file, *args, **kwargs)

    monkeypatch.setattr(pl.DataFrame, "write_parquet", write)
    monkeypatch.setattr(cache_io, "_warned_full", False)


@pytest.mark.parametrize("half", [False, True])
def test_a_full_disk_means_running_without_the_cache_with_one_warning(
    tmp_path: Path, notes: list[str], monkeypatch: pytest.MonkeyPatch, half: bool
) -> None:
    path = _log(tmp_path / "server.log")
    other = _log(tmp_path / "other.log", running=3)
    expected = load_sglang_log(path, cache=False).batches
    _full_disk(monkeypatch, where=cache_io.CACHE_NAME, half=half)
    assert load_sglang_log(path).batches.equals(expected)
    assert _running(other) == [3]
    assert [note.split(": ", 1)[1] for note in notes] == [
        "no space left on device; running without the cache"
    ]
    root = tmp_path / cache_io.CACHE_NAME
    assert not cache_io.entries(root)  # no half-written entry was published
    assert not [p for p in root.iterdir() if p.name.startswith(".tmp-")]


def test_a_full_disk_on_the_manifest_leaves_no_entry(
    tmp_path: Path, notes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _log(tmp_path / "server.log")
    real = cache_io.write_manifest

    def full(directory: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        if cache_io.CACHE_NAME in str(directory):
            raise OSError(28, "No space left on device", str(directory / cache_io.MANIFEST))
        return real(directory, manifest)

    monkeypatch.setattr(cache_io, "write_manifest", full)
    monkeypatch.setattr(cache_io, "_warned_full", False)
    assert _running(path) == [8]
    assert len(notes) == 1 and "running without the cache" in notes[0]
    assert not cache_io.entries(tmp_path / cache_io.CACHE_NAME)


def test_a_disk_too_full_even_for_the_temporary_store_is_a_declared_error(
    tmp_path: Path, notes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _log(tmp_path / "server.log")
    _full_disk(monkeypatch, where="")
    with pytest.raises(ToolkitError, match="no space left"):
        load_sglang_log(path)
    assert len(notes) == 1


def test_a_full_disk_when_caching_a_gpu_trace_keeps_the_trace(
    tmp_path: Path, notes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gpu.csv"
    path.write_text(SMI)
    expected = load_gpu_trace(path, cache=False).samples
    _full_disk(monkeypatch, where=cache_io.CACHE_NAME)
    assert load_gpu_trace(path).samples.equals(expected)
    assert len(notes) == 1 and "running without the cache" in notes[0]
    assert not cache_io.entries(tmp_path / cache_io.CACHE_NAME)


def test_parse_on_a_full_disk_prints_one_warning_line(tmp_path: Path) -> None:
    path = _log(tmp_path / "server.log")
    code = (
        "import sys, polars as pl\n"
        "real = pl.DataFrame.write_parquet\n"
        "def full(self, file, *a, **k):\n"
        "    if '.ppscope-cache' not in str(file):\n"
        "        return real(self, file, *a, **k)\n"
        "    raise pl.exceptions.ComputeError('underlying IO error: No space left on device "
        "(os error 28)')\n"
        "pl.DataFrame.write_parquet = full\n"
        "from toolkit.cli.main import main\n"
        "sys.exit(main(['parse', '-q', sys.argv[1]]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PPSCOPE_CACHE_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in done.stderr and "thrift" not in done.stderr
    assert any("no space left on device" in ln for ln in lines), done.stderr
    assert len([ln for ln in lines if "space" in ln]) == 1, done.stderr
