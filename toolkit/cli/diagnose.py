"""``ppscope diagnose``: every hypothesis checked on each run, findings ranked with evidence.

The text shows, per run (and per launch when a run directory holds several), its findings by
severity, each with a few rows of evidence and the remedy, then the checks its inputs could not
support; with two layouts' benchmark results the first line is the verdict the report leads
with. ``--json`` prints ``{"verdict", "runs": [{"label",
"layout", "model", "hardware", "constants", "launches", "clocks"}...], "findings": [{"id",
"severity", "run", "launch", "title", "summary", "evidence", "remedy", "impact", "impact_range",
"recovers", "basis", "phase", "promise"}...],
"skipped": [{"run", "check", "missing", "supply", "launch"}...]}``; ``launches`` lists each
server start with its span and how it ended, ``clocks`` the offset applied to each timed input
and why, findings ordered by severity, then by the share of throughput each remedy recovers.
``--format markdown`` prints the same as Markdown for a GitHub issue. ``--fail-on SEVERITY``
(any case) makes the exit code 3 when a finding at or above that severity exists (for CI), and
lists those findings on stderr; 2 stays bad input. A run directory among several that cannot
be read is reported on stderr, the others are diagnosed, and the exit code is 1 (3 when
``--fail-on`` trips as well); 1 also says some input was damaged and used as far as it was
readable (named on stderr and in the ``input-mismatch`` note). Every output is redacted: no
secret of the inputs is printed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from toolkit.analyze.headline import Headline, by_concurrency, headline, labelled_bench
from toolkit.cli.markdown import findings_markdown
from toolkit.cli.options import add_json, add_output, add_quiet, add_run_dirs
from toolkit.cli.output import Progress, emit, frame_lines, to_json, wrapped
from toolkit.cli.runs import damage_status, load_analyses, report_problems
from toolkit.diagnose import SEVERITIES, Finding, diagnose, skipped_checks
from toolkit.diagnose.cudagraph import eager_constant
from toolkit.diagnose.finding import impact_text, promise_lines
from toolkit.errors import ToolkitError
from toolkit.run_analysis import RunAnalysis

__all__ = ["failing", "findings_text"]

NAME = "diagnose"
HELP = "every hypothesis checked: findings ranked, with evidence and remedies"
EXAMPLES = """\
examples:
  ppscope diagnose runs/pp8                    one run
  ppscope diagnose runs/tp8 runs/pp8           runs compared with each other
  ppscope diagnose runs/pp8 --json -o findings.json
  ppscope diagnose runs/pp8 --format markdown      to paste into a GitHub issue
  ppscope diagnose runs/pp8 --fail-on high         exit code 3 when a high finding exists
"""
EVIDENCE_ROWS = 8  # rows of evidence printed per finding
FAILED_CHECK = 3
"""Exit code when ``--fail-on`` finds a finding at or above its severity."""
FAIL_ON = ("high", "medium", "low")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_dirs(parser)
    add_json(parser)
    parser.add_argument(
        "--format", choices=("text", "markdown"), default="text",
        help="text (default) or markdown, ready to paste into a GitHub issue",
    )  # fmt: skip
    parser.add_argument(
        "--fail-on", type=str.lower, choices=FAIL_ON, metavar="SEVERITY",
        help=f"exit with code {FAILED_CHECK} when a finding at or above SEVERITY "
        "(high, medium, low; any case) exists, listing those findings on stderr",
    )  # fmt: skip
    add_output(parser)
    add_quiet(parser, what="no progress while runs are read and checked")


def run(args: argparse.Namespace) -> int:
    if args.json and args.format != "text":
        raise ToolkitError(f"--json and --format {args.format}: choose one")
    problems: list[str] = []
    steps = 2 * len(args.paths) + 1  # load each run, check each run, list what was skipped
    with Progress(steps, quiet=args.quiet, title="diagnose") as progress:
        contexts = load_analyses(args.paths, progress=progress, problems=problems)
        progress.add(-len(problems))
        findings = diagnose(contexts, step=progress.step)
        with progress.step("list the checks the inputs could not support"):
            missing = skipped_checks(contexts)
    lead = runs_headline(contexts)
    if args.json:
        document = {
            "verdict": lead.verdict,
            "runs": [_identity(ctx) for ctx in contexts],
            "findings": [f.to_dict() for f in findings],
            "skipped": missing,
        }
        emit(to_json(document), args.output)
    elif args.format == "markdown":
        emit(findings_markdown(findings, contexts, missing).rstrip(), args.output)
    else:
        said = [f"verdict: {lead.verdict}", ""] if lead.gap is not None else []
        emit("\n".join([*said, findings_text(findings, contexts, missing)]), args.output)
    code = max(report_problems(problems), damage_status(contexts))
    tripped = failing(findings, args.fail_on) if args.fail_on else []
    if tripped:
        print(f"ppscope: --fail-on {args.fail_on}: {len(tripped)} finding(s)", file=sys.stderr)
        for f in tripped:
            print(f"  {f.severity.upper()} {f.id} (run {f.run})", file=sys.stderr)
        return FAILED_CHECK
    return code


def _identity(ctx: RunAnalysis) -> dict[str, Any]:
    """``RunAnalysis.identity`` with the factors the diagnosis itself assumed or measured (the
    eager slowdown) among its constants."""
    record = ctx.identity()
    if record.get("constants") is not None:
        record["constants"] = {**record["constants"], **eager_constant(ctx)}
    return record


def runs_headline(contexts: Sequence[RunAnalysis]) -> Headline:
    """The verdict the report's summary leads with, for the same runs (``analyze.headline``)."""
    bench = labelled_bench(
        (ctx.label, ctx.run.bench.runs if ctx.run.bench is not None else None) for ctx in contexts
    )
    return headline(bench, {ctx.label: ctx.like_facts() for ctx in contexts})


