"""A run assembled from its inputs: which server start it is, and whether its files agree.

A log may hold several launches (a restart, a crash loop, a folder of unrelated logs). Each
launch's span runs from its ``server_args=`` dump to its last batch line before the next launch
of the same file. Launches of different files that start within ``SAME_START_S`` of each other
are one multi-node start when their dumps agree on layout and model (every node prints its
own dump). A run is one such start plus what
was measured against it: ``choose_launch`` picks the start whose span the benchmark and GPU
data overlap the most, else the last one that decoded.

``clock_offset`` finds by how much a GPU trace's clock is off the log's: the shift that best
lines up "GPUs busy" with "the server decoding", second by second.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from toolkit.schema import Column, schema_of

__all__ = [
    "LAUNCH_SPANS",
    "SAME_START_S",
    "active_seconds",
    "best_apart",
    "best_shift",
    "choose_launch",
    "clock_offset",
    "clock_placement",
    "clock_scores",
    "launch_spans",
    "overlap_s",
    "owning_launch",
]

SAME_START_S = 600.0
"""Launches of different files starting this close together are one multi-node start."""

ACTIVE_PCT = 5.0
"""GPU busy % that counts as working, not idle (an idle GPU reads 0–2 %)."""

_I, _S, _T = pl.Int64(), pl.String(), pl.Datetime("ms")

LAUNCH_SPAN_COLUMNS: tuple[Column, ...] = (
    Column("launch", _I, "index of the launch (``SGLangLog.launches``)"),
    Column("group", _I, "multi-node start the launch belongs to (0-based, in time order)"),
    Column("source", _S, "the log file"),
    Column("lineno", _I, "line of its server_args dump"),
    Column("start", _T, "time of the dump (null when the line has no time)"),
    Column("end", _T, "time of its last batch line (the start when it logged none)"),
    Column("batch_lines", _I, "Prefill/Decode batch lines it logged"),
    Column("why", _S, "what marks a start with no dump (``restarts``); null for a dump"),
    Column("host", _S, "the host the file's journald headers name, else null"),
)
LAUNCH_SPANS = schema_of(LAUNCH_SPAN_COLUMNS)


def launch_spans(
    launches: Sequence[Any],
    batches: pl.DataFrame | pl.LazyFrame,
    starts: pl.DataFrame | None = None,
    hosts: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """One row per launch with its span and multi-node group (schema ``LAUNCH_SPANS``).

    ``launches`` are ``SGLangLog.launches`` (anything with ``index``, ``source``, ``lineno``
    and ``ts``); ``batches`` the log's batch lines (``source``, ``lineno``, ``ts``), best lazy
    (``SGLangLog.scan_batches()``): they are aggregated per launch as they are read;
    ``starts`` the starts no dump marks (``restarts.implicit_starts``), numbered after the
    launches; ``hosts`` the host of each file. Launches of other hosts (unless their dumps
    span several nodes), models or layouts are never one start, nor are two of one file and
    node (a restart).
    """
    hosts = hosts or {}
    rows = [
        {"launch": la.index, "source": str(la.source), "lineno": la.lineno, "start": la.ts}
        for la in launches
    ]
    shapes = {la.index: _shape(la.server_args, hosts.get(str(la.source))) for la in launches}
    nodes = {la.index: (la.server_args or {}).get("node_rank") for la in launches}
    why: dict[int, str] = {}
    first = max((la.index for la in launches), default=-1) + 1
    for k, r in enumerate((starts if starts is not None else pl.DataFrame()).iter_rows(named=True)):
        rows.append(
            {"launch": first + k, **{c: r[c] for c in ("source", "lineno")}, "start": r["ts"]}
        )
        shapes[first + k] = ("no dump", hosts.get(str(r["source"])))
        nodes[first + k], why[first + k] = None, r["why"]
    if not rows:
        return pl.DataFrame(schema=LAUNCH_SPANS)
    starts_frame = pl.DataFrame(
        rows, schema={"launch": _I, "source": _S, "lineno": _I, "start": _T}, orient="row"
    )
    ends = _launch_ends(starts_frame, batches.lazy())
    spans = starts_frame.join(ends, on="launch", how="left").with_columns(
        end=pl.coalesce("end", "start"), batch_lines=pl.col("batch_lines").fill_null(0)
    )
    spans = spans.sort(pl.col("start").fill_null(pl.col("end")), "source", "lineno")
    groups: list[int] = []
    current, anchor, shape = -1, None, None
    members: set[tuple[str, Any]] = set()
    for start, index, source in spans.select("start", "launch", "source").iter_rows():
        near = (
            anchor is not None
            and start is not None
            and abs((start - anchor).total_seconds()) <= SAME_START_S
        )
        member = (source, repr(nodes[index]))
        if not near or shapes[index] != shape or member in members:
            current += 1
            anchor, shape, members = start, shapes[index], set()
        members.add(member)
        groups.append(current)
    return (
        spans.with_columns(
            group=pl.Series(groups, dtype=_I),
            why=pl.col("launch").replace_strict(why, default=None, return_dtype=_S),
            host=pl.col("source").replace_strict(dict(hosts), default=None, return_dtype=_S),
        )
        .select(LAUNCH_SPANS.names())
        .cast(dict(LAUNCH_SPANS))
    )


def _launch_ends(starts: pl.DataFrame, batches: pl.LazyFrame) -> pl.DataFrame:
    """Per launch, its last batch line's time and its batch lines: each line belongs to the
    last start at or before it in its file. Aggregated per file as the store is read, so no
    line table is held."""
    lines = batches.filter(pl.col("ts").is_not_null()).select(
        pl.col("source").cast(_S), pl.col("lineno").cast(_I), pl.col("ts").cast(_T)
    )
    parts = []
    for (source,), marks in starts.sort("source", "lineno").group_by("source", maintain_order=True):
        at = pl.lit(marks["lineno"]).search_sorted(pl.col("lineno"), side="right").cast(_I) - 1
        parts.append(
            lines.filter(pl.col("source") == source)
            .group_by(at.alias("_at"))
            .agg(end=pl.col("ts").max(), batch_lines=pl.len())
            .filter(pl.col("_at") >= 0)
            .select(
                pl.lit(marks["launch"]).gather(pl.col("_at")).alias("launch"), "end", "batch_lines"
            )
        )
    schema = {"launch": _I, "end": _T, "batch_lines": pl.UInt32()}
    if not parts:
        return pl.DataFrame(schema=schema)
    return pl.concat(parts).collect(engine="streaming").cast(schema)  # type: ignore[arg-type]


def owning_launch(lines: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """``lines`` (any frame with ``source`` and ``lineno``) in their order, with ``launch`` and
    ``group``: the launch whose dump last precedes each line in its file (``spans`` is
    ``LAUNCH_SPANS``); null before a file's first dump or for a file with none."""
    owners = spans.select("source", "lineno", "launch", "group").cast(
        {"source": _S, "lineno": _I, "launch": _I, "group": _I}
    )
    keyed = lines.with_row_index("_row").with_columns(
        _source=pl.col("source").cast(_S), _lineno=pl.col("lineno").cast(_I)
    )
    owned = keyed.sort("_source", "_lineno").join_asof(
        owners.rename({"source": "_source", "lineno": "_lineno"}).sort("_source", "_lineno"),
        on="_lineno",
        by="_source",
        strategy="backward",
        check_sortedness=False,  # sorted by (source, lineno): each source's lines are in order
    )
    return owned.sort("_row").drop("_row", "_source", "_lineno")


