"""A fleet of SGLang logs typed once into one Parquet dataset, locally or on a Dask cluster.

Layout (``ppscope ingest LOG... -o DATASET``)::

    DATASET/dataset.json                            the files, written last
    DATASET/host=<host>/file=<name>-<digest>/       one store per input file:
        part-00000.parquet ...                      its typed lines, one piece per 12 MB chunk
        fix-00000.parquet ...                       batch lines typed by the slower tiers
        manifest.json                               pieces, counts, wrapper, clock offset

Each store is what the line cache holds for that file, so ``open_dataset`` reads it back as the
same tables a local parse gives, row for row. On Dask a plain file is cut into chunks that
workers count (a first, cheap pass for line numbers) and type (the second) independently: a
fleet of F files of B bytes is about F × B / 12 MB typing tasks; a compressed file is one task.
Workers write the pieces themselves, so DATASET must be a path every worker can reach.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from toolkit.errors import ToolkitError
from toolkit.load import compression
from toolkit.load import text as lines_io
from toolkit.load.sglang import store as store_io
from toolkit.load.sglang.chunks import Job, empty_chunk, file_job, type_chunk
from toolkit.load.sglang.wrappers import decode_header, wrapper_named

__all__ = ["DATASET_FILE", "dataset_stores", "ingest", "is_dataset"]

DATASET_FILE = "dataset.json"
_FORMAT = "ppscope-sglang-dataset"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def is_dataset(path: Path) -> bool:
    """True when ``path`` is a directory written by ``ingest``."""
    try:
        return path.is_dir() and json.loads((path / DATASET_FILE).read_text())["format"] == _FORMAT
    except (OSError, ValueError, KeyError, TypeError):
        return False


def dataset_stores(path: Path) -> list[store_io.Store]:
    """The stores of a dataset, in the order its files were given to ``ingest``."""
    if not is_dataset(path):
        raise ToolkitError(f"{path}: not a dataset written by ppscope ingest")
    files = json.loads((path / DATASET_FILE).read_text())["files"]
    stores = []
    for f in files:
        try:
            stores.append(store_io.read_store(path / f["dir"], path=f["path"]))
        except store_io.StoreError as e:
            raise ToolkitError(f"{e}: run ppscope ingest again for {f['path']}") from None
    return stores


def ingest(
    paths: Iterable[str | Path],
    out: str | Path,
    *,
    client: Any = None,
    chunk_bytes: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Type every log into one dataset in ``out``: on a Dask ``client`` when given (files and
    chunks as tasks), else here with two threads per file. Returns ``dataset.json``'s content.
    """
    files = [Path(p) for p in paths]
    if not files:
        raise ToolkitError("no log files given")
    for f in files:
        if not f.is_file():
            raise ToolkitError(f"{f}: no such file")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / DATASET_FILE).unlink(missing_ok=True)  # the dataset is whole again once rewritten
    size = chunk_bytes or store_io.CHUNK_BYTES
    entries = []
    plans = _map(client, plan_file, files, [size] * len(files))
    for path, (job, host, gz, nbytes) in zip(files, plans, strict=True):
        entry = {"path": str(path), "host": host, "dir": _file_dir(path, host)}
        target = out / entry["dir"]
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        entries.append((entry, job, gz, nbytes))
    if client is None:
        for entry, _, _, _ in entries:
            if progress:
                progress(entry["path"])
            store_io.build_store(Path(entry["path"]), out / entry["dir"], chunk_bytes=size)
    else:
        _on_dask(client, out, entries, size)
    record = {"format": _FORMAT, "files": [e for e, *_ in entries]}
    tmp = out / f"{DATASET_FILE}.tmp"
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(out / DATASET_FILE)
    return record


def plan_file(path: Path, chunk_bytes: int) -> tuple[Job, str, bool, int]:
    """What typing a file needs (sampled once), its host, whether it is compressed, its size."""
    job = file_job(path)
    head = lines_io.head_lines(path, n=200)
    wrapper = wrapper_named(job.wrapper)
    host = None
    for line in head:
        if wrapper.pattern.match(line):
            host = decode_header(job.wrapper, _header(job.wrapper, line))[0]
            if host:
                break
    return job, host or "unknown", compression.codec_of(path) is not None, path.stat().st_size


def count_chunk(path: Path, index: int, chunk_bytes: int) -> int:
    """Lines of chunk ``index`` of a plain file (the first pass: line numbers)."""
    chunk = lines_io.read_chunk(path, index, chunk_bytes)
    return chunk.lines if chunk is not None else 0


def type_range(
    job: Job, path: Path, index: int, chunk_bytes: int, first_lineno: int, out: Path
) -> dict[str, Any] | None:
    """Type chunk ``index`` of a plain file into ``out`` (the second pass)."""
    chunk = lines_io.read_chunk(path, index, chunk_bytes)
    return type_chunk(job, chunk, first_lineno, out) if chunk is not None else None


def build_whole(path: Path, out: Path, chunk_bytes: int) -> dict[str, Any]:
    """A file read in one pass by one worker (compressed data cannot be cut unread)."""
    return store_io.build_store(path, out, chunk_bytes=chunk_bytes, workers=1)


def _on_dask(client: Any, out: Path, entries: list[tuple], size: int) -> None:
    plain = [(e, job, n) for e, job, gz, n in entries if not gz]
    whole = [e for e, _, gz, _ in entries if gz]
    tasks = [(e, job, k) for e, job, n in plain for k in range(lines_io.chunk_count(n, size))]
    counts = _map(
        client, count_chunk, [Path(e["path"]) for e, _, _ in tasks], [k for *_, k in tasks],
        [size] * len(tasks),
    )  # fmt: skip
    firsts, next_line = [], {}
    for (e, _, _), n in zip(tasks, counts, strict=True):
        firsts.append(next_line.get(e["path"], 1))
        next_line[e["path"]] = firsts[-1] + n
    typed = client.map(
        type_range,
        [job for _, job, _ in tasks],
        [Path(e["path"]) for e, _, _ in tasks],
        [k for *_, k in tasks],
        [size] * len(tasks),
        firsts,
        [out / e["dir"] for e, _, _ in tasks],
        pure=False,
    )
    gz = client.map(
        build_whole,
        [Path(e["path"]) for e in whole],
        [out / e["dir"] for e in whole],
        [size] * len(whole),
        pure=False,
    )
    results = client.gather(typed)
    client.gather(gz)
    for e, job, _ in plain:
        chunks = [r for (t, _, _), r in zip(tasks, results, strict=True) if t is e and r]
        path = Path(e["path"])
        if not chunks:
            chunks = [type_chunk(job, empty_chunk(), 1, out / e["dir"])]
        store_io.write_manifest(out / e["dir"], path, job, chunks, [])


def _map(client: Any, fn: Callable[..., Any], *args: list[Any]) -> list[Any]:
    if client is None:
        return [fn(*a) for a in zip(*args, strict=True)]
    return client.gather(client.map(fn, *args, pure=False))


def _header(wrapper: str, line: str) -> str | None:
    """The wrapper header of one raw line (``host ident[pid]``), as the fast plan cuts it."""
    if wrapper.startswith("journald") and wrapper != "journald-json":
        end = line.find(" ", 16) if not wrapper.endswith("iso") else line.find(" ")
        if wrapper == "journald-short-precise":
            end = 22
        elif wrapper == "journald-short":
            end = 15
        at = line.find(": ", end)
        return line[end + 1 : at] if at > end else None
    return None


def _file_dir(path: Path, host: str) -> str:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    return f"host={_UNSAFE.sub('_', host)}/file={_UNSAFE.sub('_', path.name)}-{digest}"
