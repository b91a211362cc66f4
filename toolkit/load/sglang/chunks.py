"""One chunk of an SGLang log → one typed Parquet piece, and what the pass learned from it.

A file is read in byte-range chunks (``toolkit.load.text``); each chunk is typed on its own by
the streaming plan (``plan``), its ``other`` lines refined (errors, progress bars, journal
markers), its unresolved batch lines settled by the slower tiers, and written as Parquet. What
the file-level summary needs (counts, odd lines, clock offsets, rank and header texts) comes
back as a small dict, so no chunk's text is held once its piece is written. Chunks are
independent: threads, processes or Dask workers may type them in any order.
"""

from __future__ import annotations

import functools
import re
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load import compiled, compression
from toolkit.load import text as lines_io
from toolkit.load.cache import piece_facts
from toolkit.load.sglang.batch_line import KEY_COLUMN, parse_batch_message
from toolkit.load.sglang.plan import (
    ODD_TEXT,
    Shape,
    line_plan,
    refine_kind,
    sample_shapes,
    type_by_key,
)
from toolkit.load.sglang.wrappers import sniff_wrapper, wrapper_named
from toolkit.schema.sglang import BATCHES

CHUNK_BYTES = 12 << 20
"""Bytes of a file typed at once: memory per worker is a small multiple of this."""
_YEAR = re.compile(r"\[(\d{4})-\d\d-\d\d \d\d:\d\d:\d\d")
_OFFSET_STEP_S = 900  # wrapper-to-SGLang clock offsets are whole quarter hours (time zones)


@dataclass(frozen=True)
class Job:
    """What typing a chunk needs to know about its file (picklable, for workers)."""

    wrapper: str
    year: int | None
    shapes: tuple[Shape, ...]

    def plan(self, lines: pl.LazyFrame, *, ansi: bool) -> pl.LazyFrame:
        return line_plan(lines, wrapper_named(self.wrapper), self.year, list(self.shapes),
                         ansi=ansi)  # fmt: skip


def file_job(path: Path) -> Job:
    """The wrapper, year and batch-line shapes of a file, from a sample of its lines."""
    plain = compression.codec_of(path) is None
    sample = lines_io.sample_lines(path) if plain else _compressed_head(path)
    return Job(
        wrapper=sniff_wrapper(sample[:400]).name,
        year=_first_year(sample),
        shapes=tuple(sample_shapes(sample)),
    )


def _compressed_head(path: Path) -> list[str]:
    """The first lines of a compressed file (it cannot be sampled further in without
    decompressing)."""
    for chunk in lines_io.iter_chunks(path, 4 << 20):
        return chunk.data.decode("utf-8", "replace").splitlines()[:20_000]
    return []


def type_chunk(job: Job, chunk: lines_io.Chunk, first_lineno: int, out: Path) -> dict[str, Any]:
    """Type one chunk, write ``part-NNNNN.parquet`` (and ``fix-NNNNN.parquet`` for batch lines
    the fast plan left unresolved) into ``out``; return the piece's facts for the manifest."""
    typed, planned = _typed_lines(job, chunk, first_lineno)
    typed = typed.with_columns(line_bytes=pl.lit(None, pl.Int64))
    if chunk.long:
        typed = _mark_long(typed, chunk.long, first_lineno)
        planned = _mark_long(planned, chunk.long, first_lineno)
    pending = typed.filter(pl.col("unresolved"))
    fix = _fixups(pending) if pending.height or chunk.index == 0 else None
    stats = _stats(typed, planned)
    name = f"part-{chunk.index:05d}.parquet"
    if chunk.index:  # the first piece holds every column: it gives the store's schema
        typed = typed.select(c.name for c in typed.iter_columns() if c.null_count() < c.len())
    typed.write_parquet(out / name, compression="lz4", statistics=True)
    piece = {"name": name, "rows": typed.height, **piece_facts(out / name)}
    fix_piece = None
    if fix is not None:  # the first chunk's always exists: it gives the schema
        fix_name = f"fix-{chunk.index:05d}.parquet"
        fix.write_parquet(out / fix_name, compression="lz4")
        fix_piece = {"name": fix_name, "rows": fix.height, **piece_facts(out / fix_name)}
    return {
        "index": chunk.index,
        "first_lineno": first_lineno,
        "lines": chunk.lines,
        "piece": piece,
        "fix": fix_piece,
        "long_lines": len(chunk.long),
        **stats,
    }


