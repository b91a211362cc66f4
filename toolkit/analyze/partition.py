"""The layer split of a PP launch as its startup lines measure it.

Each stage's scheduler prints what it loaded (``Load weight end. ... mem usage=X GB``) and the
KV pool it allocated (``KV Cache is allocated. #tokens: N, K size: ... GB, V size: ... GB`` or
``KV size: ... GB``). Under PP every stage allocates the same number of tokens (the pool is
the MIN over stages), each for its own layers only, so a stage's KV bytes per token are its
share of the layers. Its weights show the split too, but the first stage also holds the
embedding and the last the lm_head, which count as layers there: a lead, not a count.
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.model import layer_partition
from toolkit.errors import ToolkitError
from toolkit.schema import Column, schema_of

__all__ = ["LAYER_FIT", "STAGE_MEMORY", "measured_partition", "stage_memory", "uneven_partition"]

STAGE_MEMORY = schema_of(
    (
        Column("pp", pl.Int32(), "pipeline stage"),
        Column("weight_gb", pl.Float64(), "weights one GPU of the stage loaded (mem usage), GB"),
        Column("kv_gb", pl.Float64(), "KV pool of one GPU of the stage (K + V, or KV), GB"),
        Column("kv_tokens", pl.Int64(), "tokens that pool holds"),
        Column("kv_bytes_per_token", pl.Float64(), "KV bytes per token: ∝ the stage's layers"),
    )
)

LAYER_FIT = 0.15
"""How far from a whole layer each stage's KV share may fall for the split to count as
measured: beyond it the layers do not share one KV size (hybrid or sliding-window models)."""


def stage_memory(startup: pl.DataFrame) -> pl.DataFrame:
    """Per PP stage, the weights and KV pool its first TP rank reported (``STAGE_MEMORY``);
    empty without PP ranks in ``startup`` (a launch's long-form startup facts)."""
    wanted = ("weight_mem_gb", "kv_k_gb", "kv_v_gb", "kv_size_gb", "kv_tokens")
    if not startup.height or "pp" not in startup.columns:
        return pl.DataFrame(schema=STAGE_MEMORY)
    facts = startup.filter(pl.col("pp").is_not_null() & pl.col("fact").is_in(wanted))
    if not facts.height:
        return pl.DataFrame(schema=STAGE_MEMORY)
    first_tp = pl.col("tp").fill_null(0) == pl.col("tp").fill_null(0).min().over("pp")
    wide = (
        facts.filter(first_tp)
        .group_by("pp", "fact")
        .agg(pl.col("value").last())
        .pivot(on="fact", index="pp", values="value")
    )
    for name in wanted:
        if name not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(name))
    kv = pl.coalesce(pl.col("kv_k_gb") + pl.col("kv_v_gb"), pl.col("kv_size_gb"))
    out = wide.select(
        pl.col("pp").cast(pl.Int32),
        pl.col("weight_mem_gb").alias("weight_gb"),
        kv.alias("kv_gb"),
        pl.col("kv_tokens").cast(pl.Int64),
    ).with_columns(kv_bytes_per_token=pl.col("kv_gb") * 1e9 / pl.col("kv_tokens").cast(pl.Float64))
    return out.sort("pp").cast(dict(STAGE_MEMORY))


def measured_partition(memory: pl.DataFrame, layers: int, pp: int) -> tuple[int, ...] | None:
    """Layers per stage from each stage's KV bytes per token (``stage_memory``), when every one
    of the ``pp`` stages reported its pool and each share lands within ``LAYER_FIT`` of a whole
    layer of ``layers``; else None."""
    per_token = memory.filter(pl.col("kv_bytes_per_token") > 0)["kv_bytes_per_token"].to_list()
    if pp < 2 or layers < pp or len(per_token) != pp or memory.height != pp:
        return None
    total = sum(per_token)
    shares = [layers * x / total for x in per_token]
    counts = tuple(round(s) for s in shares)
    if sum(counts) != layers or min(counts) < 1:
        return None
    if any(abs(s - c) > LAYER_FIT for s, c in zip(shares, counts, strict=True)):
        return None
    return counts


def uneven_partition(memory: pl.DataFrame, layers: int, pp: int) -> tuple[int, ...] | None:
    """The measured split (``measured_partition``) when it is not SGLang's default one for
    ``layers`` over ``pp`` stages (the remainder on the last stages, as from 0.5.6); else None."""
    measured = measured_partition(memory, layers, pp)
    if measured is None:
        return None
    try:
        return None if measured == layer_partition(layers, pp) else measured
    except ToolkitError:
        return measured
