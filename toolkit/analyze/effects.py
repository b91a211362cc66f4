"""Effects measured from a run's own lines and results, for the findings to size their impact.

Each function reads frames the loaders and other analyses produce and returns plain numbers
with the rows they came from; none uses the serving model:

* ``graph_effect``: how many generated tokens ran on eager (no CUDA graph) decode steps, and how
  much slower such a step was than a graph step at a neighbouring batch size;
  ``eager_window_share`` the same token share in one stretch of a phase.
* ``prefill_effect``: how much decode throughput the windows that held a prefill pass lost,
  weighted by the time they lasted.
* ``trip_curve``: the round time of an under-filled pipeline against its micro-batch size, as a
  straight line through the phases that measured it.
* ``elasticity``: how throughput grows with concurrency along the run's own benchmark sweep.
* ``round_at``: the round at one micro-batch size, read from the sizes the run measured.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import polars as pl

__all__ = [
    "MIN_LEVEL_LINES",
    "GraphEffect",
    "PrefillEffect",
    "TripCurve",
    "eager_window_share",
    "elasticity",
    "graph_effect",
    "prefill_effect",
    "prefill_loss",
    "round_at",
    "trip_curve",
]

_F = pl.Float64()


def _windows(decode: pl.DataFrame) -> pl.DataFrame:
    """Decode lines with the window each closes: ``window_s`` since the previous line of its
    phase (the phase's median for its first line) and ``tokens`` generated in it."""
    interval = (pl.col("ts").diff().dt.total_milliseconds() / 1000.0).over("phase")
    df = decode.sort("ts").with_columns(window_s=interval)
    df = df.with_columns(
        window_s=pl.coalesce("window_s", pl.col("window_s").median().over("phase"), pl.lit(0.0))
    )
    return df.with_columns(tokens=pl.col("gen_tok_s").cast(_F).fill_null(0.0) * pl.col("window_s"))


@dataclass(frozen=True)
class GraphEffect:
    """Eager decode of a run: its token share, overall and in the phase where it is largest,
    its measured slowdown (None: no comparison), and what the eager steps were compared with."""

    eager_lines: int
    flagged_lines: int
    eager_token_share: float
    phase: int | None  # the phase with the largest eager token share
    phase_share: float  # that phase's eager token share
    slowdown: float | None
    evidence: pl.DataFrame  # per (phase, batch, cuda_graph): lines, tokens, step_ms, role
    reference: str = ""  # the graph steps the slowdown rests on, in words
    bounded: bool = False  # read against one graph batch size: the slowdown is a lower bound
    slowdown_spread: tuple[float, float] | None = None  # quartiles of the lines' slowdowns


MIN_LEVEL_LINES = 2
"""Graph lines a (phase, batch size) needs to be a level: one line is a ramp or a test request."""


def graph_effect(
    decode: pl.DataFrame,
    *,
    bound_phases: Collection[int] = (),
    loads: Mapping[int, str] | None = None,
) -> GraphEffect | None:
    """Eager share and slowdown from decode lines that carry ``cuda graph: True/False``.

    ``decode`` needs ``ts``, ``phase``, ``cuda_graph``, ``gen_tok_s`` and ``running`` (requests the
    line's throughput serves: ``#running-req`` without PP, the estimated total under PP); under PP
    also ``active_slots_est`` and ``stages``. The time of one micro-batch's step is the round,
    ``running / gen_tok_s``, over the passes a stage makes in it: one without PP, the active slots
    under PP, or the stages when fewer slots leave each stage idle part of the round.

    The eager lines of a phase are compared with graph lines that are comparable: levels (at
    least ``MIN_LEVEL_LINES`` graph lines of one phase at one batch size, not counting the
    phase's first line, whose throughput SGLang averages over the pause before it) of the same
    phase, or of phases not in ``bound_phases`` (phases whose pace
    a full KV pool or retractions set, not the batch: their windows hold re-admission prefill
    and their running estimate rests on contexts that vary). Through those levels' median step
    per batch size runs a Theil–Sen line, read at the eager batch size within twice the largest
    graph batch size. With one batch size the line's slope is unknown; a graph step grows at
    most in proportion to the batch (``t0 + k·b`` with ``t0 ≥ 0``), so it is read as that
    level's step, scaled in proportion above its batch size: an upper bound of the graph step,
    so the slowdown is a lower bound.
    """
    flagged = _flagged(decode)
    if not flagged.height:
        return None
    passes = pl.lit(1.0)
    if {"active_slots_est", "stages"} <= set(flagged.columns):
        stages = pl.col("stages").cast(_F)
        slots = pl.max_horizontal(pl.col("active_slots_est").cast(_F).fill_null(1.0), stages)
        passes = pl.when(stages > 1).then(slots).otherwise(1.0)
    df = flagged.with_columns(
        step_s=pl.col("running").cast(_F) / pl.col("gen_tok_s").cast(_F) / passes
    )
    eager = df.filter(~pl.col("cuda_graph"))
    total = float(df["tokens"].sum() or 0.0)
    share = float(eager["tokens"].sum() or 0.0) / total if total > 0 else 0.0
    by_phase = (
        df.group_by("phase")
        .agg(
            share=pl.col("tokens").filter(~pl.col("cuda_graph")).sum() / pl.col("tokens").sum(),
            lines=pl.len(),
        )
        .filter((pl.col("lines") >= 2) & pl.col("share").is_finite())
        .sort("share", "phase", descending=[True, False])
    )
    worst = by_phase.row(0, named=True) if by_phase.height else {"phase": None, "share": share}
    # A phase's first line averages its throughput over the pause before the phase (SGLang
    # divides by the time since the stage's previous line): no level.
    opening = pl.col("ts").rank("ordinal").over("phase") == 1
    levels = (
        df.filter(
            pl.col("cuda_graph") & pl.col("step_s").is_finite() & (pl.col("step_s") > 0) & ~opening
        )
        .group_by("phase", "batch")
        .agg(pl.col("step_s"), lines=pl.len())
        .filter(pl.col("lines") >= MIN_LEVEL_LINES)
    )
    bound = set(bound_phases)
    ratios: list[float] = []
    used: set[tuple[int, int]] = set()
    words: list[str] = []
    bounded = False
    for (phase,), lines in eager.group_by("phase", maintain_order=True):
        ref = levels.filter((pl.col("phase") == phase) | ~pl.col("phase").is_in(list(bound)))
        if not ref.height:
            continue
        typical = (
            ref.explode("step_s").group_by("batch").agg(pl.col("step_s").median()).sort("batch")
        )
        xs = typical["batch"].cast(_F).to_list()
        ys = typical["step_s"].to_list()
        reach = 2.0 * max(xs)
        hits = 0
        for b, step in zip(lines["batch"].to_list(), lines["step_s"].to_list(), strict=True):
            if b is None or step is None or not math.isfinite(step) or b > reach:
                continue
            expected = _graph_step(xs, ys, float(b))
            if expected > 0:
                ratios.append(step / expected)
                hits += 1
        if hits:
            bounded = bounded or len(xs) == 1
            used |= {(p, b) for p, b in ref.select("phase", "batch").iter_rows()}
            eager_batches = lines["batch"].drop_nulls().to_list()
            words.append(_compared(phase, ref, xs, eager_batches, loads or {}))
    slowdown = max(1.0, _median(ratios)) if ratios else None
    spread = (
        (max(1.0, _quantile(ratios, 0.25)), max(1.0, _quantile(ratios, 0.75))) if ratios else None
    )
    evidence = (
        df.group_by("phase", "batch", "cuda_graph")
        .agg(
            lines=pl.len(),
            tokens=pl.col("tokens").sum(),
            step_ms=(pl.col("step_s") * 1e3).median(),
        )
        .sort("phase", "batch", "cuda_graph")
        .with_columns(pl.col("tokens", "step_ms").round(1))
    )
    roles = [
        "eager" if not graph else "reference" if (phase, batch) in used else "not compared"
        for phase, batch, graph in evidence.select("phase", "batch", "cuda_graph").iter_rows()
    ]
    evidence = evidence.with_columns(role=pl.Series(roles, dtype=pl.String))
    return GraphEffect(
        eager.height,
        df.height,
        share,
        worst["phase"],
        float(worst["share"]),
        slowdown,
        evidence,
        "; ".join(words),
        bounded,
        spread,
    )


def _flagged(decode: pl.DataFrame) -> pl.DataFrame:
    """The decode lines that carry the graph flag and a throughput, with their ``_windows``."""
    return _windows(decode.filter(pl.col("cuda_graph").is_not_null() & (pl.col("gen_tok_s") > 0)))


def eager_window_share(
    decode: pl.DataFrame, phase: int, start: datetime, end: datetime
) -> tuple[float, int] | None:
    """The eager token share of ``phase``'s flagged decode lines from ``start`` to ``end``
    (both included), weighted as ``graph_effect`` weighs its shares: each line by the tokens
    of the window it closes, which reaches back to the phase's previous line; and the lines
    it rests on. None when no flagged line with tokens falls there (unflagged versions)."""
    lines = _flagged(decode).filter(
        (pl.col("phase") == phase) & pl.col("ts").is_between(start, end)
    )
    total = float(lines["tokens"].sum() or 0.0)
    if total <= 0:
        return None
    eager = float(lines.filter(~pl.col("cuda_graph"))["tokens"].sum() or 0.0)
    return eager / total, lines.height


def _graph_step(xs: Sequence[float], ys: Sequence[float], b: float) -> float:
    """The graph step at batch ``b`` from per-batch medians (``xs`` sorted): the Theil–Sen line
    through two or more sizes; from one, its step scaled in proportion above its size."""
    if len(xs) == 1:
        return ys[0] * max(1.0, b / xs[0])
    a, slope = _median_line(xs, ys)
    return a + slope * b


def _compared(
    phase: int,
    ref: pl.DataFrame,
    xs: Sequence[float],
    eager: Sequence[int],
    loads: Mapping[int, str],
) -> str:
    """What the eager steps of ``phase`` were compared with, in words; ``loads`` names a phase
    by its load (``at 64 concurrent requests``), else it is ``in phase 3``."""
    own = ref.filter(pl.col("phase") == phase).height > 0
    where = sorted({int(p) for p in ref["phase"].to_list()})
    sizes = ", ".join(f"{x:g}" for x in xs)
    lines = int(ref["lines"].sum())
    low, high = min(eager), max(eager)
    batch = f"{low}" if low == high else f"{low}–{high}"
    if own and len(where) == 1:
        others = "of the same phase"
    elif all(p in loads for p in where):
        others = "; ".join(loads[p] for p in where)
    else:
        others = f"in phase{'s' if len(where) > 1 else ''} {', '.join(map(str, where))}"
    text = (
        f"eager steps {loads.get(phase, f'in phase {phase}')} (batch {batch}) against {lines} "
        f"graph lines at batch {sizes} {others}"
    )
    if len(xs) == 1:
        text += (
            ", one batch size: its step scaled in proportion to the batch (an upper bound of a "
            "graph step, so the slowdown is at least this)"
        )
    return text


def _median_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Theil–Sen ``y = a + b·x``: the median of the pairwise slopes (never < 0) and the median
    intercept, so one odd point does not tilt it; a constant through one distinct x."""
    slopes = sorted(
        (ys[j] - ys[i]) / (xs[j] - xs[i])
        for i in range(len(xs))
        for j in range(i + 1, len(xs))
        if xs[j] != xs[i]
    )
    if not slopes:
        return sorted(ys)[len(ys) // 2], 0.0
    slope = max(0.0, _median(slopes))
    return _median([y - slope * x for x, y in zip(xs, ys, strict=True)]), slope


def _quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` by linear interpolation between order statistics."""
    s = sorted(values)
    at = q * (len(s) - 1)
    lo = math.floor(at)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (at - lo)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares ``y = a + b·x`` (a constant through one distinct x); slope never < 0."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return my, 0.0
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx)
    return my - slope * mx, slope


