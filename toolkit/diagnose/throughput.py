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

from toolkit.analyze.effects import prefill_effect, prefill_loss
from toolkit.analyze.stages import reference_lines
from toolkit.diagnose.finding import Finding
from toolkit.diagnose.noise import throughput_noise
from toolkit.diagnose.sizing import Sizing, ratio, spread
from toolkit.diagnose.thresholds import BEHIND, DECLINE, MIN_PREFILL_LOSS, STANDING_LOSS
from toolkit.run_analysis import RunAnalysis

__all__ = ["prefill_interference", "scaling_collapse"]


def scaling_collapse(ctx: RunAnalysis) -> Finding | None:
    """Falls behind another layout as load grows, or delivers less with more load.

    A symptom: its impact is what serving that load the other way recovers (the other
    layout's measured tok/s, or the lower load's), with both measurements' noise. The causes
    found on the run carry the cost and the remedy, so with any named it is ``info``
    pointing at them; with none it is at most ``medium``: the gap is real but unexplained.
    """
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
        c = best["c"]
        evidence = pl.DataFrame(
            {
                "concurrency": best["common"],
                "tok_s": [round(mine[x], 1) for x in best["common"]],
                "peer": [peer.label] * len(best["common"]),
                "peer_tok_s": [round(theirs[x], 1) for x in best["common"]],
                "ratio": [round(mine[x] / theirs[x], 3) for x in best["common"]],
            }
        ).head(20)
        lead = "leads" if best["r_lo"] >= 1.05 else ("keeps up with" if best["r_lo"] >= 0.95
                                                     else "trails")  # fmt: skip
        sized = _gap(ctx, mine[c], theirs[c], c, f"{peer.label} measured at {c}")
        return Finding(
            id="scaling-collapse",
            title=(
                f"{ctx.label} delivers {best['ratio']:.0%} of {peer.label}'s tok/s at {c} requests"
            ),
            summary=(
                f"{ctx.label} {lead} {peer.label} at {best['lo']} request(s) "
                f"({mine[best['lo']]:.1f} vs {theirs[best['lo']]:.1f} tok/s) but delivers "
                f"{mine[c]:.1f} vs {theirs[c]:.1f} tok/s at {c}: its throughput does not grow "
                f"with load the way the other layout's does; serving this load as "
                f"{peer.label} does would recover {sized.words()}."
                + _differences(ctx, peer)
                + _causes(ctx)
            ),
            evidence=evidence,
            remedy="Fix the causes named above, then re-run the sweep."
            if _named(ctx)
            else f"Profile both layouts at {c} requests; no finding explains the gap yet.",
            **_symptom(ctx, sized),
        )
    cs = sorted(mine)
    drops = [(a, b) for a, b in itertools.pairwise(cs) if mine[b] < DECLINE * mine[a]]
    if not drops:
        return None
    a, b = max(drops, key=lambda ab: mine[ab[0]] - mine[ab[1]])
    evidence = pl.DataFrame({"concurrency": cs, "tok_s": [round(mine[c], 1) for c in cs]}).head(20)
    sized = _gap(ctx, mine[b], mine[a], b, f"this run at {a}")
    return Finding(
        id="scaling-collapse",
        title=f"Throughput falls from {mine[a]:.0f} to {mine[b]:.0f} tok/s as load grows to {b}",
        summary=(
            f"At {b} requests {ctx.label} delivers {mine[b]:.1f} tok/s, less than the "
            f"{mine[a]:.1f} tok/s at {a}: more load makes it slower, a sign of thrashing "
            "(retractions, eager decode, or more slots re-reading the same weights); capping "
            f"concurrency at {a} would recover {sized.words()}." + _causes(ctx)
        ),
        evidence=evidence,
        remedy="Fix the causes named above; cap concurrency below the drop meanwhile.",
        **_symptom(ctx, sized),
    )


def _gap(ctx: RunAnalysis, now: float, other: float, c: int, what: str) -> Sizing:
    """What serving load ``c`` at the ``other`` throughput recovers, with both measurements'
    noise."""
    noise, words = throughput_noise(ctx, _phase_at(ctx, c))
    sized = ratio(
        now, other, basis="measured", where=f"at {c} requests", now_noise=noise,
        after_noise=noise, rests_on=(words, what), carried=False,
    )  # fmt: skip
    assert sized is not None  # both throughputs are measured and positive
    return sized


