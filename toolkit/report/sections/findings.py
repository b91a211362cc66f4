"""The diagnosis: findings ranked by severity, each with its evidence and remedy."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from toolkit.report.context import redacting
from toolkit.report.redact import escape
from toolkit.report.runs import RunSet
from toolkit.report.sections.parts import by_concurrency
from toolkit.report.view import (
    STYLE,
    View,
    clean,
    clean_frame,
    jsonable,
    para,
)

__all__ = ["findings"]


_SEVERITY = {"high": 1, "medium": 2, "low": 3, "info": 4}


def _severity_rank(finding: Any) -> int:
    return _SEVERITY.get(str(getattr(finding, "severity", "")).lower(), 5)


def _finding_html(f: Any, evidence_rows: int) -> list[Any]:
    """A finding's block: heading with its impact, summary, remedy, evidence table."""
    table = (
        by_concurrency(clean_frame(f.evidence)) if isinstance(f.evidence, pl.DataFrame) else None
    )
    run = f" ({f.run})" if f.run else ""
    basis = getattr(f, "basis", None)  # measured, modelled or assumed, where rules say
    impact = (
        f" · ≈{f.impact:.0%} of throughput" + (f" ({basis})" if basis else "")
        if f.impact is not None
        else ""
    )
    items: list[Any] = [
        f'<div class="ppscope-finding sev-{_severity_rank(f)}">'
        f"<h3>{escape(f.severity.upper())}{escape(run)}: {escape(clean(f.title))} "
        f"<code>{escape(f.id)}</code>{escape(impact)}</h3>"
        f"<p>{escape(clean(f.summary))}</p>"
        f"<p><b>Remedy:</b> {escape(clean(f.remedy))}</p>"
    ]
    if table is not None and table.height:
        items.append(table.head(evidence_rows))
    items.append("</div>")
    return items


def _record(f: Any) -> dict[str, Any]:
    record = f.to_dict()
    for key in ("title", "summary", "remedy"):
        record[key] = clean(record[key])
    if redacting() and isinstance(f.evidence, pl.DataFrame):
        record["evidence"] = jsonable(clean_frame(f.evidence))
    return record


def findings(runs: RunSet, *, evidence_rows: int = 12) -> View:
    """The diagnosis: findings ranked by severity, each with its evidence and remedy, then the
    notes that are not faults (folded), then the checks the runs' inputs could not support (a
    missing input is not a clear result)."""
    found, missing = runs.diagnosis()
    items: list[Any] = [STYLE]
    if not found:
        text = "No rule found a cause"
        text += (
            " among the checks these inputs allow (the others are listed below)."
            if missing
            else ": every hypothesis checked came out clear."
        )
        items.append(para(text))
    faults = [f for f in found if f.severity != "info"]
    notes = [f for f in found if f.severity == "info"]
    charts = []
    for f in faults:
        items += _finding_html(f, evidence_rows)
        if isinstance(f.chart, alt.TopLevelMixin):
            items.append(f.chart)
    if notes:
        items.append(
            f"<details><summary>{len(notes)} note(s) that are not faults "
            "(how PP logs, what the load allows)</summary>"
        )
        for f in notes:
            items += _finding_html(f, evidence_rows)
            if isinstance(f.chart, alt.TopLevelMixin):
                charts.append(f.chart)  # a chart cannot sit inside the folded block
        items.append("</details>")
    items += charts
    if missing:
        items.append(
            f"<details><summary>{len(missing)} check(s) skipped for lack of input</summary>"
        )
        items.append(pl.DataFrame(missing).select("run", "check", "missing", "supply"))
        items.append("</details>")
    records = [_record(f) for f in found]
    return View("findings", items, {"findings": records, "skipped": missing})
