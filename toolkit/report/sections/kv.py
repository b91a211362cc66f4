"""KV pool usage over time per run, and the retractions a full pool caused."""

from __future__ import annotations

import polars as pl

from toolkit.analyze.series import downsample_means, epoch_ms, since_first
from toolkit.chart.kv import kv_pressure_chart
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import MAX_POINTS
from toolkit.report.view import (
    View,
    note,
)

__all__ = ["kv_pressure"]


def kv_pressure(runs: RunSet, threshold: float = 0.9, max_points: int = MAX_POINTS) -> View:
    """KV pool usage over time per run, and the retractions a full pool caused
    (``analyze.kv``)."""
    frames, records, single = [], [], []
    for run, label in zip(runs, runs.labels, strict=True):
        kv = runs.analysis(run).kv.filter(
            pl.col("ts").is_not_null() & pl.col("token_usage").is_not_null()
        )
        if not kv.height:
            continue
        if kv.height < 2:
            single.append(label)  # one sample draws no line: said in a note, not the chart
        else:
            frames.append(
                since_first(kv.select(epoch_ms(), pl.lit(label).alias("label"), "token_usage"))
            )
        records.append(
            {
                "run": label,
                "peak_usage": kv["token_usage"].max(),
                "mean_usage": kv["token_usage"].mean(),
                "retractions": int(kv["retracted"].fill_null(0).sum()),
                "lines_blocked_by_tokens": int(kv["blocked_by_tokens"].fill_null(False).sum()),
                "max_total_num_tokens": run.layout.max_total_num_tokens,
            }
        )
    notes = (
        [note(f"Only one KV usage sample in {', '.join(single)}: no line to draw.")]
        if single
        else []
    )
    if not frames:
        text = "No KV usage (token usage) in these logs."
        return View("kv", [*notes, note(text)] if not records else notes, {"kv": records})
    data, _ = downsample_means(pl.concat(frames), ["label"], ["token_usage"], max_points)
    table = pl.DataFrame(records, infer_schema_length=None)
    return View("kv", [kv_pressure_chart(data, threshold), *notes, table], {"kv": records})
