"""The sentence every format leads with: who delivers more output tok/s, by how much, where.

The report's summary, the throughput chart's title, ``ppscope diagnose`` and ``ppscope
scaling`` all state the gap between two layouts through ``gap_verdict`` (the first three on
the runs' ``headline``), so they cannot disagree; a comparison across
models, machines or SGLang versions carries that caveat inside the sentence itself
(``analyze.scaling.caveat``), where the eye lands, not in a note further down. Phase tables
lead with the concurrency of each phase (``by_concurrency``) in every format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from toolkit.analyze.scaling import caveat, scaling_gap, scaling_table

__all__ = ["Headline", "by_concurrency", "gap_verdict", "headline", "labelled_bench", "span"]


def span(values: Sequence[int], measured: Sequence[int]) -> str:
    """Concurrencies as text, a run of three or more neighbours in ``measured`` as a range:
    ``2–64`` when 2, 4, ..., 64 were all measured, else ``2, 8``.

    >>> span([2, 4, 8, 64], [1, 2, 4, 8, 16, 64])
    '2–8, 64'
    """
    index = {c: i for i, c in enumerate(measured)}
    runs: list[list[int]] = []
    for value in values:
        if runs and index[value] == index[runs[-1][-1]] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def labelled_bench(runs: Iterable[tuple[str, pl.DataFrame | None]]) -> pl.DataFrame | None:
    """The benchmark runs of several runs in one frame, each with its run's ``label``: the
    ``bench`` ``headline`` takes (None when no run has results)."""
    frames = [bench.with_columns(label=pl.lit(label)) for label, bench in runs if bench is not None]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


@dataclass(frozen=True)
class Headline:
    """The verdict of a set of runs, the scaling table and the measured gap it rests on, and
    the two layouts compared (``a``, ``b``; empty when there is no second)."""

    verdict: str
    table: pl.DataFrame | None
    gap: pl.DataFrame | None
    a: str = ""
    b: str = ""


def headline(
    bench: pl.DataFrame | None,
    facts: Mapping[str, Mapping[str, str | None]],
    a: str = "",
    b: str = "",
) -> Headline:
    """What every format leads with for these runs: ``bench`` is their benchmark runs with a
    ``label`` per run, ``facts`` what each run is besides its layout (``like_facts``); ``a`` and
    ``b`` default to the first two layouts with results."""
    table = scaling_table(bench) if bench is not None else None
    if table is None or not table.height:
        return Headline("No benchmark results in these runs: the findings rest on logs and traces.",
                        None, None)  # fmt: skip
    labels = table["label"].unique(maintain_order=True).to_list()
    a = a or labels[0]
    b = b or next((x for x in labels if x != a), "")
    if not b or b == a:
        return Headline(
            "Only one layout has benchmark results: there is no gap to state.", table, None, a, b
        )
    gap = scaling_gap(bench, a, b).filter(~pl.col("interpolated"))
    if not gap.height:
        said = f"{a} and {b} measured no concurrency in common: there is no gap to state."
        return Headline(said, table, None, a, b)
    said = caveat({k: v for k, v in facts.items() if k in (a, b)})
    return Headline(gap_verdict(gap, said), table, gap, a, b)


def gap_verdict(gap: pl.DataFrame, caveat: str = "") -> str:
    """One sentence from a ``scaling_gap`` (measured rows): who leads at most concurrencies, by
    how much and where, and where the other leads; ``caveat`` (``analyze.scaling.caveat``)
    closes the sentence when the layouts differ in more than their layout.

    >>> gap = pl.DataFrame({"a": ["PP4"], "b": ["PP8"], "concurrency": [32],
    ...                     "leader": ["PP4"], "advantage": [1.68]})
    >>> gap_verdict(gap, "across different models (the gap compares them too)")
    'PP4 delivers 1.68× the output tok/s of PP8 at 32 concurrent requests, across different models (the gap compares them too).'
    """  # noqa: E501
    tail = f", {caveat}." if caveat else "."
    led = gap.filter(pl.col("leader").is_not_null() & pl.col("advantage").is_not_null())
    if not led.height:
        a, b = gap["a"][0], gap["b"][0]
        return f"{a} and {b} deliver the same output tok/s at every measured concurrency{tail}"
    # the leader at most concurrencies; on a tie, the one that leads at the highest load
    counts = led.group_by("leader").agg(pl.len(), pl.col("concurrency").max())
    lead = counts.sort("len", "concurrency", descending=True)["leader"][0]
    other = gap["b"][0] if lead == gap["a"][0] else gap["a"][0]
    mine = led.filter(pl.col("leader") == lead).sort("concurrency")
    lo, hi = mine["advantage"].min(), mine["advantage"].max()
    last = mine.row(-1, named=True)
    if mine.height == 1:
        plural = "s" if last["concurrency"] != 1 else ""
        text = (
            f"{lead} delivers {last['advantage']:.2f}× the output tok/s of {other} "
            f"at {last['concurrency']} concurrent request{plural}"
        )
    else:
        factor = f"{lo:.2f}×" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}×"
        where = (
            "every measured concurrency"
            if mine.height == gap.height
            else f"{span(mine['concurrency'].to_list(), gap['concurrency'].to_list())} "
            "concurrent requests"
        )
        text = (
            f"{lead} delivers {factor} the output tok/s of {other} at {where} "
            f"({last['advantage']:.2f}× at {last['concurrency']})"
        )
    rival = led.filter(pl.col("leader") != lead).sort("concurrency")
    if rival.height:
        parts = ", ".join(
            f"{r['concurrency']} ({r['advantage']:.2f}×)" for r in rival.iter_rows(named=True)
        )
        text += f"; {other} leads only at {parts}"
    return text + tail


def by_concurrency(frame: pl.DataFrame) -> pl.DataFrame:
    """A table of phases led by the concurrency each was offered: ``offered`` becomes
    ``concurrency``, first, then ``phase``; every format shows phase tables this way."""
    if "phase" not in frame.columns or "offered" not in frame.columns:
        return frame
    rest = [c for c in frame.columns if c not in ("phase", "offered")]
    return frame.rename({"offered": "concurrency"}).select("concurrency", "phase", *rest)
