"""Metric spellings of gateways: ``sglang_*`` read as ``sglang:*``, router series set apart.

A scrape taken through sgl-router's ``/engine_metrics``, an SMG sidecar or some Dynamo and
llm-d setups spells SGLang's metrics ``sglang_num_running_reqs`` instead of
``sglang:num_running_reqs``; the rename is undone here so every analysis reads one name, and
each file where it happened gets a ``gateway-rename`` caveat. sgl-router's own series
(``sgl_router_*``: request rates and latencies per worker) describe the router, not an engine:
they go to their own table and never into the engine's per-stage sums. Labels such as
``worker_addr`` and ``pid`` stay in ``labels``, so series of different workers stay apart.
"""

from __future__ import annotations

import polars as pl

from toolkit.schema.caveats import Caveat
from toolkit.schema.prometheus import GATEWAY_PREFIX, ROUTER_PREFIX

__all__ = ["engine_names", "split_router"]

_ENGINE = "sglang:"
_SERIES = ("metric", "pp_rank", "tp_rank", "dp_rank", "labels")


def engine_names(table: pl.DataFrame) -> tuple[pl.DataFrame, list[Caveat]]:
    """``table`` with ``sglang_*`` metric names spelled ``sglang:*``, and one
    ``gateway-rename`` caveat per file where a series was renamed."""
    if not table.height:
        return table, []
    renamed = pl.col("metric").str.starts_with(GATEWAY_PREFIX)
    counts = (
        table.filter(renamed)
        .group_by("source", maintain_order=True)
        .agg(series=pl.struct(_SERIES).n_unique())
    )
    caveats = [
        Caveat(
            "gateway-rename",
            source,
            n,
            detail=f"{n} series spelled sglang_* (scraped via a gateway) read as sglang:*",
        )
        for source, n in counts.iter_rows()
    ]
    fixed = pl.when(renamed).then(pl.lit(_ENGINE) + pl.col("metric").str.slice(len(GATEWAY_PREFIX)))
    return table.with_columns(metric=fixed.otherwise(pl.col("metric"))), caveats


def split_router(table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, list[Caveat]]:
    """(engine series, router series, one ``router-series`` caveat per file holding any)."""
    router = pl.col("metric").str.starts_with(ROUTER_PREFIX)
    routed = table.filter(router)
    counts = routed.group_by("source", maintain_order=True).agg(
        series=pl.struct(_SERIES).n_unique()
    )
    caveats = [
        Caveat(
            "router-series",
            source,
            n,
            detail=f"{n} router series (sgl_router_*) kept apart from the engine's",
        )
        for source, n in counts.iter_rows()
    ]
    return table.filter(~router), routed, caveats
