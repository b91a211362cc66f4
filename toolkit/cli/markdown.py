"""Findings as GitHub-flavoured Markdown, ready to paste into an issue.

Per run: a heading, what the diagnosis assumed (model, machine, layout), a table of findings
(severity, finding, impact, basis), then each finding's summary, a small evidence table and the
remedy; the checks the run's inputs could not support close it.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from toolkit.analyze.headline import by_concurrency
from toolkit.cli.output import cell
from toolkit.diagnose import Finding
from toolkit.diagnose.finding import impact_text, promise_lines
from toolkit.run_analysis import RunAnalysis

__all__ = ["findings_markdown", "markdown_table"]

EVIDENCE_ROWS = 8
"""Rows of evidence shown per finding."""


def findings_markdown(
    findings: Sequence[Finding],
    runs: Sequence[RunAnalysis],
    skipped: Sequence[dict[str, str]] = (),
) -> str:
    """The Markdown report of ``ppscope diagnose --format markdown``."""
    out: list[str] = []
    for ctx in runs:
        mine = [f for f in findings if f.run == ctx.label]
        out += [f"## {_text(ctx.label)}", ""]
        out += [
            f"Run `{ctx.run.path}`: model {_text(ctx.model.describe())}; machine "
            f"{_text(ctx.machine.describe())}; layout {_text(ctx.run.layout.describe())} "
            f"(from {ctx.run.layout.layout_from}).",
            "",
        ]
        if mine:
            rows = [
                [f.severity, f"`{f.id}`{_of(f)}: {f.title}", impact_text(f) or "-"] for f in mine
            ]
            out += [*markdown_table(["severity", "finding", "recovers"], rows), ""]
        else:
            out += ["No fault found by the checks that could run.", ""]
        for f in mine:
            head = f"### {f.severity.upper()} `{f.id}`{_of(f)}: {_text(f.title)}"
            out += [head, "", _text(f.summary)]
            checked = promise_lines(f)
            if checked:
                out += ["", *(f"- checked: {_text(line)}" for line in checked)]
            if f.severity != "info" and f.evidence.height:
                out += ["", *_evidence(f.evidence)]
            if f.severity != "info":
                out += ["", f"**Remedy:** {_text(f.remedy)}"]
            out.append("")
        missing = [s for s in skipped if s["run"] == ctx.label]
        if missing:
            out += [f"Skipped for lack of input ({len(missing)}):", ""]
            out += [
                f"- `{s['check']}`: no {_text(s['missing'])}; {_text(s['supply'])}" for s in missing
            ]
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table; pipes and line breaks inside cells escaped.

    >>> print("\\n".join(markdown_table(["a", "b"], [["1", "x|y"]])))
    | a | b |
    |---|---|
    | 1 | x\\|y |
    """
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |"]
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines


def _evidence(frame: pl.DataFrame) -> list[str]:
    shown = by_concurrency(frame).head(EVIDENCE_ROWS)  # phases by concurrency, as the report
    rows = [[cell(v) for v in row] for row in shown.iter_rows()]
    lines = markdown_table([str(c) for c in shown.columns], rows)
    if frame.height > EVIDENCE_ROWS:
        lines += ["", f"… {frame.height - EVIDENCE_ROWS} more rows (`--json` has them all)."]
    return lines


def _of(finding: Finding) -> str:
    """`` (launch 2 of 3 (...))`` for a finding about one launch of several, else nothing."""
    return f" ({finding.launch})" if finding.launch else ""


def _cell(text: str) -> str:
    return _text(text).replace("|", "\\|")


def _text(text: object) -> str:
    return " ".join(str(text).split())