def failing(findings: Sequence[Finding], severity: str) -> list[Finding]:
    """The findings at or above ``severity`` (``info`` never counts)."""
    limit = SEVERITIES.index(severity)
    return [f for f in findings if f.severity != "info" and SEVERITIES.index(f.severity) <= limit]


def findings_text(
    findings: Sequence[Finding],
    runs: Sequence[RunAnalysis],
    skipped: Sequence[dict[str, str]] = (),
) -> str:
    """The text report: per run, its findings ranked, with evidence and remedy, then the
    checks its inputs could not support."""
    lines: list[str] = []
    for ctx in runs:
        mine = [f for f in findings if f.run == ctx.label]
        counts = {s: sum(1 for f in mine if f.severity == s) for s in ("high", "medium", "low")}
        tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no faults"
        lines.append(f"{ctx.label}  ({ctx.run.path})  {tally}")
        units = ctx.launches
        if len(units) > 1:
            lines += wrapped(
                f"{len(units)} server launches in this run directory, each diagnosed on its own",
                "  ",
            )
            lines.append("")
        for unit in units:
            pad = "  " if len(units) > 1 else ""
            if len(units) > 1:
                end = unit.ending or {}
                how = end.get("ended", "?")
                lines.append(f"  {unit.display_label}: {unit.launch_name}, ended: {how}")
            lines += _unit_lines(unit, mine, skipped, pad)
            if len(units) > 1 and unit is not units[-1]:
                lines.append("")
        lines.append("")
    return "\n".join(lines).rstrip()


def _unit_lines(
    ctx: RunAnalysis, findings: Sequence[Finding], skipped: Sequence[dict[str, str]], pad: str
) -> list[str]:
    """One launch's part of the text report (a run's, when it holds one launch)."""
    indent = pad + " " * 9
    lines = wrapped(
        f"model {ctx.model.describe()}; machine {ctx.machine.describe()}; layout "
        f"{ctx.run.layout.describe()} (from {ctx.run.layout.layout_from})",
        pad + "  ",
    )
    mine = [f for f in findings if f.launch == ctx.launch_name]
    missing = [s for s in skipped if s["run"] == ctx.label and s.get("launch") == ctx.launch_name]
    if not mine:
        lines.append(pad + "  nothing found" + (" by the checks that could run" if missing else ""))
    for f in mine:
        lines.append(f"{pad}  {f.severity.upper():<6} {f.id}: {f.title}")
        if impact_text(f):
            lines += wrapped("recovers " + impact_text(f), indent)
        lines += wrapped(f.summary, indent)
        for line in promise_lines(f):
            lines += wrapped("checked: " + line, indent)
        if f.severity != "info" and f.evidence.height:
            lines.append(f"{indent}evidence:")
            shown = by_concurrency(f.evidence)  # phases by concurrency, as the report
            lines += frame_lines(shown, EVIDENCE_ROWS, indent=indent + "  ")
        if f.severity != "info":
            lines += wrapped("remedy: " + f.remedy, indent)
        lines.append("")
    if missing:
        lines.append(f"{pad}  skipped {len(missing)} check(s) for lack of input:")
        for s in missing:
            lines += wrapped(f"{s['check']}: no {s['missing']}; {s['supply']}", pad + "    ")
    return lines
