"""Throughput rules: ``scaling-collapse`` and ``prefill-interference``.

``scaling-collapse`` is the symptom, measured on the benchmark: a layout that keeps up with
(or leads) another at low load and falls far behind at high load, or whose throughput falls as
load grows. It explains nothing by itself, so it is at most ``medium``; the causes are the
run's other findings.

``prefill-interference``: without mixed chunked prefill a slot that prefills on its turn skips
its decode step, so decode windows that contain prefill lines generate
less. Its cost is the share of windows with prefill times the throughput dip in them.
"""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl

from toolkit.analyze.stages import reference_lines
from toolkit.diagnose.finding import Finding, severity_of
from toolkit.run_analysis import RunAnalysis

__all__ = ["prefill_interference", "scaling_collapse"]

STANDING_LOSS = 0.6  # relative standing at high load over low load that counts as collapse
BEHIND = 0.8  # ... while delivering less than this share of the other layout
DECLINE = 0.9  # more load giving less than this share of the throughput
_ROUNDED = pl.col("gen_with", "gen_without", "dip", "share", "cost")


def _curve(ctx: RunAnalysis) -> dict[int, float]:
    """Concurrency → median output tok/s of the run's benchmark."""
    if ctx.bench is None:
        return {}
    runs = ctx.bench.filter(pl.col("concurrency").is_not_null() & (pl.col("output_tok_s") > 0))
    agg = runs.group_by("concurrency").agg(pl.col("output_tok_s").median())
    return {int(c): float(t) for c, t in agg.iter_rows()}


def scaling_collapse(ctx: RunAnalysis) -> Finding | None:
    """Falls behind another layout as load grows, or delivers less with more load."""
    mine = _curve(ctx)
    if len(mine) < 2:
        return None
    best: dict[str, Any] | None = None
    for peer in ctx.peers:
        theirs = _curve(peer)
        common = sorted(set(mine) & set(theirs))
        if len(common) < 2:
            continue
        lo = common[0]
        r_lo = mine[lo] / theirs[lo]
        for c in common[1:]:
            r = mine[c] / theirs[c]
            # The highest load that collapsed is the headline: scaling is about the top.
            if r < BEHIND and r / r_lo < STANDING_LOSS and (best is None or c >= best["c"]):
                best = {"peer": peer, "lo": lo, "c": c, "r_lo": r_lo, "ratio": r, "common": common}
    if best is not None:
        peer, theirs = best["peer"], _curve(best["peer"])
        evidence = pl.DataFrame(
            {
                "concurrency": best["common"],
                "tok_s": [round(mine[c], 1) for c in best["common"]],
                "peer": [peer.label] * len(best["common"]),
                "peer_tok_s": [round(theirs[c], 1) for c in best["common"]],
                "ratio": [round(mine[c] / theirs[c], 3) for c in best["common"]],
            }
        ).head(20)
        lead = "leads" if best["r_lo"] >= 1.05 else ("keeps up with" if best["r_lo"] >= 0.95
                                                     else "trails")  # fmt: skip
        impact = 1 - best["ratio"]
        return Finding(
            id="scaling-collapse",
            severity="medium",
            title=(
                f"{ctx.label} delivers {best['ratio']:.0%} of {peer.label}'s tok/s at "
                f"{best['c']} requests"
            ),
            summary=(
                f"{ctx.label} {lead} {peer.label} at {best['lo']} request(s) "
                f"({mine[best['lo']]:.1f} vs {theirs[best['lo']]:.1f} tok/s) but delivers "
                f"{mine[best['c']]:.1f} vs {theirs[best['c']]:.1f} tok/s at {best['c']}: its "
                "throughput does not grow with load the way the other layout's does. The causes "
                "are among this run's other findings."
            ),
            evidence=evidence,
            remedy="Fix the causes this run's other findings name, then re-run the sweep.",
            impact=impact,
        )
    cs = sorted(mine)
    drops = [(a, b) for a, b in itertools.pairwise(cs) if mine[b] < DECLINE * mine[a]]
    if not drops:
        return None
    a, b = max(drops, key=lambda ab: mine[ab[0]] - mine[ab[1]])
    evidence = pl.DataFrame({"concurrency": cs, "tok_s": [round(mine[c], 1) for c in cs]}).head(20)
    return Finding(
        id="scaling-collapse",
        severity="medium",
        title=f"Throughput falls from {mine[a]:.0f} to {mine[b]:.0f} tok/s as load grows to {b}",
        summary=(
            f"At {b} requests {ctx.label} delivers {mine[b]:.1f} tok/s, less than the "
            f"{mine[a]:.1f} tok/s at {a}: more load makes it slower, a sign of thrashing "
            "(retractions, eager decode, or more slots re-reading the same weights)."
        ),
        evidence=evidence,
        remedy="See this run's other findings; cap concurrency below the drop meanwhile.",
        impact=1 - mine[b] / mine[a],
    )


