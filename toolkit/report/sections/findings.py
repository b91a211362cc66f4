"""The diagnosis: findings ranked by severity, each with its evidence and remedy."""

from __future__ import annotations

from typing import Any

import altair as alt
import polars as pl

from toolkit.diagnose import diagnose, skipped_checks
from toolkit.report.context import redacting
from toolkit.report.redact import escape
from toolkit.report.runs import RunSet
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


def findings(runs: RunSet, *, evidence_rows: int = 12) -> View:
    """The diagnosis: findings ranked by severity, each with its evidence and remedy, then the
    checks the runs' inputs could not support (a missing input is not a clear result)."""
    found = diagnose(runs.analyses)
    missing = skipped_checks(runs.analyses)
    items: list[Any] = [STYLE]
    records = []
    if not found:
        text = "No rule found a cause"
        text += (
            " among the checks these inputs allow (the others are listed below)."
            if missing
            else ": every hypothesis checked came out clear."
        )
        items.append(para(text))
    for f in found:
        table = clean_frame(f.evidence) if isinstance(f.evidence, pl.DataFrame) else None
        run = f" ({f.run})" if f.run else ""
        items.append(
            f'<div class="ppscope-finding sev-{_severity_rank(f)}">'
            f"<h3>{escape(f.severity.upper())}{escape(run)}: {escape(clean(f.title))} "
            f"<code>{escape(f.id)}</code></h3>"
            f"<p>{escape(clean(f.summary))}</p>"
            f"<p><b>Remedy:</b> {escape(clean(f.remedy))}</p>"
        )
        if table is not None and table.height:
            items.append(table.head(evidence_rows))
        items.append("</div>")
        if isinstance(f.chart, alt.TopLevelMixin):
            items.append(f.chart)
        record = f.to_dict()
        for key in ("title", "summary", "remedy"):
            record[key] = clean(record[key])
        if redacting() and table is not None:
            record["evidence"] = jsonable(table)
        records.append(record)
    if missing:
        items.append(
            f"<details><summary>{len(missing)} check(s) skipped for lack of input</summary>"
        )
        items.append(pl.DataFrame(missing).select("run", "check", "missing", "supply"))
        items.append("</details>")
    return View("findings", items, {"findings": records, "skipped": missing})