_SHAPE_KEYS = ("tp_size", "pp_size", "dp_size", "ep_size", "nnodes", "model_path")


def _shape(server_args: dict[str, Any], host: str | None = None) -> tuple[Any, ...]:
    """What the nodes of one multi-node start share: layout and model (not ``node_rank``), and
    the host when the start is on one node."""
    nnodes = server_args.get("nnodes") if server_args else None
    one_node = not isinstance(nnodes, int) or nnodes <= 1
    keys = tuple(repr(server_args.get(k)) for k in _SHAPE_KEYS) if server_args else ()
    return (*keys, host if one_node else None)


def overlap_s(a: tuple[datetime, datetime], b: tuple[datetime, datetime]) -> float:
    """Seconds two time spans share (0 when they do not meet)."""
    return max(0.0, (min(a[1], b[1]) - max(a[0], b[0])).total_seconds())


def choose_launch(
    spans: pl.DataFrame, windows: Sequence[tuple[datetime, datetime]] = ()
) -> tuple[int | None, str]:
    """The multi-node start the run is about, and why: the one the measurement ``windows``
    (benchmark, GPU trace) overlap the most, else the last one that logged batch lines, else
    the last one."""
    if not spans.height:
        return None, "no launch"
    per_group = spans.group_by("group").agg(
        start=pl.col("start").min(), end=pl.col("end").max(), lines=pl.col("batch_lines").sum()
    )
    if windows:
        scored = [
            (sum(overlap_s((r["start"], r["end"]), w) for w in windows), r["group"])
            for r in per_group.iter_rows(named=True)
            if r["start"] is not None and r["end"] is not None
        ]
        best = max(scored, default=(0.0, None))
        if best[0] > 0:
            return best[1], "the launch the measurements overlap"
    decoded = per_group.filter(pl.col("lines") > 0).sort("group")
    if decoded.height:
        return int(decoded["group"][-1]), "the last launch that logged batch lines"
    return int(per_group["group"].max()), "the last launch"


