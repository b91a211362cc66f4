"""One SGLang log file → its typed line store (Parquet), cached next to the input.

The store of a file is four pieces: ``lines`` (every line, typed by the streaming pass),
``fix`` (batch lines the pass left unresolved, typed by the slower tiers), ``kinds`` (``other``
lines that are errors, progress bars or journal markers) and ``meta`` (wrapper, counts, clock
offset). They are keyed by the file's path, size and mtime and by what shaped them
(``store_version``): the declared columns the store writes, the source of the code that types
them, and the ppscope and polars versions. A changed field list can never be served from an
entry written before the change.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import polars as pl

from toolkit._version import __version__
from toolkit.load import text as lines_io
from toolkit.load.sglang.batch_line import KEY_COLUMN, parse_batch_message
from toolkit.load.sglang.plan import (
    Shape,
    line_plan,
    refine_kind,
    sample_shapes,
    type_by_key,
    unreadable,
)
from toolkit.load.sglang.wrappers import sniff_wrapper, wrapper_named
from toolkit.schema import sglang as sglang_schema
from toolkit.schema.sglang import BATCHES

_YEAR = re.compile(r"\[(\d{4})-\d\d-\d\d \d\d:\d\d:\d\d")


@dataclass(frozen=True)
class Store:
    """Where one file's typed lines are kept, and what the pass learned about it."""

    path: str  # the input file as given
    wrapper: str
    lines: int
    clock_offset_s: float  # added to wrapper timestamps to put them on SGLang's clock
    problems: tuple[str, ...]  # file-level trouble, e.g. a cut .gz
    counts: dict[str, int]  # lines per kind
    odd: dict[str, int]  # unreadable (invalid UTF-8 or control characters), undated
    ranks: tuple[str, ...]  # distinct rank texts (" PP3 TP0")
    headers: tuple[str, ...]  # distinct wrapper headers ("node python3[85690]")
    lines_path: Path
    fix_path: Path
    kinds_path: Path

    def scan(self) -> pl.LazyFrame:
        """The typed lines, with ``kind`` refined for the lines the fast pass called ``other``."""
        lf = pl.scan_parquet(self.lines_path)
        if not any(k in self.counts for k in ("error", "progress", "marker")):
            return lf
        refined = pl.scan_parquet(self.kinds_path).rename({"kind": "_refined"})
        return (
            lf.join(refined, on="lineno", how="left", maintain_order="left")
            .with_columns(kind=pl.coalesce("_refined", "kind"))
            .drop("_refined")
        )

    def fixups(self) -> pl.DataFrame:
        return pl.read_parquet(self.fix_path)


def open_store(path: Path, workdir: Path, cache: bool) -> Store:
    """The store of ``path``: read from the cache when valid, else built by one pass."""
    store_dir = cache_dir(path) if cache else workdir
    stem = store_dir / f"{path.name}.{_cache_key(path)}"
    meta_path = Path(f"{stem}.meta.json")
    if cache and meta_path.exists():
        try:
            return _from_meta(path, stem, json.loads(meta_path.read_text()))
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache entry is rebuilt
    meta = _build(path, stem, workdir)
    meta_path.write_text(json.dumps(meta))
    return _from_meta(path, stem, meta)


def _from_meta(path: Path, stem: Path, meta: dict) -> Store:
    return Store(
        path=str(path),
        wrapper=meta["wrapper"],
        lines=meta["lines"],
        clock_offset_s=meta["offset"],
        problems=tuple(meta["problems"]),
        counts=meta["counts"],
        odd=meta["odd"],
        ranks=tuple(meta["ranks"]),
        headers=tuple(meta["headers"]),
        lines_path=Path(f"{stem}.lines.parquet"),
        fix_path=Path(f"{stem}.fix.parquet"),
        kinds_path=Path(f"{stem}.kinds.parquet"),
    )


def _build(path: Path, stem: Path, workdir: Path) -> dict:
    plain, problem = lines_io.plain_copy(path, workdir)
    sample = lines_io.sample_lines(plain)
    job = _Job(
        wrapper=sniff_wrapper(sample[:400]).name,
        year=_first_year(sample),
        shapes=tuple(sample_shapes(sample)),
        ansi=lines_io.contains_byte(plain, b"\x1b"),
    )
    lines_path = _type_lines(plain, stem, job, workdir)
    if plain != path:
        plain.unlink()

    lines = pl.scan_parquet(lines_path)
    kinds = _refined_kinds(lines)
    kinds.write_parquet(f"{stem}.kinds.parquet")
    _fixups(lines).write_parquet(f"{stem}.fix.parquet")
    stats = _stats(lines)
    counts = dict(stats.pop("counts"))
    for kind, n in kinds.group_by("kind").len().iter_rows():
        counts[kind] = counts.get(kind, 0) + n
        counts["other"] -= n
    return {
        "wrapper": job.wrapper,
        "lines": stats.pop("lines"),
        "offset": _round_offset(stats.pop("offset")),
        "problems": [problem] if problem else [],
        "counts": {k: v for k, v in sorted(counts.items()) if v},
        **stats,
    }


@dataclass(frozen=True)
class _Job:
    """What the typing pass needs to know about a file (picklable, for worker processes)."""

    wrapper: str
    year: int | None
    shapes: tuple[Shape, ...]
    ansi: bool

    def plan(self, lines: pl.LazyFrame) -> pl.LazyFrame:
        return line_plan(lines, wrapper_named(self.wrapper), self.year, list(self.shapes),
                         ansi=self.ansi)  # fmt: skip