def _typed_lines(
    job: Job, chunk: lines_io.Chunk, first_lineno: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Every line of the chunk typed, in line order: the fast lane's lines and the plan's;
    and the plan's alone (the lane takes only printable ASCII).

    Chunks wait for the lane to load (``lane_loading``) up to ``LANE_WAIT_S`` after it starts;
    until then, or where it cannot be, the plan types whole chunks: the same rows.
    """
    table = None
    _wait_for_lane()
    if _LANE_READY.is_set():
        from toolkit.load.compiled import log_lines  # numba: imported by the loading thread

        if compiled.enabled() and job.wrapper in log_lines.WRAPPER_CODES and chunk.lines:
            table = log_lines.shape_table(list(job.shapes))
    if table is None:
        frame = lines_io.chunk_frame(chunk, first_lineno)
        typed = _refined(job.plan(frame.lazy(), ansi=b"\x1b" in chunk.data).collect())
        return typed, typed
    lane = log_lines.scan(chunk.data, chunk.lines, job.wrapper, job.year, table)
    frame = lines_io.lines_frame(lane.left, lane.left_line + first_lineno)
    ansi = b"\x1b" in lane.left  # a line holding one is never taken
    slow = _refined(job.plan(frame.lazy(), ansi=ansi).collect())  # the lane takes none to refine
    if not lane.line.size:
        return slow, slow
    compiled.note_use("log-line")
    fast = log_lines.rows(
        lane, first_lineno, table, slow.schema, wrapper=job.wrapper, year=job.year
    )
    del lane  # its buffers are as large as the chunk
    return pl.concat([fast, slow]).sort("lineno"), slow  # a third of merge_sorted's time


_LANE_READY = threading.Event()
LANE_WAIT_S = 1.0
"""How long after its loading starts chunks wait for the lane: it loads from numba's cache in
about 0.4 s, and a chunk the plan types alone takes three times a lane chunk's time. Its first
compile (about 10 s) is not waited for."""
_lane_deadline = 0.0


@functools.cache
def lane_loading() -> threading.Thread:
    """A thread importing and loading the compiled lane, started once per process: numba's
    import and the pass's load (0.4 s) overlap the sampling and reading of a file. A lane that
    cannot load is named in a warning, never raised."""

    def load() -> None:
        try:
            from toolkit.load.compiled import log_lines
        except ImportError as e:  # a broken numba install: the plan still types every line
            warnings.warn(f"ppscope: the compiled log-line pass is unavailable ({e})",
                          RuntimeWarning, stacklevel=1)  # fmt: skip
            return
        if log_lines.ready():
            _LANE_READY.set()

    global _lane_deadline
    _lane_deadline = time.monotonic() + LANE_WAIT_S
    thread = threading.Thread(target=load, name="ppscope-lane", daemon=True)
    thread.start()
    return thread


def _wait_for_lane() -> None:
    lane_loading().join(max(0.0, _lane_deadline - time.monotonic()))


def empty_chunk() -> lines_io.Chunk:
    """The chunk of an empty file: typed like any other, so the store has its schema."""
    return lines_io.Chunk(0, b"", 0, {})


def merge_stats(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The file's summary from its chunks' facts (in chunk order)."""
    counts: dict[str, int] = {}
    offsets: dict[float, int] = {}
    for c in chunks:
        for kind, n in c["counts"].items():
            counts[kind] = counts.get(kind, 0) + n
        for value, n in c["offsets"]:
            offsets[value] = offsets.get(value, 0) + n
    return {
        "lines": sum(c["lines"] for c in chunks),
        "offset": _median(offsets),
        "counts": {k: v for k, v in sorted(counts.items()) if v},
        "odd": {
            "unreadable": sum(c["unreadable"] for c in chunks),
            "undated": sum(c["undated"] for c in chunks),
        },
        "long_lines": sum(c["long_lines"] for c in chunks),
        "ranks": sorted({r for c in chunks for r in c["ranks"]}),
        "headers": sorted({h for c in chunks for h in c["headers"]}),
        "pieces": [
            {**c["piece"], "first_lineno": c["first_lineno"], "counts": c["counts"]} for c in chunks
        ],
        "fixes": [c["fix"] for c in chunks if c["fix"] is not None],
    }


def _refined(typed: pl.DataFrame) -> pl.DataFrame:
    """``kind`` of the lines the plan called ``other``: error, marker, progress or other.

    Only those lines are looked at (a few percent of a log), not every row.
    """
    kind = typed.get_column("kind")
    rows = (kind == "other").arg_true()
    if not rows.len():
        return typed
    refined = (
        typed.select("message", "has_prefix", "level")[rows]
        .select(kind=refine_kind(pl.col("message"), pl.col("has_prefix"), pl.col("level")))
        .get_column("kind")
    )
    return typed.with_columns(kind.scatter(rows, refined))


def _mark_long(typed: pl.DataFrame, long: dict[int, int], first_lineno: int) -> pl.DataFrame:
    """Lines longer than the cap: ``other`` rows holding their first bytes and their length."""
    lengths = pl.DataFrame(
        {
            "lineno": [first_lineno + k - 1 for k in long],
            "_bytes": list(long.values()),
        },
        schema={"lineno": pl.Int64, "_bytes": pl.Int64},
    )
    typed = typed.join(lengths, on="lineno", how="left", maintain_order="left")
    cut = pl.col("_bytes").is_not_null()
    return typed.with_columns(
        kind=pl.when(cut).then(pl.lit("other")).otherwise("kind"),
        unresolved=pl.col("unresolved") & ~cut,
        line_bytes=pl.col("_bytes"),
    ).drop("_bytes")


def _stats(typed: pl.DataFrame, planned: pl.DataFrame) -> dict[str, Any]:
    """Counts per kind, odd and undated lines, clock offsets, distinct ranks and headers;
    control characters are looked for in the lines the plan typed (``planned``)."""
    kind = pl.col("kind")
    offset = (pl.col("ts").cast(pl.Datetime("us")) - pl.col("wrapper_ts")).dt.total_seconds()
    step = _OFFSET_STEP_S
    plain = ~kind.is_in(["decode", "prefill"]) & ~pl.col("odd")
    row = typed.select(
        undated=(
            pl.col("ts").is_null()
            & pl.col("clock").is_null()
            & pl.col("wrapper_ts").is_null()
            & (kind != "blank")
        ).sum(),
        ranks=pl.col("ranks").drop_nulls().unique().implode(),
        headers=pl.col("header").drop_nulls().unique().implode(),
        odd=pl.col("odd").sum(),
        offsets=((offset / step).round() * step).drop_nulls().alias("o").value_counts().implode(),
        counts=kind.value_counts().implode(),
    ).row(0, named=True)
    odd_text = planned.select(pl.col("message").filter(plain).str.contains(ODD_TEXT).sum()).item()
    return {
        "counts": {c["kind"]: int(c["count"]) for c in row["counts"]},
        "unreadable": int(row["odd"] or 0) + int(odd_text or 0),
        "undated": int(row["undated"] or 0),
        "offsets": sorted((float(o["o"]), int(o["count"])) for o in row["offsets"]),
        "ranks": sorted(row["ranks"]),
        "headers": sorted(row["headers"]),
    }


def _median(counts: dict[float, int]) -> float | None:
    """Median of values given as value → count; the middle two averaged when even."""
    total = sum(counts.values())
    if not total:
        return None
    ordered = sorted(counts.items())
    middle = []
    seen = 0
    for value, n in ordered:
        for position in ((total - 1) // 2, total // 2):
            if seen <= position < seen + n:
                middle.append(value)
        seen += n
    return sum(middle) / len(middle)


_CONTEXT = ["lineno", "ts", "clock", "wrapper_ts", "ranks", "gpu_id", "kind", "message"]


def _fixups(pending: pl.DataFrame) -> pl.DataFrame:
    """Type the batch lines the positional pass left unresolved: key by key, then in Python."""
    pending = pending.select(_CONTEXT)
    sample = pending.get_column("message").head(20_000)
    keys = {k for message in sample for k in KEY_COLUMN if f"{k}: " in message}
    by_key = type_by_key(pending.lazy(), keys).collect()
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


def _first_year(sample: list[str]) -> int | None:
    for line in sample:
        m = _YEAR.search(line)
        if m:
            return int(m.group(1))
    return None


def round_offset(seconds: float | None) -> float:
    """Wrapper-to-SGLang clock offset, rounded to whole quarter hours (time zones)."""
    if seconds is None:
        return 0.0
    return float(round(seconds / _OFFSET_STEP_S) * _OFFSET_STEP_S)
