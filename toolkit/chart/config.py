"""Config diff as a table chart: runs side by side, differing values highlighted.

Rows follow ``config_diff``'s order (parallel sizes first, derived values last); a last column
gives each key's one-line meaning. Good in HTML reports, where a table of text reads best.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.theme import PALETTE

__all__ = ["config_diff_chart"]

MAX_TEXT = 34


def config_diff_chart(diff: pl.DataFrame) -> alt.LayerChart:
    """A table of ``config.config_diff`` (long form): key × run, changed cells shaded."""
    runs = diff["run"].unique(maintain_order=True).to_list()
    cells = diff.select(
        "order",
        "key",
        pl.col("run").alias("column"),
        pl.col("value")
        .fill_null("(absent)")
        .str.strip_chars('"')
        .map_elements(_short, return_dtype=pl.String)
        .alias("text"),
        "changed",
    )
    meaning = (
        diff.group_by("order", "key", maintain_order=True)
        .agg(pl.col("meaning").first(), pl.col("changed").first())
        .select(
            "order",
            "key",
            pl.lit("meaning").alias("column"),
            pl.col("meaning").fill_null("").alias("text"),
            pl.lit(False).alias("changed"),
        )
    )
    table = pl.concat([cells, meaning.cast(cells.schema)]).sort("order")
    keys = table["key"].unique(maintain_order=True).to_list()
    y = alt.Y("key:N", sort=keys, title=None, axis=alt.Axis(orient="left", labelLimit=260))
    x = alt.X(
        "column:N",
        sort=[*runs, "meaning"],
        title=None,
        axis=alt.Axis(orient="top", labelAngle=0),
    )
    shade = (
        alt.Chart(table.filter(pl.col("changed")).select("key", "column"))
        .mark_rect(color=PALETTE[1], opacity=0.25)
        .encode(x=x, y=y)
    )
    text = (
        alt.Chart(table.select("key", "column", "text"))
        .mark_text(align="left", dx=-60, fontSize=11)
        .encode(x=x, y=y, text="text:N")
    )
    changed = diff.filter(pl.col("changed"))["key"].n_unique()
    return alt.layer(shade, text).properties(
        width=170 * (len(runs) + 2),
        height=max(60, 18 * len(keys)),
        title=alt.TitleParams(
            f"{changed} setting(s) differ between {' and '.join(runs)}",
            subtitle="shaded: the runs disagree; parallel settings first, derived values last",
        ),
    )


def _short(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
