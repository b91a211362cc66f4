"""Where typed inputs are cached, under what key, and how the cache stays bounded and honest.

An entry is a directory of Parquet pieces with a ``manifest.json`` written last; it is built
under a unique temporary name and renamed into place, so a reader sees all of it or none.
Builders of one entry take a lock on ``.<entry>.lock`` (the second waits, then reads what the
first built); without ``fcntl`` the first rename wins and the loser's copy is dropped.

The key is the file's size, modification time and a content fingerprint (a digest of its head,
tail and evenly spaced blocks: cheap for multi-GB files), plus the version of what typed it.
An entry checks itself on every reuse: the manifest carries a checksum of itself and of each
piece (a piece must be a regular file of the recorded size and checksum, tested with ``stat``
before it is opened), and a checksum of each MiB of the input as it was when the entry was
built. An input up to ``WHOLE_CHECK`` bytes is checked whole; a larger one at its first and
last block and ``CHECKED_BLOCKS`` blocks drawn at random each time, so an edit that keeps size
and mtime is caught at once when small and, when large, with growing certainty over reuses.
An entry that fails a check is rebuilt with a ``CacheWarning``. A full disk while an entry is
written means running without the cache, with one ``CacheWarning``.
The cache directory is ``.ppscope-cache`` beside the input, else ``~/.cache/ppscope``; after
each build its entries are evicted, least recently used first, down to ``PPSCOPE_CACHE_MAX``
bytes (default 20 GB; ``500M``, ``2G`` and plain byte counts are understood).

Entries hold the raw text of the input's lines: treat a cache directory like the logs it came
from, and clear it with ``ppscope cache clear``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import random
import re
import shutil
import socket
import stat
import time
import uuid
import warnings
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # not POSIX: the first rename wins
    fcntl = None  # type: ignore[assignment]

CACHE_NAME = ".ppscope-cache"
MANIFEST = "manifest.json"
DEFAULT_MAX = 20 * 10**9
_TMP = ".tmp-"
_STALE_TMP_S = 24 * 3600
_KEY = re.compile(r"\.[0-9a-f]{16}$")
# Files of the single-file layout used before entries became directories.
_OLD_LAYOUT = re.compile(
    r"\.[0-9a-f]{16}\.(?:meta\.json|lines\.parquet|fix\.parquet|kinds\.parquet|partial)$"
)
_SAMPLES = 16
_BLOCK = 4 << 10
_END = 64 << 10
CONTENT_BLOCK = 1 << 20
"""Bytes of input per content checksum."""
WHOLE_CHECK = 64 << 20
"""An input up to this size is checked whole on each reuse of its entry."""
CHECKED_BLOCKS = 16
"""Blocks of a larger input checked on each reuse, besides its first and last."""
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
_warned_full = False


class CacheWarning(UserWarning):
    """The cache could not be used as it is: an entry rebuilt, or running without the cache."""


def user_cache() -> Path:
    """``~/.cache/ppscope``."""
    return Path.home() / ".cache" / "ppscope"


def cache_dir(path: Path) -> Path | None:
    """``PPSCOPE_CACHE_DIR`` when set, else ``.ppscope-cache`` beside the input, else the user's
    cache; None when none is writable."""
    chosen = os.environ.get("PPSCOPE_CACHE_DIR", "").strip()
    candidates = [Path(chosen)] if chosen else [path.parent / CACHE_NAME, user_cache()]
    for candidate in candidates:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            probe = candidate / f".probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            probe.touch()
            probe.unlink()
            return candidate
        except OSError:
            continue
    return None


def fingerprint(path: Path) -> str:
    """A digest of the file's size, first and last 64 KiB and 16 evenly spaced 4 KiB blocks."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as f:
        digest.update(f.read(_END))
        for k in range(1, _SAMPLES + 1):
            f.seek(size * k // (_SAMPLES + 1))
            digest.update(f.read(_BLOCK))
        f.seek(max(0, size - _END))
        digest.update(f.read(_END))
    return digest.hexdigest()[:32]


def entry_key(path: Path, version: str) -> str:
    """The cache key of ``path`` as typed by code of ``version``."""
    st = path.stat()
    raw = f"{st.st_size}|{st.st_mtime_ns}|{fingerprint(path)}|{version}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def entry_path(root: Path, path: Path, key: str) -> Path:
    return root / f"{path.name}.{key}"


@contextlib.contextmanager
def locked(root: Path, entry: Path) -> Iterator[None]:
    """Hold the build lock of ``entry`` (blocking); a no-op where ``fcntl`` is missing."""
    if fcntl is None:
        yield
        return
    with (root / f".{entry.name}.lock").open("a+b") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def temp_entry(root: Path, entry: Path) -> Path:
    """A fresh directory to build ``entry`` in: named after this host and process, so a
    leftover of a killed build is recognized and removed."""
    name = f"{_TMP}{entry.name}.{_host()}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp = root / name
    tmp.mkdir()
    return tmp


def publish(tmp: Path, entry: Path) -> None:
    """Rename a finished build into place; a damaged old entry is moved away first."""
    if entry.exists():
        trash = entry.with_name(f"{_TMP}{entry.name}.old.{uuid.uuid4().hex[:8]}")
        with contextlib.suppress(OSError):
            entry.rename(trash)
            shutil.rmtree(trash, ignore_errors=True)
    try:
        tmp.rename(entry)
    except OSError:  # another builder got there first (no lock on this system)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    touch(entry)


def read_manifest(entry: Path) -> dict[str, Any] | None:
    """The manifest of an entry when it is a regular file whose checksum matches; else None."""
    try:
        data = regular_bytes(entry / MANIFEST, 16 << 20)
        manifest = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(manifest, dict) or manifest.get("checksum") != _checksum(manifest):
        return None
    return manifest


def manifest_altered(entry: Path) -> bool:
    """Whether the entry holds a readable manifest whose checksum does not match (an edit)."""
    try:
        manifest = json.loads(regular_bytes(entry / MANIFEST, 16 << 20))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(manifest, dict) and manifest.get("checksum") != _checksum(manifest)


def write_manifest(directory: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Write ``manifest`` with its checksum, through a temporary file renamed into place."""
    sealed = {k: v for k, v in manifest.items() if k != "checksum"}
    sealed["checksum"] = _checksum(sealed)
    tmp = directory / f"{MANIFEST}.tmp"
    with tmp.open("w", encoding="utf-8") as f:
        f.write(json.dumps(sealed))
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(directory / MANIFEST)
    return sealed


def _checksum(manifest: dict[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def regular_bytes(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; anything else (a FIFO, a
    device, a directory, a larger file) is an ``OSError`` and is never opened for reading."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
        raise OSError(errno.EINVAL, "not a cache file", str(path))
    with _open_regular(path, st) as f:
        return f.read(limit + 1)[:limit]


def piece_facts(path: Path) -> dict[str, Any]:
    """Size and checksum of a written piece (the whole file): a reader checks both, so a cut,
    missing, replaced or foreign piece is never read as this one. A piece that is not a
    regular file is an ``OSError`` before it is opened."""
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    digest = hashlib.sha256()
    with _open_regular(path, st) as f:
        while block := f.read(CONTENT_BLOCK):
            digest.update(block)
    return {"bytes": st.st_size, "sha256": digest.hexdigest()[:32]}


def _open_regular(path: Path, st: os.stat_result) -> Any:
    """Open a file ``stat`` called regular, refusing one swapped in since (non-blocking, so a
    FIFO put in its place cannot hang the open)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    now = os.fstat(fd)
    if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
        os.close(fd)
        raise OSError(errno.EINVAL, "replaced while opened", str(path))
    return os.fdopen(fd, "rb")


def content_blocks(path: Path) -> dict[str, Any]:
    """The input's size and a CRC-32 of each ``CONTENT_BLOCK`` bytes, recorded at build."""
    sums = []
    buffer = bytearray(CONTENT_BLOCK)
    view = memoryview(buffer)
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        while n := f.readinto(buffer):
            sums.append(zlib.crc32(view[:n]))
    return {"bytes": size, "block": CONTENT_BLOCK, "crc32": sums}


def same_content(path: Path, recorded: Any) -> bool:
    """Whether ``path`` still holds what ``content_blocks`` recorded: every block when the
    input is at most ``WHOLE_CHECK`` bytes, else the first, the last and ``CHECKED_BLOCKS``
    drawn at random."""
    if not isinstance(recorded, dict):
        return False
    sums, block, size = recorded.get("crc32"), recorded.get("block"), recorded.get("bytes")
    if not isinstance(sums, list) or not isinstance(block, int) or block <= 0:
        return False
    try:
        if path.stat().st_size != size or len(sums) != -(-size // block):
            return False
        wanted = range(len(sums))
        if size > WHOLE_CHECK:
            middle = random.sample(range(1, len(sums) - 1), min(CHECKED_BLOCKS, len(sums) - 2))
            wanted = sorted({0, len(sums) - 1, *middle})
        with path.open("rb") as f:
            for k in wanted:
                f.seek(k * block)
                if zlib.crc32(f.read(block)) != sums[k]:
                    return False
    except OSError:
        return False
    return True


def is_disk_full(error: BaseException) -> bool:
    """Whether an error is a full disk or quota (an ``OSError``, or polars' Parquet writer
    reporting the OS error in its text)."""
    if isinstance(error, OSError):
        return error.errno in _DISK_FULL
    text = str(error)
    return any(f"os error {n})" in text for n in _DISK_FULL) or "No space left" in text


def warn_disk_full(root: Path, error: BaseException) -> None:
    """One ``CacheWarning`` per process: the cache could not be written, ppscope goes on
    without it."""
    global _warned_full
    if _warned_full:
        return
    _warned_full = True
    quota = (isinstance(error, OSError) and error.errno == errno.EDQUOT) or "os error 122)" in str(
        error
    )
    reason = "disk quota exceeded" if quota else "no space left on device"
    warnings.warn(f"{root}: {reason}; running without the cache", CacheWarning, stacklevel=3)


def warn_rebuilt(entry: Path, why: str) -> None:
    """A ``CacheWarning`` that a damaged or altered entry is rebuilt."""
    warnings.warn(f"{entry}: {why}; rebuilt", CacheWarning, stacklevel=3)


def touch(entry: Path) -> None:
    """Mark an entry used (eviction removes the least recently used first). The time is set
    from the fine clock: file systems stamp with a coarse one (a few ms), which would tie two
    uses in quick succession."""
    now = time.time_ns()
    with contextlib.suppress(OSError):
        os.utime(entry / MANIFEST, ns=(now, now))


def cache_max() -> int:
    """``PPSCOPE_CACHE_MAX`` in bytes (``20G``, ``500M``, ``123456``); default 20 GB."""
    text = os.environ.get("PPSCOPE_CACHE_MAX", "").strip().upper().removesuffix("B")
    if not text:
        return DEFAULT_MAX
    scale = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in "KMGT" else text
    try:
        return int(float(number) * scale)
    except ValueError:
        return DEFAULT_MAX


@dataclass(frozen=True)
class Entry:
    """One cache entry as ``ppscope cache info`` shows it."""

    path: Path
    source: str | None
    bytes: int
    last_used: float


def entries(root: Path) -> list[Entry]:
    """The finished entries of a cache directory, least recently used first."""
    found = []
    if not root.is_dir():
        return found
    for child in root.iterdir():
        if not child.is_dir() or child.name.startswith(".") or not _KEY.search(child.name):
            continue
        manifest = read_manifest(child)
        try:
            used = (child / MANIFEST).stat().st_mtime if manifest else child.stat().st_mtime
        except OSError:
            continue
        size = sum(f.stat().st_size for f in child.iterdir() if f.is_file())
        source = manifest.get("source", {}).get("path") if manifest else None
        found.append(Entry(child, source, size, used))
    return sorted(found, key=lambda e: e.last_used)


def sweep(root: Path, keep: Path | None = None) -> None:
    """Remove leftovers of killed builds and of the old layout, then evict down to the limit."""
    now = time.time()
    host = _host()
    for child in list(root.iterdir()) if root.is_dir() else []:
        name = child.name
        with contextlib.suppress(OSError):
            if name.startswith(_TMP):
                if _abandoned(name, host) or now - child.stat().st_mtime > _STALE_TMP_S:
                    shutil.rmtree(child, ignore_errors=True)
            elif _OLD_LAYOUT.search(name) and child.is_file():
                child.unlink()
            elif (
                name.startswith(".")
                and name.endswith(".lock")
                and not (root / name[1:].removesuffix(".lock")).exists()
                and now - child.stat().st_mtime > _STALE_TMP_S
            ):
                _drop_lock(child)  # old and unheld: no builder can be waiting on it
    evict(root, cache_max(), keep)


def evict(root: Path, limit: int, keep: Path | None = None) -> list[Path]:
    """Remove least recently used entries until the directory holds at most ``limit`` bytes."""
    found = entries(root)
    total = sum(e.bytes for e in found)
    removed = []
    for e in found:
        if total <= limit:
            break
        if keep is not None and e.path == keep:
            continue
        with locked(root, e.path):
            shutil.rmtree(e.path, ignore_errors=True)
        total -= e.bytes
        removed.append(e.path)
    return removed


def clear(root: Path) -> int:
    """Remove every entry and leftover of a cache directory; the bytes freed."""
    freed = 0
    for e in entries(root):
        with locked(root, e.path):
            shutil.rmtree(e.path, ignore_errors=True)
        freed += e.bytes
    sweep(root)
    return freed


def _host() -> str:
    return socket.gethostname().replace(".", "-") or "host"


def _abandoned(name: str, host: str) -> bool:
    """A temporary build directory whose process (on this host) has ended."""
    parts = name.rsplit(".", 3)
    if len(parts) != 4 or parts[1] != host or not parts[2].isdigit():
        return False
    try:
        os.kill(int(parts[2]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def _drop_lock(lock: Path) -> None:
    """Remove a lock file nobody holds."""
    if fcntl is None:
        return
    with lock.open("a+b") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return
        lock.unlink()