def _type_lines(plain: Path, stem: Path, job: _Job, workdir: Path) -> Path:
    """Type every line into Parquet in one streaming pass (bounded memory at any file size).

    Splitting the file over worker processes was measured no faster on 2 cores: the streaming
    engine already keeps both busy for most of the pass.
    """
    out = Path(f"{stem}.lines.parquet")
    partial = Path(f"{stem}.partial")
    job.plan(lines_io.scan_lines(plain, workdir)).sink_parquet(
        partial, compression="lz4", statistics=False
    )
    partial.replace(out)
    return out


def _stats(lf: pl.LazyFrame) -> dict:
    """Counts, odd lines, the wrapper-to-SGLang clock offset, distinct ranks and headers."""
    row = (
        lf.select(
            lines=pl.len(),
            offset=(pl.col("ts").cast(pl.Datetime("us")) - pl.col("wrapper_ts"))
            .dt.total_seconds()
            .median(),
            undated=(
                pl.col("ts").is_null()
                & pl.col("clock").is_null()
                & pl.col("wrapper_ts").is_null()
                & (pl.col("kind") != "blank")
            ).sum(),
            ranks=pl.col("ranks").drop_nulls().unique().implode(),
            headers=pl.col("header").drop_nulls().unique().implode(),
        )
        .collect(engine="streaming")
        .row(0, named=True)
    )
    counts = lf.group_by("kind").len().collect(engine="streaming")
    return {
        "lines": int(row["lines"]),
        "offset": row["offset"],
        "odd": {
            "unreadable": unreadable(lf).select(pl.len()).collect().item(),
            "undated": int(row["undated"]),
        },
        "ranks": sorted(row["ranks"]),
        "headers": sorted(row["headers"]),
        "counts": {k: int(n) for k, n in counts.iter_rows()},
    }


def _refined_kinds(lines: pl.LazyFrame) -> pl.DataFrame:
    """Lines the fast pass called ``other`` that are errors, progress bars or journal markers."""
    return (
        lines.filter(pl.col("kind") == "other")
        .select(
            "lineno", kind=refine_kind(pl.col("message"), pl.col("has_prefix"), pl.col("level"))
        )
        .filter(pl.col("kind") != "other")
        .collect(engine="streaming")
    )


_CONTEXT = ["lineno", "ts", "clock", "wrapper_ts", "ranks", "gpu_id", "kind", "message"]


def _fixups(lines: pl.LazyFrame) -> pl.DataFrame:
    """Type the batch lines the positional pass left unresolved: key by key, then in Python."""
    pending = lines.filter(pl.col("unresolved")).select(_CONTEXT)
    sample = pending.select("message").head(20_000).collect().get_column("message")
    keys = {k for message in sample for k in KEY_COLUMN if f"{k}: " in message}
    by_key = type_by_key(pending, keys).collect(engine="streaming")
    settled = (
        by_key.filter(~pl.col("unresolved"))
        .drop("unresolved", "message")
        .with_columns(complete=pl.lit(True), extra=pl.lit(None, pl.String))
    )
    rest = by_key.filter(pl.col("unresolved"))
    rows = []
    for r in rest.iter_rows(named=True):
        parsed = parse_batch_message(r["message"])
        rows.append(
            {
                **{k: r[k] for k in _CONTEXT if k != "message"},
                **(parsed.values if parsed else {}),
                "extra": parsed.extra if parsed else r["message"],
                "complete": parsed.complete if parsed else False,
            }
        )
    schema = {
        **{k: by_key.schema[k] for k in _CONTEXT if k != "message"},
        **{k: v for k, v in BATCHES.items() if k not in _CONTEXT},
        "complete": pl.Boolean,
    }
    python = pl.DataFrame(rows, schema=schema, orient="row")
    return pl.concat([settled, python], how="diagonal_relaxed")


def _cache_key(path: Path) -> str:
    st = path.stat()
    raw = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{store_version()}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


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


def _module_of(package: str, name: str) -> str:
    """``from package import name``: the submodule ``package.name`` if it is one."""
    try:
        return f"{package}.{name}" if importlib.util.find_spec(f"{package}.{name}") else package
    except ImportError:  # ``package`` is a module, ``name`` one of its attributes
        return package


def _source(module: str) -> bytes:
    loaded = sys.modules.get(module)
    origin = getattr(loaded, "__file__", None)
    if origin is None:
        spec = importlib.util.find_spec(module)
        origin = spec.origin if spec is not None else None
    return Path(origin).read_bytes() if origin else b""


def cache_dir(path: Path) -> Path:
    """``.ppscope-cache`` beside the input, else the user's cache directory."""
    for candidate in (path.parent / ".ppscope-cache", Path.home() / ".cache" / "ppscope"):
        try:
            candidate.mkdir(parents=True, exist_ok=True)
            probe = candidate / ".probe"
            probe.touch()
            probe.unlink()
            return candidate
        except OSError:
            continue
    return lines_io.workdir()


def _first_year(sample: list[str]) -> int | None:
    for line in sample:
        m = _YEAR.search(line)
        if m:
            return int(m.group(1))
    return None


def _round_offset(seconds: float | None) -> float:
    """Wrapper-to-SGLang clock offset, rounded to whole quarter hours (time zones)."""
    if seconds is None:
        return 0.0
    return float(round(seconds / 900.0) * 900)
