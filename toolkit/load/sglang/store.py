"""One SGLang log file → its typed line store: Parquet pieces and a manifest.

The file is read in byte-range chunks, each typed into its own piece by a pool of threads
(``chunks``), so memory stays bounded by a few chunks whatever the file's size, and both cores
work. The manifest (written last, with a checksum of itself) lists the pieces with their sizes
and checksums and holds what the pass learned: wrapper, counts per kind, odd lines, clock
offset, rank and header texts. A store lives in the cache (``toolkit.load.cache``: keyed by the
file's size, mtime and content fingerprint and by ``store_version``), in a dataset written by
``ppscope ingest``, or in a temporary directory; it is read back the same way from each.

``store_version`` is what an entry depends on besides its input: the declared columns the store
writes, the source of the code that types them, and the ppscope and polars versions. A changed
field list can never be served from an entry written before the change.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
import tempfile
from collections import deque
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import polars as pl

from toolkit._version import __version__
from toolkit.errors import ToolkitError
from toolkit.load import cache as cache_io
from toolkit.load import text as lines_io
from toolkit.load.sglang.chunks import (
    CHUNK_BYTES,
    Job,
    empty_chunk,
    file_job,
    lane_loading,
    merge_stats,
    round_offset,
    type_chunk,
)
from toolkit.schema import sglang as sglang_schema

FORMAT = 2  # of the manifest
WORKERS = max(1, min(2, os.cpu_count() or 1))


class StoreError(Exception):
    """A store that is missing, damaged or written by other code (rebuilt, or reported);
    ``altered`` when its files were changed after it was written (a rebuild is noted)."""

    def __init__(self, message: str, *, altered: bool = False) -> None:
        super().__init__(message)
        self.altered = altered


@dataclass(frozen=True)
class Store:
    """Where one file's typed lines are kept, and what the pass learned about it."""

    path: str  # the input file as given
    wrapper: str
    lines: int
    clock_offset_s: float  # added to wrapper timestamps to put them on SGLang's clock
    problems: tuple[str, ...]  # file-level trouble, e.g. a cut compressed stream
    counts: dict[str, int]  # lines per kind
    odd: dict[str, int]  # unreadable (invalid UTF-8 or control characters), undated
    ranks: tuple[str, ...]  # distinct rank texts (" PP3 TP0")
    headers: tuple[str, ...]  # distinct wrapper headers ("node python3[85690]")
    pieces: tuple[Path, ...]
    fixes: tuple[Path, ...]
    long_lines: int = 0  # lines cut at ``text.LINE_CAP``
    piece_counts: tuple[dict[str, int], ...] = ()  # lines per kind in each piece

    def scan(self, kinds: Collection[str] | None = None) -> pl.LazyFrame:
        """Every typed line, lazily, in file order (a column a piece does not hold is null).

        With ``kinds``, only the pieces holding a line of one of them are read (the rows of
        other kinds are still there to filter out).
        """
        pieces = list(self.pieces)
        if kinds is not None and len(self.piece_counts) == len(pieces):
            held = [
                p for p, n in zip(pieces, self.piece_counts, strict=True) if any(map(n.get, kinds))
            ]
            pieces = held or pieces[:1]
        schema = pl.read_parquet_schema(self.pieces[0]) if pieces[0] != self.pieces[0] else None
        return pl.scan_parquet(pieces, schema=schema, missing_columns="insert")

    def fixups(self) -> pl.DataFrame:
        """Batch lines the fast plan left unresolved, typed by the slower tiers."""
        frames = [pl.read_parquet(p) for p in self.fixes]
        return pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]


def open_store(
    path: Path,
    workdir: Path,
    cache: bool,
    *,
    chunk_bytes: int | None = None,
    workers: int = WORKERS,
) -> Store:
    """The store of ``path``: read from the cache when whole and current, else built by one
    pass (into the cache, or into ``workdir`` when caching is off or no directory is
    writable)."""
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    root = cache_io.cache_dir(path) if cache else None
    if root is None:
        out = Path(tempfile.mkdtemp(prefix=f"{path.name}.", suffix=".store", dir=workdir))
        try:
            build_store(path, out, chunk_bytes=chunk_bytes, workers=workers)
        except (OSError, pl.exceptions.PolarsError) as e:
            shutil.rmtree(out, ignore_errors=True)
            if cache_io.is_disk_full(e):
                raise ToolkitError(
                    f"{path}: no space left on device for its typed lines (in {workdir})"
                ) from None
            raise
        return read_store(out)
    try:
        return _open_cached(path, root, chunk_bytes=chunk_bytes, workers=workers)
    except (OSError, pl.exceptions.PolarsError) as e:
        if not cache_io.is_disk_full(e):
            raise
        cache_io.warn_disk_full(root, e)
    return open_store(path, workdir, False, chunk_bytes=chunk_bytes, workers=workers)


