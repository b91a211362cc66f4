"""GPU traces typed once: a file's ``Part`` kept as Parquet in the same cache as the logs.

An entry holds ``samples``, ``skipped`` and ``unavailable`` and a manifest written last, under
the key of ``toolkit.load.cache`` (size, mtime, content fingerprint) and a version made of the
reader's options, the source of the GPU loaders and declared columns, and the ppscope and
polars versions. A damaged entry is rebuilt; strict loads are never served from the cache (they
must see every line to raise).
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path

import polars as pl

from toolkit._version import __version__
from toolkit.load import cache as cache_io
from toolkit.load.gpu.format import Options, Part

_TABLES = ("samples", "skipped", "unavailable")
_FORMAT = "ppscope-gpu-part-1"


def cached_part(path: Path, fmt: str, options: Options, read: Callable[[], Part]) -> Part:
    """``read()`` of ``path``, from the cache when an entry for the same file and options is
    whole, else read and stored."""
    if options.strict:
        return read()
    root = cache_io.cache_dir(path)
    if root is None:
        return read()
    version = _version(fmt, options)
    key = cache_io.entry_key(path, version)
    entry = root / f"{path.name}.{key}"
    found = _load(entry, key, path, options.source)
    if found is not None:
        cache_io.touch(entry)
        return found
    if entry.exists() and cache_io.manifest_altered(entry):
        cache_io.warn_rebuilt(entry, f"{cache_io.MANIFEST} was edited (checksum mismatch)")
    part = read()
    try:
        with cache_io.locked(root, entry):
            if _load(entry, key, path, options.source) is None:
                tmp = cache_io.temp_entry(root, entry)
                try:
                    _write(tmp, part, key, version, path)
                except BaseException:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise
                cache_io.publish(tmp, entry)
        cache_io.sweep(root, keep=entry)
    except (OSError, pl.exceptions.PolarsError) as e:
        if not cache_io.is_disk_full(e):
            raise
        cache_io.warn_disk_full(root, e)
    return part


def _write(out: Path, part: Part, key: str, version: str, path: Path) -> None:
    pieces = []
    for name in _TABLES:
        file = out / f"{name}.parquet"
        getattr(part, name).write_parquet(file, compression="lz4")
        pieces.append({"name": file.name, **cache_io.piece_facts(file)})
    manifest = {
        "format": _FORMAT,
        "key": key,
        "version": version,
        "source": {"path": str(path), "content": cache_io.content_blocks(path)},
        "trace_format": part.format,
        "lines": part.lines,
        "notes": list(part.notes),
        "metric_lines": part.metric_lines,
        "pieces": pieces,
    }
    cache_io.write_manifest(out, manifest)


def _load(entry: Path, key: str, path: Path, source: str) -> Part | None:
    manifest = cache_io.read_manifest(entry)
    if manifest is None or manifest.get("format") != _FORMAT or manifest.get("key") != key:
        return None
    try:
        if not cache_io.same_content(path, manifest["source"]["content"]):
            return None
        for piece in manifest["pieces"]:
            if piece["name"] not in {f"{t}.parquet" for t in _TABLES}:
                return None
            if cache_io.piece_facts(entry / piece["name"]) != {
                k: piece[k] for k in ("bytes", "sha256")
            }:
                return None
        tables = {}
        for name in _TABLES:
            df = pl.read_parquet(entry / f"{name}.parquet")
            if "source" in df.columns:
                df = df.with_columns(source=pl.lit(source, pl.String))
            tables[name] = df
        return Part(
            source,
            manifest["trace_format"],
            manifest["lines"],
            tables["samples"],
            tables["skipped"],
            tables["unavailable"],
            tuple(manifest["notes"]),
            manifest["metric_lines"],  # a manifest without it is from an older ppscope
        )
    except (OSError, KeyError, TypeError, pl.exceptions.PolarsError):
        return None


def _version(fmt: str, options: Options) -> str:
    fields = list(options.fields) if options.fields else None
    return f"{fmt}|{fields}|{options.interval_s}|{__version__}|{pl.__version__}|{_code()}"


@cache
def _code() -> str:
    """A digest of the GPU loaders and declared columns (any change rebuilds the entries)."""
    here = Path(__file__).resolve().parent
    files = [
        *sorted(here.glob("*.py")),
        here.parent / "text.py",
        here.parent / "compression.py",
        here.parent.parent / "schema" / "gpu.py",
    ]
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()[:16]
