"""Throughput rules: ``scaling-collapse`` and ``prefill-interference``.

``scaling-collapse`` is the symptom, measured on the benchmark: a layout that keeps up with
(or leads) another at low load and falls far behind at high load, or whose throughput falls as
load grows. It explains nothing by itself, so it is at most ``medium``; it names the causes
found on the same run, or says that none was. Runs of different models are compared only when
asked (``compare_models``); different machines are compared, and said.

``prefill-interference``: without mixed chunked prefill a slot that prefills on its turn skips
its decode step, so decode windows that contain prefill lines generate less. Its cost is the
decode throughput those windows lost, weighted by the time they lasted.
"""

from __future__ import annotations

import itertools
from typing import Any

import polars as pl

from toolkit.analyze.effects import prefill_effect
from toolkit.analyze.stages import reference_lines
from toolkit.diagnose.finding import Finding, severity_of
from toolkit.diagnose.thresholds import BEHIND, DECLINE, MIN_PREFILL_LOSS, STANDING_LOSS
from toolkit.run_analysis import RunAnalysis

__all__ = ["prefill_interference", "scaling_collapse"]


def scaling_collapse(ctx: RunAnalysis) -> Finding | None:
    """Falls behind another layout as load grows, or delivers less with more load."""
    mine = ctx.throughput_curve
    if len(mine) < 2:
        return None
    best: dict[str, Any] | None = None
    for peer in ctx.peers:
        if not ctx.compare_models and not _same_model(ctx, peer):
            continue
        theirs = peer.throughput_curve
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
        peer, theirs = best["peer"], best["peer"].throughput_curve
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
                "throughput does not grow with load the way the other layout's does."
                + _differences(ctx, peer)
                + _causes(ctx)
            ),
            evidence=evidence,
            remedy="Fix the causes named above, then re-run the sweep."
            if _named(ctx)
            else "Profile both layouts at the high load; no finding explains the gap yet.",
            impact=impact,
            basis="measured",
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
            "(retractions, eager decode, or more slots re-reading the same weights)." + _causes(ctx)
        ),
        evidence=evidence,
        remedy="Fix the causes named above; cap concurrency below the drop meanwhile.",
        impact=1 - mine[b] / mine[a],
        basis="measured",
    )


def _same_model(ctx: RunAnalysis, peer: RunAnalysis) -> bool:
    a, b = ctx.model, peer.model
    if a.spec is not None and b.spec is not None:
        return a.spec.name == b.spec.name
    return a.id == b.id


def _differences(ctx: RunAnalysis, peer: RunAnalysis) -> str:
    """What differs between the two runs besides the layout, said before comparing them."""
    notes = []
    if not _same_model(ctx, peer):
        notes.append(f"different models ({ctx.model.id or '?'} vs {peer.model.id or '?'})")
    if ctx.machine.key != peer.machine.key:
        notes.append(f"different machines ({ctx.machine.describe()} vs {peer.machine.describe()})")
    return f" Note: {' and '.join(notes)}." if notes else ""


def _named(ctx: RunAnalysis) -> list[Finding]:
    return [f for f in ctx.found if f.severity in ("high", "medium") and f.id != "scaling-collapse"]


def _causes(ctx: RunAnalysis) -> str:
    """The causes found on this run, or that none was."""
    named = _named(ctx)
    if not named:
        return " No finding on this run explains it: the gap is unexplained so far."
    return (
        " Causes found on this run: "
        + "; ".join(
            f"{f.id} ({f.severity}" + (f", ≈{f.impact:.0%}" if f.impact else "") + ")"
            for f in named
        )
        + "."
    )


def prefill_interference(ctx: RunAnalysis) -> Finding | None:
    """Decode windows holding prefill passes generate less, weighted by the time they last
    (a long prompt can stall decoding for seconds while its window generates next to
    nothing)."""
    prefill = reference_lines(ctx.batches, "prefill").select("ts").sort("ts")
    effect = prefill_effect(ctx.decode, prefill)
    if effect is None or effect.loss < MIN_PREFILL_LOSS:
        return None
    impact = effect.loss
    return Finding(
        id="prefill-interference",
        severity=severity_of(impact),
        title=(
            f"Decode windows with a prefill pass ({effect.with_share:.0%} of decode time) "
            f"generate {effect.rate_with:.0f} against {effect.rate_without:.0f} tok/s"
        ),
        summary=(
            f"{effect.with_share:.0%} of the decoding time was spent in windows that also held "
            f"a prefill pass; they generated a median {effect.rate_with:.0f} tok/s against "
            f"{effect.rate_without:.0f} tok/s without one, because a slot that prefills skips "
            f"its decode turn. Weighted by time, that costs ≈{impact:.0%} of the decode tokens."
        ),
        evidence=effect.evidence.head(20),
        remedy=(
            "A smaller --chunked-prefill-size shortens each stall; --enable-mixed-chunk lets "
            "decode ride along (not with PP before 0.5.10); prefill-decode disaggregation "
            "removes the interference."
        ),
        impact=impact,
        basis="measured",
    )