@dataclass(frozen=True)
class PrefillEffect:
    """Decode windows with and without a prefill pass, per phase, and the time-weighted loss."""

    loss: float  # share of the decode tokens the windows with prefill did not generate
    with_share: float  # share of decode time spent in windows with a prefill pass
    rate_with: float
    rate_without: float
    evidence: pl.DataFrame


def prefill_effect(decode: pl.DataFrame, prefill: pl.DataFrame) -> PrefillEffect | None:
    """The decode throughput windows holding a prefill pass lost, weighted by their time.

    A window is the span a decode line closes; it holds a prefill when a ``Prefill batch`` line
    of the same stage falls inside it. The first two windows of a phase hold its opening burst
    (the load itself, not an interruption) and are left out. Per phase, the loss is
    ``Σ_with duration·(rate_without − rate) / Σ_all duration·rate_without``, where
    ``rate_without`` is the median rate of that phase's windows without prefill.
    """
    if decode.height < 4 or not prefill.height:
        return None
    df = _windows(decode).with_columns(
        prev=pl.col("ts").shift(1).over("phase"), nth=pl.int_range(pl.len()).over("phase")
    )
    last = prefill.select(pl.col("ts").alias("_at"), pl.col("ts").alias("_prefill")).sort("_at")
    df = df.join_asof(last, left_on="ts", right_on="_at", strategy="backward")
    held = pl.col("prev").is_not_null() & (pl.col("_prefill") > pl.col("prev")).fill_null(False)
    df = df.with_columns(with_prefill=held).filter(pl.col("nth") >= 2)
    base = (
        df.filter(~pl.col("with_prefill"))
        .group_by("phase")
        .agg(rate_without=pl.col("gen_tok_s").median())
    )
    df = df.join(base, on="phase", how="inner").filter(pl.col("rate_without") > 0)
    if not df.height or not df["with_prefill"].any():
        return None
    lost = pl.when(pl.col("with_prefill")).then(
        (pl.col("rate_without") - pl.col("gen_tok_s")).clip(lower_bound=0.0) * pl.col("window_s")
    )
    per_phase = (
        df.group_by("phase")
        .agg(
            windows=pl.len(),
            with_prefill=pl.col("with_prefill").sum(),
            rate_with=pl.col("gen_tok_s").filter(pl.col("with_prefill")).median(),
            rate_without=pl.col("rate_without").first(),
            time_with_s=pl.col("window_s").filter(pl.col("with_prefill")).sum(),
            time_s=pl.col("window_s").sum(),
            tokens_with=(pl.col("gen_tok_s") * pl.col("window_s"))
            .filter(pl.col("with_prefill"))
            .sum(),
            lost=lost.sum(),
            possible=(pl.col("rate_without") * pl.col("window_s")).sum(),
        )
        .sort("phase")
    )
    possible = float(per_phase["possible"].sum() or 0.0)
    if possible <= 0:
        return None
    loss = float(per_phase["lost"].sum() or 0.0) / possible
    with_share = float(per_phase["time_with_s"].sum()) / float(per_phase["time_s"].sum() or 1.0)
    rate_with = float(df.filter(pl.col("with_prefill"))["gen_tok_s"].median() or 0.0)
    rate_without = float(df.filter(~pl.col("with_prefill"))["gen_tok_s"].median() or 0.0)
    evidence = per_phase.with_columns(
        pl.col("rate_with", "rate_without", "time_with_s", "time_s", "tokens_with").round(1),
        loss=(pl.col("lost") / pl.col("possible")).round(3),
    ).drop("lost", "possible")
    return PrefillEffect(loss, with_share, rate_with, rate_without, evidence)


