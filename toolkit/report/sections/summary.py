"""The first screen of a postmortem: the verdict, the gap, what to change first, what was missing.

Everything here is said again, with its evidence, by the sections below it; the summary only
picks and orders: the gap between two layouts at every concurrency both measured, one line per
high or medium finding with what its remedy recovers (and the before/after a remedied run
measured), the remedy of the top finding,
and the checks the inputs could not support. Low-impact findings and informational notes are
folded away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from toolkit.analyze.scaling import scaling_gap, scaling_table
from toolkit.diagnose import Finding
from toolkit.diagnose.finding import impact_text, promise_lines
from toolkit.report.redact import escape
from toolkit.report.runs import RunSet
from toolkit.report.view import STYLE, View, clean

__all__ = ["summary"]

_SHOWN = ("high", "medium")


def _span(values: Sequence[int], measured: Sequence[int]) -> str:
    """Concurrencies as text, a run of three or more neighbours in ``measured`` as a range:
    ``2–64`` when 2, 4, ..., 64 were all measured, else ``2, 8``."""
    index = {c: i for i, c in enumerate(measured)}
    runs: list[list[int]] = []
    for value in values:
        if runs and index[value] == index[runs[-1][-1]] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def _verdict(gap: pl.DataFrame) -> str:
    """One sentence: who leads, by how much, at which concurrencies; where the other leads."""
    led = gap.filter(pl.col("leader").is_not_null() & pl.col("advantage").is_not_null())
    if not led.height:
        a, b = gap["a"][0], gap["b"][0]
        return f"{a} and {b} deliver the same output tok/s at every measured concurrency."
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
            else f"{_span(mine['concurrency'].to_list(), gap['concurrency'].to_list())} "
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
    return text + "."


def _gap_table(table: pl.DataFrame, gap: pl.DataFrame | None) -> pl.DataFrame:
    """Output tok/s per layout (rows) at each measured concurrency (columns), then the gap:
    the leader at each and its advantage."""
    measured = table.filter(~pl.col("interpolated"))
    concurrencies = sorted(set(measured["concurrency"].to_list()))
    rows = []
    for label in measured["label"].unique(maintain_order=True).to_list():
        mine = dict(
            measured.filter(pl.col("label") == label).select("concurrency", "output_tok_s").rows()
        )
        rows.append(
            {"concurrency": f"{label} tok/s"}
            | {str(c): f"{mine[c]:,.0f}" if mine.get(c) is not None else "—" for c in concurrencies}
        )
    if gap is not None and gap.height:
        lead = {
            r["concurrency"]: f"{r['leader']} {r['advantage']:.2f}×"
            if r["leader"] is not None and r["advantage"] is not None
            else "even"
            for r in gap.iter_rows(named=True)
        }
        rows.append(
            {"concurrency": f"{gap['a'][0]} vs {gap['b'][0]}"}
            | {str(c): lead.get(c, "—") for c in concurrencies}
        )
    return pl.DataFrame(rows, schema=["concurrency", *map(str, concurrencies)])


def _finding_line(finding: Finding) -> str:
    impact = impact_text(finding)
    checked = "".join(f"<br>checked: {escape(clean(line))}" for line in promise_lines(finding)[:3])
    return (
        f'<li><span class="ppscope-sev sev-{escape(finding.severity)}">'
        f"{escape(finding.severity.upper())}</span> {escape(clean(finding.title))}"
        f"{escape(' — recovers ' + impact if impact else '')} <code>{escape(finding.id)}</code>"
        f"{checked}</li>"
    )


def _per_run(runs: RunSet, found: Sequence[Finding]) -> str:
    lines = []
    for label in runs.labels:
        mine = [f for f in found if f.run == label and f.severity in _SHOWN]
        if mine:
            body = "".join(_finding_line(f) for f in mine)
            lines.append(f"<li><b>{escape(label)}</b><ul>{body}</ul></li>")
        else:
            lines.append(f"<li><b>{escape(label)}</b>: no high or medium finding.</li>")
    return f'<ul class="ppscope-verdicts">{"".join(lines)}</ul>'


def _missing(skipped: Sequence[dict[str, str]]) -> str:
    if not skipped:
        return "every check had the input it needs."
    by_run: dict[str, dict[str, list[str]]] = {}
    for s in skipped:
        by_run.setdefault(s["run"], {}).setdefault(s["missing"], []).append(s["check"])
    parts = []
    for run, missing in by_run.items():
        said = "; ".join(
            f"{what} (skipped {', '.join(checks)})" for what, checks in missing.items()
        )
        parts.append(f"{run}: {said}")
    return "; ".join(parts) + "."


def summary(runs: RunSet, a: str = "", b: str = "") -> View:
    """The verdict first: the gap between ``a`` and ``b`` (default: the first two layouts with
    benchmark results) at the measured concurrencies, the high and medium findings per run with
    what each remedy recovers, the change to try first and what data was missing."""
    found, skipped = runs.diagnosis()
    bench = runs.bench()
    table = scaling_table(bench) if bench is not None else None
    gap = None
    if table is not None and table.height:
        labels = table["label"].unique(maintain_order=True).to_list()
        a = runs.label(a) if a else labels[0]
        b = runs.label(b) if b else next((x for x in labels if x != a), "")
        if b and b != a:
            gap = scaling_gap(bench, a, b).filter(~pl.col("interpolated"))
    if gap is not None and gap.height:
        verdict = _verdict(gap)
    elif table is not None and table.height:
        verdict = "Only one layout has benchmark results: there is no gap to state."
    else:
        verdict = "No benchmark results in these runs: the findings rest on logs and traces."
    ranked = [f for f in found if f.severity in _SHOWN]
    first = ranked[0] if ranked else None
    minor = [f for f in found if f.severity not in _SHOWN]
    items: list[Any] = [STYLE, '<div class="ppscope-summary">']
    synthetic = [lab for r, lab in zip(runs, runs.labels, strict=True) if r.config.synthetic]
    if synthetic:
        items.append(
            '<div class="ppscope-banner"><b>Synthetic data: '
            f"{escape(', '.join(synthetic))} generated, not measured.</b></div>"
        )
    # bold as well as styled: a saved notebook opened untrusted, or on GitHub, drops <style>
    items.append(f'<p class="ppscope-verdict"><b>{escape(verdict)}</b></p>')
    gap_table = _gap_table(table, gap) if table is not None and table.height else None
    if gap_table is not None:
        items.append(gap_table)
    items.append(_per_run(runs, found))
    if first is not None:
        items.append(
            f"<p><b>Change first ({escape(first.run or '')}):</b> {escape(clean(first.remedy))}</p>"
        )
    items.append(f"<p><b>Missing data:</b> {escape(_missing(skipped))}</p>")
    if minor:
        lines = "".join(
            f"<li>{escape(f.severity)} · {escape(f.run or '')}: {escape(clean(f.title))}</li>"
            for f in minor
        )
        items.append(
            f"<details><summary>{len(minor)} low-impact finding(s) and note(s)</summary>"
            f"<ul>{lines}</ul></details>"
        )
    items.append("</div>")
    record = {
        "verdict": verdict,
        "gap": gap_table.to_dicts() if gap_table is not None else None,
        "findings": [
            {
                "run": f.run,
                "id": f.id,
                "severity": f.severity,
                "title": clean(f.title),
                "impact": f.impact,
                "impact_range": list(f.impact_range) if f.impact_range else None,
                "recovers": f.recovers,
                "basis": f.basis,
                "checked": promise_lines(f),
            }
            for f in ranked
        ],
        "first_change": (
            {"run": first.run, "id": first.id, "remedy": clean(first.remedy)} if first else None
        ),
        "missing": skipped,
    }
    return View("summary", items, {"summary": record})
