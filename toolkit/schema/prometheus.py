"""Declared tables of the Prometheus loaders: SGLang's ``/metrics`` series, one row per interval.

A scrape holds cumulative counters and histograms; the table holds what happened between two
scrapes of the same series. Gauges keep their value; counters become the increase over the
interval (a decrease is a restart: that interval is dropped and counted); histograms and
summaries become the mean observation of the interval (Δsum / Δcount) with Δcount beside it.
"""

from __future__ import annotations

import polars as pl

from toolkit.schema import Column, glossary, schema_of

_F, _S, _I32 = pl.Float64(), pl.String(), pl.Int32()

KINDS: tuple[str, ...] = ("gauge", "counter", "histogram")
"""``kind`` values: summaries are read like histograms (their ``_sum`` and ``_count``)."""

RANK_LABELS: tuple[str, ...] = ("pp_rank", "tp_rank", "dp_rank")
"""Labels SGLang ≥ 0.4 puts on scheduler metrics; each becomes its own integer column."""

WORKER_LABELS: tuple[str, ...] = ("worker_addr", "worker", "endpoint_url", "pid")
"""Labels a gateway (``worker_addr``, ``worker``), AIPerf's export (``endpoint_url``) or a
multiprocess exporter (``pid``) adds: they name another server process, so series that differ
in them are other ranks, never added up."""
GATEWAY_PREFIX = "sglang_"
"""How gateways (sgl-router ``/engine_metrics``, SMG sidecars, some Dynamo and llm-d setups)
spell SGLang's ``sglang:`` metrics."""
ROUTER_PREFIX = "sgl_router_"
"""sgl-router's own series: requests and latencies per worker, not an engine's."""

_SERIES_LABELS: tuple[Column, ...] = (
    Column("pp_rank", _I32, "pipeline stage (label pp_rank); null when not labelled"),
    Column("tp_rank", _I32, "tensor-parallel rank (label tp_rank); null when not labelled"),
    Column("dp_rank", _I32, "data-parallel rank (label dp_rank); null when not labelled"),
    Column("labels", _S, "the other labels as a JSON object, keys sorted ({} when none)"),
)
"""The columns that tell a metric's series apart, in every metrics table."""

METRIC_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", pl.Int64(), "1-based line of the scrape (capture snapshots); null for JSON"),
    Column("ts", pl.Datetime("ms"), "scrape time ending the interval (clock offset added)"),
    Column("interval_s", _F, "seconds since the series' previous scrape; null for a first gauge"),
    Column("metric", _S, "name as exposed: sglang:num_running_reqs, sglang:prompt_tokens_total"),
    Column("kind", _S, "gauge, counter or histogram (a summary is read as a histogram)"),
    *_SERIES_LABELS,
    Column(
        "value",
        _F,
        "gauge: the value; counter: increase over the interval; histogram: mean observation "
        "of the interval (Δsum/Δcount), null when nothing was observed",
    ),
    Column("count", _F, "histogram: observations in the interval (Δcount); else null"),
)
METRICS = schema_of(METRIC_COLUMNS)

UNTIMED_COLUMNS: tuple[Column, ...] = (
    Column("source", _S, "input file"),
    Column("lineno", pl.Int64(), "first line of the scrape in the file"),
    Column("metric", _S, "name as exposed"),
    Column("kind", _S, "gauge, counter or histogram"),
    Column("part", _S, "value (gauge, counter), or sum or count (histogram)"),
    *_SERIES_LABELS,
    Column(
        "value",
        _F,
        "as read: a gauge's value, a counter's or histogram part's total since the server "
        "started (one scrape of no known time: nothing to difference)",
    ),
)
UNTIMED = schema_of(UNTIMED_COLUMNS)
"""Scrapes of no known time (a saved ``/metrics`` answer without a witness), listed as read."""

GLOSSARY: dict[str, str] = glossary(METRIC_COLUMNS)