def prefill_loss(row: Mapping[str, float], scale: float = 1.0) -> float:
    """One phase's prefill loss (a ``PrefillEffect.evidence`` row) with its windows' rate
    without prefill scaled by ``scale``: the decode tokens the prefill windows lack, over
    what the phase would generate at that rate (clipped to [0, 1])."""
    rate = row["rate_without"] * scale
    if rate <= 0 or row["time_s"] <= 0:
        return 0.0
    lost = rate * row["time_with_s"] - row["tokens_with"]
    return min(1.0, max(0.0, lost / (rate * row["time_s"])))


@dataclass(frozen=True)
class TripCurve:
    """``round ≈ base + per_request · b`` of a pipeline whose slots each pass the whole ring."""

    base_s: float
    per_request_s: float
    points: tuple[tuple[float, float], ...]  # (micro-batch size, round time s) measured

    def round_s(self, b: float) -> float:
        return self.base_s + self.per_request_s * b


def trip_curve(points: Sequence[tuple[float, float]]) -> TripCurve | None:
    """A straight line through (micro-batch size, round time) points of under-filled phases;
    None without two distinct sizes (the slope is then unknown)."""
    clean = [(b, r) for b, r in points if b > 0 and math.isfinite(r) and r > 0]
    if len({round(b, 3) for b, _ in clean}) < 2:
        return None
    base, slope = _line([b for b, _ in clean], [r for _, r in clean])
    if base <= 0 and slope <= 0:
        return None
    return TripCurve(max(base, 0.0), slope, tuple(clean))