def clock_offset(
    busy: pl.DataFrame, decoding: Sequence[tuple[datetime, datetime]], *, max_shift_s: int = 900
) -> tuple[float, float] | None:
    """(seconds to add to the GPU clock, agreement 0–1) that best line up GPU activity with
    the log's decoding windows; None without activity on either side.

    ``busy`` has ``ts`` and ``busy_pct`` (mean over GPUs). Both sides become per-second 0/1
    series (busy: above ``ACTIVE_PCT`` or a tenth of the trace's peak, whichever is higher;
    decoding: inside a window of decode lines); the shift maximizes
    their agreement (shared active seconds over the seconds either is active).
    """
    scores = clock_scores(busy, decoding, [(-max_shift_s, max_shift_s)])
    return None if scores is None else best_shift(scores)


def clock_placement(
    busy: pl.DataFrame,
    decoding: Sequence[tuple[datetime, datetime]],
    *,
    max_shift_s: int,
    apart_s: float,
) -> tuple[float, float, float] | None:
    """``clock_offset`` with a third value: the best agreement of any shift more than
    ``apart_s`` from the chosen one, which says how clearly the choice stands out (a trace of a
    sweep of alike runs also agrees one run early or late)."""
    scores = clock_scores(busy, decoding, [(-max_shift_s, max_shift_s)])
    if scores is None:
        return None
    shift, score = best_shift(scores)
    return shift, score, best_apart(scores, shift, apart_s)[1]


def best_shift(scores: dict[int, float]) -> tuple[float, float]:
    """The shift of the highest agreement; on a tie, the smallest shift."""
    best = (0.0, -1.0)
    for shift, score in sorted(scores.items(), key=lambda kv: (abs(kv[0]), kv[0])):
        if score > best[1] + 1e-9:
            best = (float(shift), score)
    return best


def best_apart(
    scores: dict[int, float], shift: float, apart_s: float
) -> tuple[float | None, float]:
    """(shift, agreement) of the best shift farther than ``apart_s`` from ``shift``; (None,
    0.0) when every shift scored is that close."""
    others = {s: v for s, v in scores.items() if abs(s - shift) > apart_s}
    if not others:
        return None, 0.0
    found, score = best_shift(others)
    return found, score


def active_seconds(busy: pl.DataFrame) -> list[int]:
    """Epoch seconds at which the GPUs were working: ``busy_pct`` at or above ``ACTIVE_PCT``
    or a tenth of the trace's peak, whichever is higher (empty when the trace never works)."""
    if not busy.height:
        return []
    peak = float(busy["busy_pct"].max() or 0.0)
    if peak <= 0:
        return []
    active = busy.filter(pl.col("busy_pct") >= max(ACTIVE_PCT, peak / 10)).select(
        pl.col("ts").dt.epoch("s").unique().sort()
    )
    return active["ts"].to_list()


def clock_scores(
    busy: pl.DataFrame,
    decoding: Sequence[tuple[datetime, datetime]],
    ranges: Sequence[tuple[int, int]],
) -> dict[int, float] | None:
    """Agreement of each whole-second shift inside ``ranges`` (inclusive ``(lo, hi)`` pairs),
    the shift added to ``busy``'s clock (``clock_offset``); None without activity on either
    side.

    The count of shared seconds per shift is accumulated span by span over the active seconds,
    as a difference array per range: its cost grows with active seconds × spans per range, not
    with how far apart the two clocks are, and a range no shift of which can meet the log is
    not counted at all.
    """
    gpu = np.asarray(active_seconds(busy), dtype=np.int64)
    spans = sorted(
        (math.floor(a.timestamp()), math.ceil(b.timestamp())) for a, b in decoding if a and b
    )
    log_seconds = sum(b - a + 1 for a, b in spans)
    if not gpu.size or not log_seconds:
        return None
    starts = np.asarray([a for a, _ in spans], dtype=np.int64)
    ends = np.asarray([b for _, b in spans], dtype=np.int64)
    reach = (int(starts.min() - gpu.max()), int(ends.max() - gpu.min()))
    out: dict[int, float] = {}
    for lo, hi in ranges:
        width = hi - lo + 1
        shared = np.zeros(width, dtype=np.int64)
        if width > 0 and lo <= reach[1] and hi >= reach[0]:
            shared = _shared(gpu, starts, ends, lo, hi)
        union = gpu.size + log_seconds - shared
        values = np.where(union > 0, shared / np.maximum(union, 1), 0.0)
        out.update(zip(range(lo, hi + 1), values.tolist(), strict=True))
    return out


_CHUNK = 1 << 20
"""Active-second × span pairs counted at once (bounds the memory of ``_shared``)."""


def _shared(gpu: np.ndarray, starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Per shift from ``lo`` to ``hi``: active seconds that land inside a span when shifted."""
    width = hi - lo + 1
    diff = np.zeros(width + 1, dtype=np.int64)
    step = max(_CHUNK // max(starts.size, 1), 1)
    for k in range(0, gpu.size, step):
        g = gpu[k : k + step, None]
        first = np.maximum(starts[None, :] - g, lo)
        last = np.minimum(ends[None, :] - g, hi)
        hit = first <= last
        np.add.at(diff, first[hit] - lo, 1)
        np.add.at(diff, last[hit] - lo + 1, -1)
    return np.cumsum(diff[:width])
