"""Where typed inputs are cached, under what key, and how the cache stays bounded and honest.

An entry is a directory of Parquet pieces with a ``manifest.json`` written last; it is built
under a unique temporary name and renamed into place, so a reader sees all of it or none.
Builders of one entry take a lock on ``.<entry>.lock`` (the second waits, then reads what the
first built); without ``fcntl`` the first rename wins and the loser's copy is dropped.

The key is the file's size, modification time and a content fingerprint (a digest of its head,
tail and evenly spaced blocks: cheap for multi-GB files), plus the version of what typed it.
The cache directory is ``.ppscope-cache`` beside the input, else ``~/.cache/ppscope``; after
each build its entries are evicted, least recently used first, down to ``PPSCOPE_CACHE_MAX``
bytes (default 20 GB; ``500M``, ``2G`` and plain byte counts are understood).

Entries hold the raw text of the input's lines: treat a cache directory like the logs it came
from, and clear it with ``ppscope cache clear``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import time
import uuid
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
    try:
        manifest = json.loads((entry / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


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