def _open_cached(path: Path, root: Path, *, chunk_bytes: int, workers: int) -> Store:
    """The store of ``path`` from the cache in ``root``, built and published when missing."""
    key = cache_io.entry_key(path, store_version())
    entry = cache_io.entry_path(root, path, key)
    for attempt in range(3):  # an entry evicted or replaced by another process just now: again
        found = _cached(entry, key, path, note=not attempt)
        if found is not None:
            return found
        with cache_io.locked(root, entry):
            if _cached(entry, key, path) is None:  # else built while we waited for the lock
                tmp = cache_io.temp_entry(root, entry)
                try:
                    build_store(path, tmp, key=key, chunk_bytes=chunk_bytes, workers=workers)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                if _cached(entry, key, path) is None:
                    cache_io.publish(tmp, entry)
                else:
                    shutil.rmtree(tmp, ignore_errors=True)
        cache_io.sweep(root, keep=entry)
    return read_store(entry, key=key, path=str(path))


def _cached(entry: Path, key: str, path: Path, *, note: bool = False) -> Store | None:
    """The entry's store when whole and current; ``note``: warn when its files were altered
    (it is then rebuilt)."""
    try:
        store = read_store(entry, key=key, path=str(path))
    except StoreError as e:
        if note and entry.exists() and (e.altered or cache_io.manifest_altered(entry)):
            cache_io.warn_rebuilt(entry, str(e).replace(f"{entry}/", "").replace(f"{entry}: ", ""))
        return None
    cache_io.touch(entry)
    return store


def read_store(directory: Path, *, key: str | None = None, path: str | None = None) -> Store:
    """The store in ``directory``, verified: the manifest's checksum, every piece a regular
    file with the size and checksum the manifest records, written by this version of the code
    (and, for ``key`` and ``path`` when given, for that input as it still is)."""
    manifest = cache_io.read_manifest(directory)
    if manifest is None:
        if cache_io.manifest_altered(directory):
            raise StoreError(f"{directory}: {cache_io.MANIFEST} was edited (checksum mismatch)")
        raise StoreError(f"{directory}: no readable {cache_io.MANIFEST}")
    if manifest.get("format") != FORMAT or manifest.get("version") != store_version():
        raise StoreError(f"{directory}: written by another version of ppscope")
    if key is not None and manifest.get("key") != key:
        raise StoreError(f"{directory}: written for another input")
    source = manifest.get("source")
    content = source.get("content") if isinstance(source, dict) else None
    if key is not None and path is not None and not cache_io.same_content(Path(path), content):
        raise StoreError(f"{directory}: the input changed since (same size and time)")
    try:
        pieces = [_piece(directory, p) for p in manifest["pieces"]]
        fixes = [_piece(directory, p) for p in manifest["fixes"]]
        return Store(
            path=path if path is not None else manifest["source"]["path"],
            wrapper=manifest["wrapper"],
            lines=manifest["lines"],
            clock_offset_s=manifest["offset"],
            problems=tuple(manifest["problems"]),
            counts=manifest["counts"],
            odd=manifest["odd"],
            ranks=tuple(manifest["ranks"]),
            headers=tuple(manifest["headers"]),
            pieces=tuple(pieces),
            fixes=tuple(fixes),
            long_lines=manifest.get("long_lines", 0),
            piece_counts=tuple(p["counts"] for p in manifest["pieces"]),
        )
    except (KeyError, TypeError) as e:
        raise StoreError(f"{directory}: manifest lacks {e}") from None


def _piece(directory: Path, piece: dict[str, Any]) -> Path:
    path = directory / str(piece["name"])
    if path.parent != directory:
        raise StoreError(f"{path}: outside its entry", altered=True)
    try:
        size = os.stat(path).st_size
    except OSError:
        raise StoreError(f"{path}: missing", altered=True) from None
    if size != piece["bytes"]:
        why = f"{size} bytes, not {piece['bytes']} (cut or replaced)"
        raise StoreError(f"{path}: {why}", altered=True)
    try:
        facts = cache_io.piece_facts(path)
    except OSError:
        raise StoreError(f"{path}: not a regular file", altered=True) from None
    if facts != {"bytes": piece["bytes"], "sha256": piece["sha256"]}:
        raise StoreError(f"{path}: not the piece the manifest lists (checksum)", altered=True)
    return path


