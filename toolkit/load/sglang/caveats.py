"""Caveats of an SGLang log: quirks that are read right but change what a count or rate means.

* ``doubled-prefill``: overlap mode before SGLang #18570 printed each prefill batch twice; two
  prefill lines of one rank in a row with the same time and fields are counted.
* ``mixed-wrappers``: lines under the file's wrapper (CRI, journald, docker) mixed with lines
  without it, or with text glued before SGLang's prefix (tqdm bars).
* ``time-only-stamps``: ``HH:MM:SS`` prefixes without a date (SGLang 0.2.15–0.3.0).
* ``mixed-chunk`` / ``speculative``: batch lines of these modes (``#mixed``/``(mixed`` on
  prefill lines, ``accept len`` on decode lines), so a step is not one token per request.

Each is counted lazily from the typed store, one small aggregate per file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from toolkit.schema.caveats import Caveat
from toolkit.schema.sglang import RANK_TAGS

if TYPE_CHECKING:
    from toolkit.load.sglang.log import SGLangLog

__all__ = ["doubled_prefill", "log_caveats"]

_UNWRAPPED = ("raw",)
_NOT_COMPARED = ("source", "lineno", "complete", "extra")


def doubled_prefill(batches: pl.LazyFrame) -> pl.LazyFrame:
    """Per source, prefill lines that repeat the previous batch line of the same rank (same
    time, same fields): ``source``, ``doubled``. Only prefill lines are hashed."""
    names = batches.collect_schema().names()
    ranks = [t for t in RANK_TAGS if t in names]
    fields = [c for c in names if c not in _NOT_COMPARED]
    keys = ["source", *ranks]
    ordered = batches.sort("source", "lineno").with_columns(
        _i=pl.int_range(pl.len()).over(keys)  # place among the rank's batch lines
    )
    same = pl.struct(fields).hash()
    prefill = ordered.filter(pl.col("kind") == "prefill").with_columns(_h=same)
    follows = pl.col("_i") == pl.col("_i").shift(1).over(keys) + 1
    repeated = (pl.col("_h") == pl.col("_h").shift(1).over(keys)) & follows
    return prefill.group_by("source").agg(doubled=repeated.fill_null(False).sum())


def log_caveats(log: SGLangLog) -> list[Caveat]:
    """Every caveat of every file of ``log``."""
    out: list[Caveat] = []
    doubled = dict(doubled_prefill(log.scan_batches()).collect().iter_rows())
    modes = _modes(log.scan_batches())
    for s in log.sources:
        lines = s.scan().select(
            time_only=pl.col("clock").is_not_null().sum(),
            unwrapped=(pl.col("wrapper_ts").is_null() & pl.col("has_prefix")).sum(),
            wrapped=pl.col("wrapper_ts").is_not_null().sum(),
            glued=pl.col("glued").fill_null(False).sum(),
            odd=(
                (pl.col("wrapper_ts").is_null() & pl.col("has_prefix"))
                | pl.col("glued").fill_null(False)
            ).sum(),
        )
        row = lines.collect().row(0, named=True)
        n = doubled.get(s.path, 0)
        if n:
            out.append(_doubled(s.path, n))
        if row["time_only"]:
            out.append(
                Caveat(
                    "time-only-stamps",
                    s.path,
                    row["time_only"],
                    detail=f"{row['time_only']} lines stamped HH:MM:SS without a date: times "
                    "have 1 s resolution and the date comes from a wrapper or is missing",
                )
            )
        mixed = _mixed(s.wrapper, row)
        if mixed is not None:
            out.append(Caveat("mixed-wrappers", s.path, mixed[0], detail=mixed[1]))
        out += _mode_caveats(s.path, modes.get(s.path))
    return out


def _doubled(path: str, n: int) -> Caveat:
    return Caveat(
        "doubled-prefill",
        path,
        n,
        detail=f"{n} prefill lines repeat the line before them (same rank, time and fields: "
        "overlap mode before SGLang #18570): prefill counts from this log count those "
        "batches twice",
    )


def _mixed(wrapper: str, row: dict[str, int]) -> tuple[int, str] | None:
    """(lines, sentence) when the file mixes wrapped with unwrapped or glued lines."""
    parts = []
    unwrapped = wrapper not in _UNWRAPPED and row["wrapped"] and row["unwrapped"]
    if unwrapped:
        parts.append(
            f"{row['unwrapped']} SGLang lines without the file's {wrapper} wrapper (their time "
            "is SGLang's own only)"
        )
    if row["glued"]:
        parts.append(f"{row['glued']} lines with text glued before SGLang's prefix (tqdm bars)")
    n = row["odd"] if unwrapped else row["glued"]
    return (n, "; ".join(parts)) if parts else None


def _modes(batches: pl.LazyFrame) -> dict[str, dict[str, int]]:
    """Per source, batch lines of mixed chunked prefill and of speculative decoding."""
    rows = (
        batches.group_by("source")
        .agg(
            mixed=pl.col("mixed_running_req").is_not_null().sum(),
            accept=pl.col("accept_len").is_not_null().sum(),
            accept_len=pl.col("accept_len").mean(),
        )
        .collect()
    )
    return {r["source"]: r for r in rows.iter_rows(named=True)}


def _mode_caveats(path: str, counts: dict[str, int] | None) -> list[Caveat]:
    if not counts:
        return []
    out = []
    if counts["mixed"]:
        out.append(
            Caveat(
                "mixed-chunk",
                path,
                counts["mixed"],
                detail=f"{counts['mixed']} prefill lines of mixed chunked prefill: decode "
                "requests ride along with those prefill batches",
            )
        )
    if counts["accept"]:
        out.append(
            Caveat(
                "speculative",
                path,
                counts["accept"],
                detail=f"{counts['accept']} decode lines with accept len (speculative "
                f"decoding, mean {counts['accept_len']:.2f}): a step emits about that many "
                "tokens per request, not one",
            )
        )
    return out