def prefill_interference(ctx: RunAnalysis) -> Finding | None:
    """Decode windows holding prefill passes generate noticeably less."""
    decode = ctx.occupancy.select("ts", "phase", "gen_tok_s")
    prefill = reference_lines(ctx.batches, "prefill").select("ts").sort("ts")
    if decode.height < 8 or not prefill.height:
        return None
    decode = decode.sort("ts").with_columns(
        prev=pl.col("ts").shift(1).over("phase"),
        nth=pl.int_range(pl.len()).over("phase"),
    )
    # The latest prefill pass at or before each decode line: inside the window if after `prev`.
    last = prefill.select(pl.col("ts").alias("_at"), pl.col("ts").alias("_prefill_ts"))
    decode = decode.join_asof(last, left_on="ts", right_on="_at", strategy="backward")
    has = pl.col("prev").is_not_null() & (pl.col("_prefill_ts") > pl.col("prev")).fill_null(False)
    # The first lines of a phase hold its opening burst: that prefill is the load, not an
    # interruption of decoding.
    windows = decode.with_columns(with_prefill=has).filter(pl.col("nth") >= 2)
    per_phase = (
        windows.group_by("phase")
        .agg(
            windows=pl.len(),
            with_prefill=pl.col("with_prefill").sum(),
            gen_with=pl.col("gen_tok_s").filter(pl.col("with_prefill")).median(),
            gen_without=pl.col("gen_tok_s").filter(~pl.col("with_prefill")).median(),
        )
        .filter((pl.col("with_prefill") >= 3) & (pl.col("windows") - pl.col("with_prefill") >= 3))
        .with_columns(
            dip=(1 - pl.col("gen_with") / pl.col("gen_without")).clip(lower_bound=0.0),
            share=pl.col("with_prefill") / pl.col("windows"),
        )
        .with_columns(cost=pl.col("dip") * pl.col("share"))
        .sort("phase")
    )
    if not per_phase.height:
        return None
    worst = per_phase.sort("cost", descending=True).row(0, named=True)
    impact = float(worst["cost"])
    if impact < 0.05:
        return None
    return Finding(
        id="prefill-interference",
        severity=severity_of(impact),
        title=f"Prefill passes cut decode throughput by {worst['dip']:.0%} in "
        f"{worst['share']:.0%} of windows",
        summary=(
            f"In phase {worst['phase']}, {worst['with_prefill']} of {worst['windows']} decode "
            f"windows held prefill passes and generated {worst['gen_with']:.0f} tok/s against "
            f"{worst['gen_without']:.0f} without: a slot that prefills skips its decode turn. "
            f"That costs ≈{impact:.0%} of decode throughput."
        ),
        evidence=per_phase.with_columns(_ROUNDED.round(3)).head(20),
        remedy=(
            "A smaller --chunked-prefill-size shortens each stall; --enable-mixed-chunk lets "
            "decode ride along (not with PP before 0.5.10); prefill-decode disaggregation "
            "removes the interference."
        ),
        impact=impact,
    )