def _phase_at(ctx: RunAnalysis, c: int) -> int | None:
    rows = ctx.phases.filter(pl.col("offered") == c)
    return int(rows["phase"][0]) if rows.height else None


def _symptom(ctx: RunAnalysis, sized: Sizing) -> dict[str, Any]:
    """A symptom's fields: ``info`` when a cause is named on the run (the causes carry the
    cost), else the sizing's severity, at most ``medium``."""
    fields = sized.fields()
    if _named(ctx):
        fields["severity"] = "info"
    elif fields["severity"] == "high":
        fields["severity"] = "medium"
    return fields


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
    return [
        f
        for f in ctx.found
        if f.severity in ("high", "medium", "low") and f.id not in ("scaling-collapse",)
    ]


def _causes(ctx: RunAnalysis) -> str:
    """The causes found on this run, or that none was."""
    named = _named(ctx)
    if not named:
        return " No finding on this run explains it: the gap is unexplained so far."
    return (
        " Causes found on this run: "
        + "; ".join(
            f"{f.id} ({f.severity}" + (f", {f.recovers}" if f.recovers else "") + ")" for f in named
        )
        + "."
    )


def prefill_interference(ctx: RunAnalysis) -> Finding | None:
    """Decode windows holding prefill passes generate less, weighted by the time they last
    (a long prompt can stall decoding for seconds while its window generates next to
    nothing). Judged per phase, each against its own windows without prefill: the headline is
    the phase that loses most, never rates pooled across loads."""
    prefill = reference_lines(ctx.batches, "prefill").select("ts").sort("ts")
    effect = prefill_effect(ctx.decode, prefill)
    if effect is None:
        return None
    phases = effect.evidence.filter(pl.col("loss").is_not_null()).sort("loss", descending=True)
    if not phases.height or float(phases["loss"][0]) < MIN_PREFILL_LOSS:
        return None
    worst = phases.row(0, named=True)
    phase = int(worst["phase"])
    load = ctx.load_of(phase)
    noise, noise_words = throughput_noise(ctx, phase)
    base = prefill_loss(worst)
    shift = [prefill_loss(worst, 1 + sign * noise) - base for sign in (-1, 1)]
    with_share = worst["time_with_s"] / worst["time_s"] if worst["time_s"] else 0.0
    sized = spread(
        float(worst["loss"]),
        [float(worst["loss"]) + d for d in shift] + [with_share],
        basis="measured",
        where=load,
        rests_on=(
            f"rate without prefill {noise_words}",
            f"at most all of the {with_share:.0%} of decode time its windows with prefill last "
            "(a window's line averages over the stall)",
        ),
    )
    skip = (
        "a slot that prefills on its turn skips its decode step"
        if ctx.pp > 1
        else "the running batch does not decode while a prefill pass runs"
    )
    others = phases.filter(pl.col("loss") >= MIN_PREFILL_LOSS).height - 1
    also = f" {others} other phase(s) lose ≥ {MIN_PREFILL_LOSS:.0%} too." if others > 0 else ""
    return Finding(
        id="prefill-interference",
        title=(
            f"Decode windows with a prefill pass ({with_share:.0%} of decode time {load}) "
            f"generate {worst['rate_with']:.0f} against {worst['rate_without']:.0f} tok/s"
        ),
        summary=(
            f"{load.capitalize()}, {with_share:.0%} of the decoding time was spent in windows "
            f"that also held a prefill pass; they generated a median {worst['rate_with']:.0f} "
            f"tok/s against {worst['rate_without']:.0f} tok/s in the same phase without one, "
            f"because {skip}. Weighted by time, that costs {sized.words()} of the decode "
            f"tokens there.{also}"
        ),
        evidence=effect.evidence.drop("tokens_with").head(20),
        remedy=(
            "A smaller --chunked-prefill-size shortens each stall; --enable-mixed-chunk lets "
            "decode ride along (not with PP before 0.5.10); prefill-decode disaggregation "
            "removes the interference."
        ),
        phase=phase,
        **sized.fields(),
    )
