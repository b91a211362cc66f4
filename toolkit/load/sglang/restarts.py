"""Server starts a log shows without a ``server_args=`` dump.

A launch starts at each dump (``launches``). A log can show a start without one too: a file that
holds no dump before its batch lines (a log cut after the start, a wrapper that lost the line),
a new process id in the wrapper headers once the previous one has stopped writing (a restart
under journald), or the startup sequence again after batch lines (a relaunch after a crash
whose dump is missing). Each such start is a launch of its own; a start a dump follows before
the next batch line is the dump's.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from toolkit.load.sglang.wrappers import decode_header

__all__ = ["RESTART_PREFIXES", "STARTS", "implicit_starts", "log_host_of"]

RESTART_PREFIXES = ("Init torch distributed begin", "Load weight begin")
"""Startup lines that begin a scheduler's start: after batch lines, a restart. (Later startup
lines do not count: the warm-up request logs a batch line before ``fired up``.)"""

STARTS = {"source": pl.String(), "lineno": pl.Int64(), "ts": pl.Datetime("ms"), "why": pl.String()}
"""Columns of ``implicit_starts``."""


def implicit_starts(log: Any) -> pl.DataFrame:
    """Starts of ``log`` (an ``SGLangLog``) that no dump marks, one row each (``STARTS``):
    where, when, and why it is a start. Empty when every batch line follows a dump."""
    dumps = pl.DataFrame(
        [(la.source, la.lineno) for la in log.launches],
        schema={"source": pl.String(), "lineno": pl.Int64()},
        orient="row",
    )
    msg = pl.col("message")
    startup = (
        log._lines(["startup"], ["message"])
        .filter(pl.any_horizontal(*(msg.str.starts_with(p) for p in RESTART_PREFIXES)))
        .select(pl.col("source").cast(pl.String), pl.col("lineno").cast(pl.Int64), "ts")
        .collect()
    )
    marks = [
        dumps.with_columns(ts=pl.lit(None, pl.Datetime("ms")), kind=pl.lit("dump")),
        # a new pid's first line is often a startup line: the pid's reason is the sharper one
        _pid_starts(log).with_columns(kind=pl.lit("pid")),
        startup.with_columns(kind=pl.lit("startup")),
    ]
    batches = _first_batch_lines(log.scan_batches(), pl.concat([m.select("source", "lineno")
                                                                for m in marks]))  # fmt: skip
    if not batches.height:
        return pl.DataFrame(schema=STARTS)
    events = [*marks, batches.with_columns(kind=pl.lit("batch"))]
    frame = pl.concat(
        [
            e.select(
                pl.col("source").cast(pl.String),
                pl.col("lineno").cast(pl.Int64),
                pl.col("ts").cast(pl.Datetime("ms")),
                "kind",
                why=pl.col("why") if "why" in e.columns else pl.lit(None, pl.String),
            )
            for e in events
        ]
    ).sort("source", "lineno", maintain_order=True)
    rows: list[dict[str, Any]] = []
    for (source,), lines in frame.group_by("source", maintain_order=True):
        rows += _starts_of_file(str(source), lines)
    return pl.DataFrame(rows, schema=STARTS, orient="row")


def _first_batch_lines(batches: pl.LazyFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """Of each run of batch lines between two marks (dumps, startup and pid lines) of a file,
    the first: the walk only needs those (the rest of a run changes nothing), so the batch
    lines are reduced as the store is read."""
    lines = batches.select(pl.col("source").cast(pl.String), pl.col("lineno").cast(pl.Int64), "ts")
    parts = [lines.filter(pl.col("source").is_in(marks["source"].unique().to_list()).not_())
             .group_by("source").agg(pl.all().sort_by("lineno").first())]  # fmt: skip
    for (source,), own in marks.group_by("source"):
        run = pl.lit(own["lineno"].sort()).search_sorted(pl.col("lineno"), side="right")
        parts.append(
            lines.filter(pl.col("source") == source)
            .group_by(run.alias("_run"))
            .agg(pl.col("source", "lineno", "ts").sort_by("lineno").first())
            .drop("_run")
        )
    return pl.concat(parts).collect(engine="streaming")


def _starts_of_file(source: str, lines: pl.DataFrame) -> list[dict[str, Any]]:
    """The dumpless starts of one file, walking its dumps, batch, startup and pid lines."""
    out: list[dict[str, Any]] = []
    started = False  # a start (dump or found) precedes the current line
    decoded = False  # batch lines since that start
    first: dict[str, Any] | None = None  # first startup/pid line before any start
    pending: dict[str, Any] | None = None  # a restart seen, waiting for its batch lines
    for r in lines.iter_rows(named=True):
        kind = r["kind"]
        if kind == "dump":
            started, decoded, first, pending = True, False, None, None
        elif kind in ("startup", "pid"):
            if pending is not None and pending["ts"] is None:
                pending["ts"] = r["ts"]  # a pid's first line is dated by its startup line
            if started and decoded and pending is None:
                why = r["why"] or "the startup sequence again after batch lines"
                pending = {"source": source, "lineno": r["lineno"], "ts": r["ts"], "why": why}
            elif not started and first is None:
                first = {"source": source, "lineno": r["lineno"], "ts": r["ts"]}
        elif kind == "batch":
            if pending is not None:
                out.append({**pending, "ts": pending["ts"] or r["ts"]})
                pending, decoded = None, False
            elif not started:
                at = first or {"source": source, "lineno": r["lineno"], "ts": r["ts"]}
                out.append({**at, "ts": at["ts"] or r["ts"], "why": "no server_args dump"})
                started, decoded = True, False
            decoded = True
    if pending is not None:  # a restart that never logged a batch line (a crash loop)
        out.append(pending)
    return out


def _pid_starts(log: Any) -> pl.DataFrame:
    """Per file, the first line of a process id that starts writing once every process id
    before it has stopped (journald ``ident[pid]`` headers; each SGLang process has its own, and
    processes of one server interleave): a new server."""
    empty = pl.DataFrame(schema=STARTS)
    if len(log.pids()) < 2:
        return empty
    rows = []
    for store in log.sources:
        if not str(store.wrapper).startswith("journald") or len(store.headers) < 2:
            continue
        pid_of = {h: decode_header(store.wrapper, h)[1] for h in store.headers}
        spans = (
            store.scan()
            .filter(pl.col("header").is_not_null())
            .group_by("header")
            .agg(first=pl.col("lineno").min(), last=pl.col("lineno").max())
            .collect()
        )
        segments: dict[int, list[int]] = {}
        for header, lo, hi in spans.iter_rows():
            pid = pid_of.get(header)
            if pid is not None:
                seg = segments.setdefault(pid, [lo, hi])
                seg[0], seg[1] = min(seg[0], lo), max(seg[1], hi)
        ordered = sorted((lo, hi, pid) for pid, (lo, hi) in segments.items())
        if not ordered:
            continue
        reach, before = ordered[0][1], [ordered[0][2]]
        for lo, hi, pid in ordered[1:]:
            if lo > reach:  # every process seen so far had stopped writing: a new server
                why = f"new process ids from {pid} on (the earlier ones, {before[0]}…, stopped)"
                rows.append({"source": str(store.path), "lineno": lo, "ts": None, "why": why})
                before = []
            reach = max(reach, hi)
            before.append(pid)
    return pl.DataFrame(rows, schema=empty.schema, orient="row") if rows else empty


def log_host_of(log: Any) -> dict[str, str]:
    """Log file → the one host its journald headers name (files naming none or several are
    left out)."""
    out = {}
    for store in log.sources:
        if str(store.wrapper).startswith("journald"):
            names = {decode_header(store.wrapper, h)[0] for h in store.headers} - {None}
            if len(names) == 1:
                out[str(store.path)] = str(next(iter(names)))
    return out
