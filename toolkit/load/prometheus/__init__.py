"""SGLang's Prometheus metrics (``/metrics`` with ``--enable-metrics``) as one long table.

Four file formats, recognized by content: ``ppscope capture``'s snapshots (``metrics.jsonl``,
the exposition text of every scrape), a Prometheus HTTP API answer (``query_range``),
AIPerf's ``server_metrics_export.parquet`` and a saved ``/metrics`` answer (``curl``).
``load_metrics`` reads any number of them into the declared ``METRICS`` table
(``toolkit.schema.prometheus``): a row per series per interval, ranks in their own columns,
counters differenced, histograms as interval means. A saved answer of no known time cannot be
placed or differenced: its values are listed as read in ``Metrics.untimed`` (``UNTIMED``).
Everything left out is counted in the load's notes. Gateway spellings (``sglang_*``) are read
as ``sglang:*`` and router series (``sgl_router_*``) kept in ``Metrics.router``, each stated
as a caveat (``gateway.py``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError, UnknownFormat
from toolkit.load.damage import damaged
from toolkit.load.inputs import check_input
from toolkit.load.prometheus.aiperf import aiperf_samples, is_aiperf_export
from toolkit.load.prometheus.exposition import ExpositionReader
from toolkit.load.prometheus.gateway import engine_names, split_router
from toolkit.load.prometheus.query_range import is_query_result, query_samples
from toolkit.load.prometheus.series import RawSamples, dedupe, intervals
from toolkit.load.prometheus.snapshots import is_snapshot_file, snapshots
from toolkit.load.prometheus.tally import Tally
from toolkit.load.prometheus.text import is_metrics_text, text_scrapes
from toolkit.load.registry import Format
from toolkit.schema.caveats import Caveat
from toolkit.schema.prometheus import METRICS, UNTIMED

__all__ = [
    "FORMATS",
    "TEXT",
    "Metrics",
    "load_metrics",
    "sniff_metrics_format",
    "summarize_metrics",
]

SNAPSHOTS = "sglang-metrics-jsonl"
QUERY_RANGE = "prometheus-query-range"
AIPERF = "aiperf-server-metrics-parquet"
TEXT = "sglang-metrics-text"


@dataclass(frozen=True)
class Metrics:
    """The metrics of a run: the engine's ``METRICS`` table, scrapes read, what was left out,
    the scrapes of no known time (``UNTIMED``: values as read, counted in ``scrapes`` too), the
    router's own series (``METRICS`` too, never mixed into the engine's) and the caveats met."""

    samples: pl.DataFrame
    scrapes: int
    notes: list[str] = field(default_factory=list)
    sources: tuple[str, ...] = ()
    untimed: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=UNTIMED))
    router: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=METRICS))
    caveats: tuple[Caveat, ...] = ()

    @property
    def untimed_sources(self) -> list[str]:
        """Files holding a scrape of no known time, in load order."""
        return list(dict.fromkeys(self.untimed["source"].to_list()))

    def summary(self) -> dict[str, Any]:
        """What the files hold: series, scrapes, time span, metrics, ranks and notes."""
        s = self.samples
        key = ["source", "metric", "pp_rank", "tp_rank", "dp_rank", "labels"]
        # an interval's start is a scrape too (a counter's first scrape yields no row)
        begin = pl.col("ts") - pl.duration(milliseconds=(pl.col("interval_s") * 1e3).round())
        ts = s.select(pl.coalesce(begin, "ts")).to_series().drop_nulls()
        end = s["ts"].drop_nulls()
        # a scrape of no known time still names its series, metrics and ranks
        named = pl.concat([s.select(key), self.untimed.select(key)], how="vertical_relaxed")
        ranks = sorted({r for r in named["pp_rank"].to_list() if r is not None})
        return {
            "series": named.unique().height,
            "scrapes": self.scrapes,
            "start": ts.min() if ts.len() else None,
            "end": end.max() if end.len() else None,
            "metrics": sorted(set(named["metric"].to_list())),
            "pp_ranks": ranks,
            "rows": s.height,
            "untimed_scrapes": self.untimed.select("source", "lineno").unique().height,
            "untimed_rows": self.untimed.height,
            "notes": list(self.notes),
            "router": _router_summary(self.router),
            "caveats": [c.to_dict() for c in self.caveats],
        }


def _router_summary(router: pl.DataFrame) -> dict[str, Any] | None:
    """Router series: their metrics and the workers their labels name; None without any."""
    if not router.height:
        return None
    workers = router.select(
        pl.coalesce(
            pl.col("labels").str.json_path_match("$.worker"),
            pl.col("labels").str.json_path_match("$.worker_addr"),
        )
    ).to_series()
    return {
        "series": router.select("metric", "labels").unique().height,
        "metrics": sorted(set(router["metric"].to_list())),
        "workers": sorted(set(workers.drop_nulls().to_list())),
    }


def _load_snapshots(
    path: Path, raw: RawSamples, frames: list[pl.DataFrame], tally: Tally, strict: bool, *_: Any
) -> int:
    scrapes, reader = 0, ExpositionReader()
    for lineno, ts, text in snapshots(path, tally, strict=strict):
        scrapes += 1
        for sample in reader.samples(text, tally, f"{path}:{lineno}"):
            raw.add(str(path), lineno, ts, sample)
    return scrapes


def _load_query(
    path: Path, raw: RawSamples, frames: list[pl.DataFrame], tally: Tally, strict: bool, *_: Any
) -> int:
    times = set()
    for ts, sample in query_samples(path, tally, strict=strict):
        times.add(ts)
        raw.add(str(path), None, ts, sample)
    return len(times)


def _load_aiperf(
    path: Path, raw: RawSamples, frames: list[pl.DataFrame], tally: Tally, strict: bool, *_: Any
) -> int:
    frame, scrapes = aiperf_samples(path, tally)
    frames.append(frame)
    return scrapes


def _load_text(
    path: Path,
    raw: RawSamples,
    frames: list[pl.DataFrame],
    tally: Tally,
    strict: bool,
    untimed: RawSamples,
) -> int:
    scrapes, reader = 0, ExpositionReader()
    for lineno, ts, text in text_scrapes(path, tally, strict=strict):
        scrapes += 1
        into = raw if ts is not None else untimed
        for sample in reader.samples(text, tally, f"{path}:{lineno}"):
            into.add(str(path), lineno, ts, sample)
    return scrapes


_READERS = {
    SNAPSHOTS: _load_snapshots,
    QUERY_RANGE: _load_query,
    AIPERF: _load_aiperf,
    TEXT: _load_text,
}


def _summarize(path: Path, options: Any = None) -> dict[str, Any]:
    return summarize_metrics(path)


FORMATS: dict[str, Format[Path, Any]] = {
    f.name: f
    for f in (
        Format(
            SNAPSHOTS,
            "ppscope capture's /metrics snapshots: one JSON object per scrape with its text",
            is_snapshot_file,
            lambda path, options: load_metrics([path]),
            _summarize,
            "trace",
        ),
        Format(
            QUERY_RANGE,
            "a Prometheus HTTP API answer (query_range matrix, or an instant vector)",
            is_query_result,
            lambda path, options: load_metrics([path]),
            _summarize,
            "trace",
        ),
        Format(
            AIPERF,
            "AIPerf's server_metrics_export.parquet: /metrics scrapes of a benchmark run",
            is_aiperf_export,
            lambda path, options: load_metrics([path]),
            _summarize,
            "trace",
        ),
        Format(
            TEXT,
            "a saved /metrics answer (curl): SGLang's exposition text, timed by a date line "
            "or an HTTP Date header saved with it, else listed untimed",
            is_metrics_text,
            lambda path, options: load_metrics([path]),
            _summarize,
            "trace",
        ),
    )
}
"""Format name → ``Format``, in sniffing order."""


def sniff_metrics_format(path: str | Path) -> str | None:
    """The metrics format of a file from its beginning, else None."""
    path = check_input(path)
    return next((f.name for f in FORMATS.values() if f.detect(path)), None)


def load_metrics(
    paths: Iterable[str | Path], *, clock_offset_s: float = 0.0, strict: bool = False
) -> Metrics:
    """Every metrics file of a run as one table, times shifted by ``clock_offset_s``.

    Raises
    ------
    UnknownFormat
        A file that is neither format.
    ParseError
        A file that cannot be read as its format; with ``strict`` also the first line, series
        or value that is left out otherwise. Without ``strict``, while damage is collected
        (``damage.collecting``), a file that cannot be read is kept as damage and the others
        are used.
    """
    raw, frames, tally, scrapes, sources = RawSamples(), [], Tally(), 0, []
    untimed = RawSamples()
    for p in paths:
        path = Path(p)
        fmt = sniff_metrics_format(path)
        if fmt is None:
            raise UnknownFormat(
                path, "no /metrics snapshots or answer, Prometheus answer or AIPerf export"
            )
        try:
            scrapes += _READERS[fmt](path, raw, frames, tally, strict, untimed)
        except ToolkitError as e:
            if strict:
                raise
            damaged(e)
            continue
        sources.append(str(path))
    samples = dedupe(pl.concat([raw.frame(), *frames]), tally, strict=strict)
    table, resets = intervals(samples, clock_offset_s=clock_offset_s)
    tally.add("reset", n=resets)
    listed = untimed.frame().select(UNTIMED.names()).cast(dict(UNTIMED))
    table, renamed = engine_names(table.cast(METRICS))  # type: ignore[arg-type]
    listed, renamed_untimed = engine_names(listed)
    table, router, routed = split_router(table)
    listed, _, routed_untimed = split_router(listed)
    caveats = _merged([*renamed, *renamed_untimed, *routed, *routed_untimed])
    return Metrics(table, scrapes, tally.notes(), tuple(sources), listed, router, caveats)


def _merged(caveats: list[Caveat]) -> tuple[Caveat, ...]:
    """One caveat per kind and file (timed and untimed scrapes of a file are one file)."""
    seen: dict[tuple[str, str], Caveat] = {}
    for c in caveats:
        seen.setdefault((c.kind, c.file), c)
    return tuple(seen.values())


def summarize_metrics(path: str | Path, *, strict: bool = False) -> dict[str, Any]:
    """The ``ppscope parse --json`` entry of one metrics file."""
    path = Path(path)
    fmt = sniff_metrics_format(path)
    return {"path": str(path), "format": fmt, **load_metrics([path], strict=strict).summary()}