def elasticity(curve: Mapping[int, float], below: int) -> float | None:
    """How throughput grows with concurrency below ``below``: the slope of log(tok/s) against
    log(concurrency) between the two highest measured loads under it, clipped to [0, 1]; None
    when fewer than two loads were measured there."""
    loads = sorted(c for c in curve if 0 < c < below and curve[c] > 0)
    if len(loads) < 2:
        return None
    a, b = loads[-2], loads[-1]
    slope = math.log(curve[b] / curve[a]) / math.log(b / a)
    return min(1.0, max(0.0, slope))


def round_at(
    points: Sequence[tuple[float, float]], size: float
) -> tuple[float, tuple[float, ...]] | None:
    """The round at micro-batch ``size`` from measured (micro-batch size, round s) points, and
    the measured sizes it rests on: the median of the points within half a request of it,
    else the straight line between the nearest measured sizes below and above it; None
    outside the measured sizes (how the round grows beyond them is not measured)."""
    clean = [(b, r) for b, r in points if b > 0 and math.isfinite(r) and r > 0]
    near = [(b, r) for b, r in clean if abs(b - size) <= 0.5]
    if near:
        return _median([r for _, r in near]), tuple(sorted({b for b, _ in near}))
    b0 = max((b for b, _ in clean if b < size), default=None)
    b1 = min((b for b, _ in clean if b > size), default=None)
    if b0 is None or b1 is None:
        return None
    r0 = _median([r for b, r in clean if b == b0])
    r1 = _median([r for b, r in clean if b == b1])
    return r0 + (r1 - r0) * (size - b0) / (b1 - b0), (b0, b1)