def build_store(
    path: Path,
    out: Path,
    *,
    key: str | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    workers: int = WORKERS,
) -> dict[str, Any]:
    """Type ``path`` into pieces in ``out`` and write the manifest last; returns it.

    One thread reads chunks in order; ``workers`` threads type them (polars releases the
    GIL). At most ``workers + 1`` chunks are in memory at once, read into ``workers + 2``
    buffers in turn.
    """
    lane_loading()
    job = file_job(path)
    problems: list[str] = []
    done: list[dict[str, Any]] = []
    with ThreadPoolExecutor(workers) as pool:
        pending: deque[Future[dict[str, Any]]] = deque()
        lineno = 1
        # a chunk's buffer is read again ``workers + 2`` chunks later: by then it is typed
        chunks = lines_io.iter_chunks(path, chunk_bytes, problems=problems, buffers=workers + 2)
        for chunk in chunks:
            pending.append(pool.submit(type_chunk, job, chunk, lineno, out))
            lineno += chunk.lines
            while len(pending) > workers:
                done.append(pending.popleft().result())
        done += [f.result() for f in pending]
    if not done:
        done.append(type_chunk(job, empty_chunk(), 1, out))
    return write_manifest(out, path, job, done, problems, key=key)


def write_manifest(
    out: Path,
    path: Path,
    job: Job,
    chunks: list[dict[str, Any]],
    problems: list[str],
    *,
    key: str | None = None,
) -> dict[str, Any]:
    """The manifest of a store from its chunks' facts, written last (the store is whole once
    it exists)."""
    stats = merge_stats(sorted(chunks, key=lambda c: c["index"]))
    try:
        st = path.stat()
        source: dict[str, Any] = {
            "path": str(path),
            "bytes": st.st_size,
            "mtime_ns": st.st_mtime_ns,
        }
        if key is not None:  # a cache entry: checked against the input on each reuse
            source["content"] = cache_io.content_blocks(path)
    except OSError:
        source = {"path": str(path)}
    manifest = {
        "format": FORMAT,
        "version": store_version(),
        "key": key,
        "source": source,
        "wrapper": job.wrapper,
        "problems": problems,
        **stats,
        "offset": round_offset(stats["offset"]),
    }
    return cache_io.write_manifest(out, manifest)


def store_version() -> str:
    """What a stored entry depends on besides its input file.

    The declared columns are read each time (cheap), the code's source once per process.
    """
    return f"{__version__}|{pl.__version__}|{declared_columns()}|{code_version()}"


def declared_columns() -> str:
    """A digest of the columns the store writes, as ``toolkit.schema.sglang`` declares them:
    every batch-line field (printed key, column, type) and the names and types of the
    ``EVENTS`` and ``BATCHES`` tables."""
    fields = [f"{f.key}>{f.column}:{f.dtype!r}" for f in sglang_schema.BATCH_FIELDS]
    tables = [
        f"{table}.{name}:{dtype!r}"
        for table in ("EVENTS", "BATCHES")
        for name, dtype in getattr(sglang_schema, table).items()
    ]
    return hashlib.sha256("\n".join(fields + tables).encode()).hexdigest()[:16]


@cache
def code_version() -> str:
    """A digest of the source of the modules that shape what is stored: this one and every
    ``toolkit.load`` or ``toolkit.schema`` module it imports, directly or not."""
    digest = hashlib.sha256()
    for name in sorted(store_modules()):
        digest.update(name.encode())
        digest.update(_source(name))
    return digest.hexdigest()[:16]


def store_modules() -> set[str]:
    """This module and the ``toolkit.load`` / ``toolkit.schema`` modules it imports, closed
    over their own imports (read from their source with ``ast``, not by importing)."""
    seen: set[str] = set()
    pending = [__name__]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse(_source(name))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found = [_module_of(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            else:
                continue
            pending += [m for m in found if m.startswith(("toolkit.load", "toolkit.schema"))]
    return seen


_ROOT = Path(__file__).resolve().parents[3]  # the folder that holds the ``toolkit`` package


def _file_of(module: str) -> Path | None:
    """The source file of a ``toolkit`` module, found on disk (nothing is imported)."""
    base = _ROOT.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_of(package: str, name: str) -> str:
    """``from package import name``: the submodule ``package.name`` if it is one."""
    return f"{package}.{name}" if _file_of(f"{package}.{name}") else package


def _source(module: str) -> bytes:
    path = _file_of(module)
    return path.read_bytes() if path else b""
