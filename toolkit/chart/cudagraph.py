"""CUDA-graph coverage: decode lines per batch size, graph vs eager, against the capture list.

One bar per observed decode batch size (``#running-req``: one slot under PP), stacked by what
each decode line reported (``cuda graph: True/False``); sizes outside the captured list are
drawn faint, so an eager bar there names its own cause.
"""

from __future__ import annotations

import altair as alt
import polars as pl

from toolkit.chart.encode import count_axis
from toolkit.chart.theme import MUTED, PALETTE

__all__ = ["graph_coverage_chart"]

_FLAGS = {"graph_lines": "CUDA graph", "eager_lines": "eager", "unflagged_lines": "not logged"}


def graph_coverage_chart(
    coverage: pl.DataFrame, max_captured: int | None = None, *, width: int = 300
) -> alt.Chart:
    """Stacked bars of ``cudagraph.cuda_graph_coverage``; ``max_captured`` goes in the subtitle.

    ``width`` is small by default: runs are shown side by side.
    """
    long = (
        coverage.select("running_req", "captured", *_FLAGS)
        .unpivot(index=["running_req", "captured"], variable_name="flag", value_name="lines")
        .filter(pl.col("lines") > 0)
        .with_columns(
            pl.col("flag").replace_strict(_FLAGS),
            pl.col("captured").fill_null(True),
        )
    )
    eager = int(coverage["eager_lines"].sum() or 0)
    flagged = eager + int(coverage["graph_lines"].sum() or 0)
    title = (
        f"{eager / flagged:.0%} of decode lines ran eagerly"
        if flagged
        else "Decode batch sizes (this SGLang version does not log the graph flag)"
    )
    if max_captured == 0:
        subtitle = "CUDA graphs disabled"
    elif max_captured:
        subtitle = f"graphs captured up to batch size {max_captured}; faint bars: not captured"
    else:
        subtitle = "captured sizes unknown"
    return (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X(
                "running_req:O",
                title="decode batch size (#running-req)",
                axis=alt.Axis(labelAngle=0),
            ),
            y=alt.Y("lines:Q", stack="zero", axis=count_axis("decode lines")),
            color=alt.Color(
                "flag:N",
                scale=alt.Scale(
                    domain=list(_FLAGS.values()), range=[PALETTE[2], PALETTE[3], MUTED]
                ),
                title=None,
            ),
            opacity=alt.condition(alt.datum.captured, alt.value(1.0), alt.value(0.35)),
            tooltip=["running_req:O", "flag:N", "lines:Q", "captured:N"],
        )
        .properties(width=width, height=220, title=alt.TitleParams(title, subtitle=subtitle))
    )
