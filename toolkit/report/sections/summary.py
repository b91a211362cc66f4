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

from toolkit.diagnose import Finding
from toolkit.diagnose.finding import impact_text, promise_lines
from toolkit.report.redact import escape
from toolkit.report.runs import RunSet
from toolkit.report.view import STYLE, View, clean

__all__ = ["summary"]

_SHOWN = ("high", "medium")


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
    lead = runs.headline(a, b)
    verdict, table, gap = lead.verdict, lead.table, lead.gap
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
