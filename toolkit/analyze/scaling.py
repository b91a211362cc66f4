"""How throughput scales with concurrency, per layout, and where two layouts part ways.

Every function takes the ``runs`` table of ``load_bench`` (or the frames made here) and returns
a new frame with a declared schema (``SCALING``, ``GAP``, ``FRONTIER``), or a plain value.
Repeated runs of one layout at one concurrency are aggregated by their median, and the table
says how many there were. Missing points are interpolated only when asked, never beyond the
measured range, and are marked ``interpolated``: throughput and latencies follow a power law
between the two neighbouring points (linear in log-log).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.schema.bench import FRONTIER, GAP, SCALING

__all__ = [
    "caveat",
    "crossover",
    "failed_runs",
    "frontier",
    "knee",
    "scaling_gap",
    "scaling_table",
    "unlike",
]

_LATENCIES = ("ttft_median_ms", "tpot_median_ms", "itl_median_ms", "e2e_median_ms")
_FRONTIER_LATENCY = ("tpot_median_ms", "tpot_mean_ms", "itl_median_ms")


def _usable(runs: pl.DataFrame) -> pl.DataFrame:
    """Runs with a label, a positive concurrency and a finite output throughput, in which a
    request completed (``failed_runs`` are left out)."""
    return runs.filter(
        pl.col("label").is_not_null()
        & (pl.col("concurrency") > 0)
        & pl.col("output_tok_s").is_not_null()
        & pl.col("output_tok_s").is_finite()
        & _completed(runs)
    )


def failed_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """Runs that say no request completed (a server that died during the run): a throughput
    of 0 there measures the failure, not the layout, and is no point of any curve."""
    return runs.filter(~_completed(runs))


def _completed(runs: pl.DataFrame) -> pl.Expr:
    if "completed" not in runs.columns:
        return pl.lit(True)
    return pl.col("completed").is_null() | (pl.col("completed") > 0)


def _label_order(runs: pl.DataFrame) -> pl.DataFrame:
    labels = runs["label"].drop_nulls().unique(maintain_order=True)
    return pl.DataFrame({"label": labels, "_order": pl.int_range(len(labels), eager=True)})


def scaling_table(
    runs: pl.DataFrame, *, at: Iterable[int] | None = None, interpolate: bool = False
) -> pl.DataFrame:
    """Per layout and concurrency: median output tok/s, per-stream tok/s, scaling efficiency.

    Parameters
    ----------
    runs
        The ``runs`` table of ``load_bench``.
    at
        Concurrencies to report; default all measured ones (of any layout).
    interpolate
        Fill a layout's missing concurrencies (within its measured range) by log-log
        interpolation between the neighbouring points; such rows have ``n_runs`` 0 and
        ``interpolated`` True.

    Returns
    -------
    pl.DataFrame
        Schema ``SCALING``; efficiency is ``tok_s(c) / (c / c0 · tok_s(c0))`` with c0 the
        layout's lowest measured concurrency (1 when measured: ``tok_s(c) / (c · tok_s(1))``).
    """
    usable = _usable(runs)
    measured = usable.group_by("label", "concurrency").agg(
        pl.len().cast(pl.Int64).alias("n_runs"),
        pl.col("output_tok_s").median(),
        *(pl.col(c).median() for c in _LATENCIES),
    )
    wanted = sorted({int(c) for c in at}) if at is not None else None
    if interpolate:
        targets = wanted or sorted(set(measured["concurrency"].to_list()))
        measured = pl.concat([measured, _interpolated(measured, targets)], how="vertical")
    if wanted is not None:
        measured = measured.filter(pl.col("concurrency").is_in(wanted))
    base = (
        usable.group_by("label", "concurrency")
        .agg(pl.col("output_tok_s").median().alias("_base_tok_s"))
        .sort("concurrency")
        .group_by("label")
        .agg(
            pl.col("concurrency").first().alias("baseline_concurrency"),
            pl.col("_base_tok_s").first(),
        )
    )
    out = (
        measured.join(base, on="label", how="left")
        .with_columns(
            per_stream_tok_s=pl.col("output_tok_s") / pl.col("concurrency"),
            ideal_tok_s=pl.col("concurrency")
            / pl.col("baseline_concurrency")
            * pl.col("_base_tok_s"),
            interpolated=pl.col("n_runs") == 0,
        )
        .with_columns(efficiency=_safe_div(pl.col("output_tok_s"), pl.col("ideal_tok_s")))
        .join(_label_order(usable), on="label", how="left")
        .sort("_order", "concurrency")
    )
    return out.select(SCALING.names()).cast(dict(SCALING))


def _safe_div(a: pl.Expr, b: pl.Expr) -> pl.Expr:
    return pl.when(b > 0).then(a / b).otherwise(None)


def _interpolated(measured: pl.DataFrame, targets: list[int]) -> pl.DataFrame:
    """Rows for the targets a layout lacks inside its measured range (log-log interpolation)."""
    columns = ["output_tok_s", *_LATENCIES]
    rows = []
    for (label,), points in measured.sort("concurrency").group_by("label", maintain_order=True):
        cs = points["concurrency"].to_list()
        for c in targets:
            if c in cs or not cs[0] < c < cs[-1]:
                continue
            hi = next(i for i, x in enumerate(cs) if x > c)
            lo = hi - 1
            w = (math.log2(c) - math.log2(cs[lo])) / (math.log2(cs[hi]) - math.log2(cs[lo]))
            row = {"label": label, "concurrency": c, "n_runs": 0}
            for name in columns:
                row[name] = _between(points[name][lo], points[name][hi], w)
            rows.append(row)
    return pl.DataFrame(rows, schema=measured.schema, orient="row")


def _between(a: float | None, b: float | None, w: float) -> float | None:
    """Log-log interpolation (power law between the points); linear if a value is not > 0."""
    if a is None or b is None:
        return None
    if a > 0 and b > 0:
        return math.exp(math.log(a) + w * (math.log(b) - math.log(a)))
    return a + w * (b - a)


def scaling_gap(runs: pl.DataFrame, a: str, b: str, *, interpolate: bool = False) -> pl.DataFrame:
    """Layout ``a`` against ``b`` at each concurrency both have: ratio, difference, leader.

    Parameters
    ----------
    runs
        The ``runs`` table of ``load_bench``.
    a, b
        Layout labels; ``ratio`` is ``a_tok_s / b_tok_s``.
    interpolate
        Also compare at concurrencies only one layout measured, interpolating the other
        within its range (rows marked ``interpolated``).

    Returns
    -------
    pl.DataFrame
        Schema ``GAP``, sorted by concurrency.

    Raises
    ------
    ToolkitError
        When ``a`` or ``b`` is not a label of ``runs``.
    """
    labels = _usable(runs)["label"].unique(maintain_order=True).to_list()
    for name in (a, b):
        if name not in labels:
            raise ToolkitError(f"no layout {name!r} with throughput data (have: {labels})")
    table = scaling_table(runs.filter(pl.col("label").is_in([a, b])), interpolate=interpolate)

    def side(name: str, prefix: str) -> pl.DataFrame:
        return table.filter(pl.col("label") == name).select(
            "concurrency",
            pl.col("output_tok_s").alias(f"{prefix}_tok_s"),
            pl.col("interpolated").alias(f"_{prefix}_interp"),
        )

    both = side(a, "a").join(side(b, "b"), on="concurrency", how="inner").sort("concurrency")
    positive = (pl.col("a_tok_s") > 0) & (pl.col("b_tok_s") > 0)
    ratio = pl.when(positive).then(pl.col("a_tok_s") / pl.col("b_tok_s"))
    out = both.with_columns(
        a=pl.lit(a),
        b=pl.lit(b),
        ratio=ratio,
        difference_tok_s=pl.col("a_tok_s") - pl.col("b_tok_s"),
        leader=pl.when(pl.col("a_tok_s") > pl.col("b_tok_s"))
        .then(pl.lit(a))
        .when(pl.col("a_tok_s") < pl.col("b_tok_s"))
        .then(pl.lit(b)),
        advantage=pl.when(positive).then(
            pl.max_horizontal("a_tok_s", "b_tok_s") / pl.min_horizontal("a_tok_s", "b_tok_s")
        ),
        interpolated=pl.col("_a_interp") | pl.col("_b_interp"),
    )
    return out.select(GAP.names()).cast(dict(GAP))


def crossover(gap: pl.DataFrame) -> float | None:
    """The first concurrency where the leader changes, or None if it never does.

    Between two measured points with opposite leaders, the crossing of ``log(ratio)`` = 0 is
    placed by linear interpolation in log2(c); a measured tie between them is returned as is.
    """
    points = [
        (float(c), math.log(r))
        for c, r in gap.sort("concurrency").select("concurrency", "ratio").iter_rows()
        if c is not None and r is not None and r > 0 and math.isfinite(r)
    ]
    last: tuple[float, float] | None = None  # the latest point with a leader
    tie: float | None = None
    for c, y in points:
        if y == 0:
            tie = tie if tie is not None else c
            continue
        if last is not None and (last[1] > 0) != (y > 0):
            if tie is not None:
                return tie
            x0, x1 = math.log2(last[0]), math.log2(c)
            return 2 ** (x0 + (x1 - x0) * (-last[1]) / (y - last[1]))
        last, tie = (c, y), None
    return None


def knee(table: pl.DataFrame, threshold: float = 0.5) -> dict[str, int | None]:
    """Per layout, the lowest concurrency whose scaling efficiency is below ``threshold``.

    ``table`` is a ``scaling_table``; a layout that stays at or above the threshold maps to None.
    """
    out: dict[str, int | None] = {}
    for label in table["label"].unique(maintain_order=True).to_list():
        rows = table.filter(pl.col("label") == label)
        below = rows.filter(pl.col("efficiency") < threshold).sort("concurrency")
        out[label] = int(below["concurrency"][0]) if below.height else None
    return out


def frontier(runs: pl.DataFrame) -> pl.DataFrame:
    """Latency-throughput frontier: per layout and concurrency, tok/s against per-token latency.

    The latency is the runs' median TPOT, else mean TPOT, else median ITL (the first a layout
    has); ``pareto`` marks the points no other point beats on both axes.
    """
    usable = _usable(runs)
    parts = []
    for (label,), group in usable.group_by("label", maintain_order=True):
        metric = next((m for m in _FRONTIER_LATENCY if group[m].is_not_null().any()), None)
        if metric is None:
            continue
        parts.append(
            group.filter(pl.col(metric).is_not_null())
            .group_by("concurrency")
            .agg(
                pl.len().cast(pl.Int64).alias("n_runs"),
                pl.col("output_tok_s").median(),
                pl.col(metric).median().alias("latency_ms"),
            )
            .with_columns(label=pl.lit(label), latency_metric=pl.lit(metric))
        )
    if not parts:
        return pl.DataFrame(schema=FRONTIER)
    points = pl.concat(parts, how="diagonal").join(_label_order(usable), on="label")
    points = points.sort("_order", "concurrency")
    pairs = list(zip(points["latency_ms"].to_list(), points["output_tok_s"].to_list(), strict=True))
    pareto = [not any(_beats(q, p) for q in pairs) for p in pairs]
    out = points.with_columns(pareto=pl.Series(pareto, dtype=pl.Boolean))
    return out.select(FRONTIER.names()).cast(dict(FRONTIER))


def _beats(q: tuple[float, float], p: tuple[float, float]) -> bool:
    """Point q (latency, tok/s) is at least as good as p on both axes and better on one."""
    return q[0] <= p[0] and q[1] >= p[1] and (q[0] < p[0] or q[1] > p[1])


_UNLIKE = {"model": "models", "hardware": "machines", "sglang": "SGLang versions"}


def caveat(facts: Mapping[str, Mapping[str, str | None]]) -> str:
    """The caveat a headline comparing these layouts carries: what differs besides the layout
    (the facts of ``unlike``), as the end of a sentence; empty when like for like.

    >>> caveat({"PP4": {"model": "a", "hardware": "x"}, "PP8": {"model": "b", "hardware": "y"}})
    'across different models and machines (the gap compares them too, not only the layouts)'
    """
    kinds = [
        name
        for key, name in _UNLIKE.items()
        if len({f.get(key) for f in facts.values() if f.get(key)}) > 1
    ]
    if not kinds:
        return ""
    said = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
    return f"across different {said} (the gap compares them too, not only the layouts)"


def unlike(facts: Mapping[str, Mapping[str, str | None]]) -> list[str]:
    """Sentences saying what differs between layouts besides the layout: ``facts`` maps each
    label to what is known of its run (``model``, ``hardware``, ``sglang``); an unknown value
    (None) is no difference. Empty when the runs are like for like.

    >>> unlike({"TP8": {"model": "a/x"}, "PP8": {"model": "b/y"}})
    ['The layouts served different models (TP8: a/x; PP8: b/y): the gap compares models too.']
    """
    out = []
    for key, name in _UNLIKE.items():
        known = {label: f.get(key) for label, f in facts.items() if f.get(key)}
        if len(set(known.values())) > 1:
            each = "; ".join(f"{label}: {value}" for label, value in known.items())
            out.append(
                f"The layouts served different {name} ({each}): the gap compares {name} too."
            )
    return out
