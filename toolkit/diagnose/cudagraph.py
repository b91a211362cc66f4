"""``cuda-graph-miss``: decode steps that ran eagerly instead of replaying a CUDA graph.

The decode line's ``cuda graph: False`` marks a micro-batch that ran eagerly: its batch size
was above the captured maximum (or not in the list with padding off), or graphs are disabled.
Eager decode pays one kernel launch per op, which at small batches costs a large share of the
step. Under PP the size that must be captured is one *slot*, and ``cuda_graph_max_bs`` follows
``tp_size``, not ``pp_size``.
"""

from __future__ import annotations

import math
from datetime import datetime

from toolkit.analyze.effects import GraphEffect, eager_window_share, graph_effect
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.kv import pool_bound_phases
from toolkit.diagnose.sizing import spread
from toolkit.diagnose.slots import full_pipeline_idle
from toolkit.diagnose.thresholds import (
    ASSUMED_EAGER_SLOWDOWN,
    EAGER_SLOWDOWN_RANGE,
    MIN_EAGER_SHARE,
)
from toolkit.run_analysis import RunAnalysis

__all__ = ["cuda_graph_miss", "eager_constant", "eager_cost", "eager_cost_in", "eager_effect"]

GRAPH_DEVICES = frozenset({"cuda", "npu", "musa"})  # devices whose decode runs captured graphs


def eager_effect(ctx: RunAnalysis) -> GraphEffect | None:
    """The run's eager decode against comparable graph steps (``graph_effect``, the phases the
    KV pool paces kept from other phases' reference)."""
    loads = {p: ctx.load_of(p) for p in ctx.phases["phase"].to_list()}
    return graph_effect(ctx.decode, bound_phases=pool_bound_phases(ctx), loads=loads)


def eager_constant(ctx: RunAnalysis) -> dict[str, str]:
    """The eager slowdown as a constant of the run's diagnosis (``--json``'s ``constants``):
    measured against graph steps, a lower bound, or assumed; empty without eager steps."""
    effect = eager_effect(ctx)
    if effect is None or not effect.eager_lines:
        return {}
    low, high = EAGER_SLOWDOWN_RANGE
    if effect.slowdown is None:
        text = f"assumed {ASSUMED_EAGER_SLOWDOWN}× a graph step ({low}–{high}× for the range)"
    elif effect.bounded:
        text = f"measured at least {effect.slowdown:.2f}× (one graph batch size to compare)"
    else:
        text = f"measured {effect.slowdown:.2f}× ({effect.reference})"
    return {"eager_slowdown": text}


def eager_cost(share: float, slowdown: float) -> float:
    """Share of decode throughput lost when eager steps, each ``slowdown`` × a graph step,
    generate ``share`` of the tokens: ``share · (1 − 1/slowdown)``."""
    return share * (1 - 1 / slowdown)


def eager_cost_in(
    ctx: RunAnalysis, finding: Finding, phase: int, start: datetime, end: datetime
) -> tuple[float, float] | None:
    """(eager token share, cost) of the decode lines of ``phase`` from ``start`` to ``end``:
    the ``cuda-graph-miss`` finding's cost is linear in the eager share (``eager_cost``), so
    its impact over the share it was sized on, times the share of that stretch. None when the
    stretch holds no flagged line or the finding rests on no share."""
    effect = eager_effect(ctx)
    if effect is None or effect.phase_share <= 0 or not finding.impact:
        return None
    window = eager_window_share(ctx.decode, phase, start, end)
    if window is None:
        return None
    share = window[0]
    return share, float(finding.impact) * share / effect.phase_share


def cuda_graph_miss(ctx: RunAnalysis) -> Finding | None:
    """A noticeable share of the generated tokens came from eager decode steps.

    The share is weighted by tokens (a window of eager steps at high load generates more than
    one at low load) and taken in the phase where it is largest: a sweep whose top load runs
    eagerly loses that load's throughput, however short the phase. The slowdown is measured
    from the eager lines' time per token against the graph lines' at neighbouring batch sizes,
    else an assumed factor, said so.
    """
    devices = set(ctx.batches["graph_device"].drop_nulls().unique().to_list())
    if devices and not devices & GRAPH_DEVICES:
        return None  # eager is the normal mode on a CPU device
    effect = eager_effect(ctx)
    g = ctx.graphs
    if effect is None:
        return None
    share = effect.phase_share
    if share < MIN_EAGER_SHARE or effect.eager_lines < 2:
        return None
    slowdown, basis = effect.slowdown, "measured"
    low, high = effect.slowdown_spread or (slowdown, slowdown)
    if slowdown is None:
        slowdown, basis = ASSUMED_EAGER_SLOWDOWN, "assumed"
        low, high = EAGER_SLOWDOWN_RANGE
    elif effect.bounded:
        high = max(high or slowdown, EAGER_SLOWDOWN_RANGE[1])  # a lower bound: no ceiling read
    load = ctx.load_of(effect.phase)
    why = f"eager step {low:.1f}–{high:.1f}× a graph step" + (
        " (assumed)" if basis == "assumed" else " (quartiles of this log's eager lines)"
    )
    sized = spread(
        eager_cost(share, slowdown),
        [eager_cost(share, low or slowdown), eager_cost(share, high or slowdown)],
        basis=basis,
        where=load,
        rests_on=(why, f"{share:.0%} of the decode tokens {load} eager"),
    )
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
    note = ""
    if basis == "measured":
        factor = (
            f"an eager step took {slowdown:.1f}× the time of a graph step at a neighbouring "
            f"batch size in this log ({effect.reference})"
        )
    else:
        factor = (
            f"the log holds no graph step near the eager batch sizes to compare, so an eager "
            f"step is assumed to take {slowdown}× a graph step"
        )
    if basis == "assumed" or effect.bounded:
        idle = full_pipeline_idle(ctx, effect.phase) if effect.phase is not None else None
        if idle is not None:
            note = (
                f" With work on every GPU there, the busiest still idled {idle[0]:.0%} of the "
                "time (GPU trace); eager launch gaps leave the GPU idle, so that idle is taken "
                "as theirs, not as an unexplained slowdown."
            )
    summary = (
        f"{effect.eager_lines} of {effect.flagged_lines} sampled decode windows ran eagerly; "
        f"{load} they generated {share:.0%} of the decode tokens "
        f"({effect.eager_token_share:.0%} over the run): {cause}. {factor.capitalize()}: that "
        f"costs {sized.words()} of decode throughput {load}.{note}"
    )
    return Finding(
        id="cuda-graph-miss",
        title=f"{share:.0%} of decode tokens {load} came from steps without a CUDA graph",
        summary=summary,
        evidence=effect.evidence.head(20),
        remedy=remedy,
        phase=effect.phase,
        **sized.fields(),
    )
