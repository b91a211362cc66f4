"""``cuda-graph-miss``: decode steps that ran eagerly instead of replaying a CUDA graph.

The decode line's ``cuda graph: False`` marks a micro-batch that ran eagerly: its batch size
was above the captured maximum (or not in the list with padding off), or graphs are disabled.
Eager decode pays one kernel launch per op, which at small batches costs a large share of the
step. Under PP the size that must be captured is one *slot*, and ``cuda_graph_max_bs`` follows
``tp_size``, not ``pp_size``.
"""

from __future__ import annotations

import math

from toolkit.diagnose.finding import Finding, severity_of
from toolkit.run_analysis import RunAnalysis

__all__ = ["EAGER_SLOWDOWN", "cuda_graph_miss"]

EAGER_SLOWDOWN = 1.5
"""Assumed cost of an eager decode step relative to its graph (an estimate: launch overhead
dominates small-batch decode); the impact is ``eager_share × (1 − 1/EAGER_SLOWDOWN)``."""

MIN_SHARE = 0.05
GRAPH_DEVICES = frozenset({"cuda", "npu", "musa"})  # devices whose decode runs captured graphs


def cuda_graph_miss(ctx: RunAnalysis) -> Finding | None:
    """A noticeable share of decode steps ran eagerly."""
    devices = set(ctx.batches["graph_device"].drop_nulls().unique().to_list())
    if devices and not devices & GRAPH_DEVICES:
        return None  # eager is the normal mode on a CPU device
    g = ctx.graphs
    share = g["eager_share"]
    eager = g["eager_lines"] or g["uncaptured_lines"]
    if share is None or share < MIN_SHARE or eager < 2:
        return None
    impact = share * (1 - 1 / EAGER_SLOWDOWN)
    disabled = bool(ctx.server_args.get("disable_cuda_graph")) or g["max_captured"] == 0
    top, seen = g["max_captured"], g["max_observed"]
    if disabled:
        cause = "CUDA graphs are disabled (--disable-cuda-graph)"
        remedy = "Drop --disable-cuda-graph (and --disable-decode-cuda-graph)."
    elif top is not None and seen is not None and seen > top:
        cause = f"decode batches reach {seen} but graphs were captured only up to {top}"
        want = int(math.ceil(seen / 8) * 8)
        remedy = f"--cuda-graph-max-bs {want} (or --cuda-graph-bs listing the sizes you run)."
        if ctx.pp > 1:
            remedy += (
                " Under PP the size that counts is one slot (#running-req); "
                "--pp-max-micro-batch-size bounds it."
            )
    else:
        cause = "some decode batch sizes were not captured (padding off, or capture failed)"
        remedy = (
            "Check the `Capture ... CUDA graph` lines at startup; drop "
            "--disable-cuda-graph-padding or list the sizes in --cuda-graph-bs."
        )
    summary = (
        f"{eager} of {g['flagged_lines'] or g['decode_lines']} sampled decode steps "
        f"({share:.0%}) ran eagerly: {cause}. At an assumed {EAGER_SLOWDOWN}× per eager step "
        f"that costs ≈{impact:.0%} of decode throughput."
    )
    evidence = ctx.coverage.sort("eager_lines", "lines", descending=True).head(20)
    return Finding(
        id="cuda-graph-miss",
        severity=severity_of(impact),
        title=f"{share:.0%} of decode steps ran without a CUDA graph",
        summary=summary,
        evidence=evidence.sort("running_req"),
        remedy=remedy,
        impact=impact,
    )
