"""KV-cache pressure: pool usage over time, retractions, and admission held back by tokens.

When the KV pool runs full SGLang retracts running requests (``KV cache pool is full. Retract
requests. #retracted_reqs: N, #new_token_ratio: a -> b``; ≤0.4 ``Decode out of memory
happened. ...``): their KV is dropped and they are recomputed later, and admission turns more
conservative (``new_token_ratio`` up). Waiting requests while ``token usage`` is near 1 mean
admission is held by tokens rather than by a request cap. Under PP the pool is one per stage,
sized by the heaviest stage (``max_total_num_tokens`` is the MIN over stages).
"""

from __future__ import annotations

import polars as pl

from toolkit.analyze.stages import reference_lines
from toolkit.schema import Column, schema_of

__all__ = ["KV_PRESSURE", "RETRACTIONS", "RETRACTION_PREFIXES", "kv_pressure", "retractions"]

_I, _F, _B, _T = pl.Int64(), pl.Float64(), pl.Boolean(), pl.Datetime("ms")

RETRACTION_PREFIXES = ("KV cache pool is full. Retract requests.", "Decode out of memory happened.")
"""How SGLang announces a retraction (≥0.4.5, and older)."""

RETRACTION_COLUMNS: tuple[Column, ...] = (
    Column("ts", _T, "time of the retraction"),
    Column("pp", _I, "stage that logged it (0 without PP)"),
    Column("retracted_reqs", _I, "requests retracted (their KV dropped, recomputed later)"),
    Column("ratio_before", _F, "new_token_ratio before: KV admission reserves per request"),
    Column("ratio_after", _F, "new_token_ratio after (higher = more conservative admission)"),
)
RETRACTIONS = schema_of(RETRACTION_COLUMNS)

KV_PRESSURE_COLUMNS: tuple[Column, ...] = (
    Column("ts", _T, "time of the batch line (reference stage)"),
    Column("kind", pl.String(), "prefill or decode"),
    Column("token", _I, "#token: KV tokens in use"),
    Column("token_usage", _F, "KV pool in use, 0–1"),
    Column("queue_req", _I, "#queue-req: requests waiting"),
    Column("running_req", _I, "#running-req (one slot under PP)"),
    Column("retracted", _I, "requests retracted since the previous line"),
    Column("blocked_by_tokens", _B, "requests wait while the pool is at least `full_usage` full"),
)
KV_PRESSURE = schema_of(KV_PRESSURE_COLUMNS)


def retractions(lines: pl.DataFrame) -> pl.DataFrame:
    """Retraction events from log lines (``ts``, ``message``, optional ``pp``), schema
    ``RETRACTIONS``; lines that are no retraction are ignored."""
    if not lines.height or "message" not in lines.columns:
        return pl.DataFrame(schema=RETRACTIONS)
    msg = pl.col("message")
    hit = pl.any_horizontal(*(msg.str.contains(p, literal=True) for p in RETRACTION_PREFIXES))
    df = lines.filter(hit)
    pp = pl.col("pp").cast(_I).fill_null(0) if "pp" in df.columns else pl.lit(0, _I)
    out = df.select(
        pl.col("ts").cast(_T),
        pp.alias("pp"),
        retracted_reqs=msg.str.extract(r"#retracted_reqs: (\d+)", 1).cast(_I, strict=False),
        ratio_before=msg.str.extract(r"#new_token_ratio: ([\d.]+)", 1).cast(_F, strict=False),
        ratio_after=msg.str.extract(r"-> ([\d.]+)", 1).cast(_F, strict=False),
    )
    return out.cast(dict(RETRACTIONS))


def kv_pressure(
    batches: pl.DataFrame,
    retracted: pl.DataFrame | None = None,
    *,
    full_usage: float = 0.9,
) -> pl.DataFrame:
    """Per batch line of the reference stage: pool usage, queue, retractions since the previous
    line, and whether waiting requests are held back by tokens (schema ``KV_PRESSURE``).

    Retractions are counted on the reference stage only when it logged any (every stage
    retracts the same requests); else on all stages.
    """
    lines = reference_lines(batches).sort("ts")
    if not lines.height:
        return pl.DataFrame(schema=KV_PRESSURE)
    out = lines.select(
        pl.col("ts").cast(_T),
        "kind",
        "token",
        "token_usage",
        "queue_req",
        "running_req",
        blocked_by_tokens=(pl.col("queue_req").fill_null(0) > 0)
        & (pl.col("token_usage").fill_null(0.0) >= full_usage),
    )
    counts = pl.Series("retracted", [0] * out.height, dtype=_I)
    if retracted is not None and retracted.height:
        ref_pp = int(lines["pp"].cast(_I).fill_null(0).min() or 0) if "pp" in lines.columns else 0
        own = retracted.filter(pl.col("pp") == ref_pp)
        events = (own if own.height else retracted).sort("ts")
        # Each retraction goes to the first line at or after it.
        tagged = events.join_asof(
            out.select("ts").with_row_index("_line"), on="ts", strategy="forward"
        )
        per_line = tagged.group_by("_line").agg(n=pl.col("retracted_reqs").fill_null(1).sum())
        values = counts.to_list()
        for line, n in per_line.drop_nulls("_line").iter_rows():
            values[line] = int(n)
        counts = pl.Series("retracted", values, dtype=_I)
    out = out.with_columns(counts)
    return out.select(KV_PRESSURE.names()).cast(dict(KV_PRESSURE))
