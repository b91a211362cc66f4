"""The diagnosis: findings ranked by severity, each with its evidence and remedy."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from toolkit.diagnose.finding import impact_text, promise_lines
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
    impact = f" · recovers {impact_text(f)}" if impact_text(f) else ""
    checked = "".join(f"<li>{escape(clean(line))}</li>" for line in promise_lines(f))
    items: list[Any] = [
        f'<div class="ppscope-finding sev-{_severity_rank(f)}">'
        f"<h3>{escape(f.severity.upper())}{escape(run)}: {escape(clean(f.title))} "
        f"<code>{escape(f.id)}</code>{escape(impact)}</h3>"
        f"<p>{escape(clean(f.summary))}</p>"
        f"<p><b>Remedy:</b> {escape(clean(f.remedy))}</p>"
        + (f"<p><b>Checked against the remedied run:</b></p><ul>{checked}</ul>" if checked else "")
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


def _by_launch(found: list[Any]) -> list[tuple[str | None, list[Any]]]:
    """The findings in sections: one (``run · launch``, its findings) per launch when any
    finding names one, in order of first appearance; else one unnamed section of all."""
    if not any(getattr(f, "launch", None) for f in found):
        return [(None, found)]
    sections: dict[str, list[Any]] = {}
    for f in found:
        name = " · ".join(p for p in (f.run, getattr(f, "launch", None)) if p)
        sections.setdefault(name, []).append(f)
    return list(sections.items())


def _ranked_items(found: list[Any], evidence_rows: int, charts: list[Any]) -> list[Any]:
    """Faults in rank order with their charts, then the notes folded (their charts are put in
    ``charts``: a chart cannot sit inside the folded block)."""
    items: list[Any] = []
    faults = [f for f in found if f.severity != "info"]
    notes = [f for f in found if f.severity == "info"]
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
                charts.append(f.chart)
        items.append("</details>")
    return items


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
    charts: list[Any] = []
    for heading, group in _by_launch(found):
        if heading is not None:  # a run directory of several launches: one section each
            items.append(f'<h2 class="ppscope-launch">{escape(heading)}</h2>')
        items += _ranked_items(group, evidence_rows, charts)
    items += charts
    if missing:
        items.append(
            f"<details><summary>{len(missing)} check(s) skipped for lack of input</summary>"
        )
        columns = ["run", "launch"] if any(m.get("launch") for m in missing) else ["run"]
        items.append(pl.DataFrame(missing).select(*columns, "check", "missing", "supply"))
        items.append("</details>")
    records = [_record(f) for f in found]
    return View("findings", items, {"findings": records, "skipped": missing})
