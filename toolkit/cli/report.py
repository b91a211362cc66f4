"""``ppscope report``: a notebook rendered on run directories into one offline HTML file.

Renders a notebook (the postmortem by default) with papermill and writes a self-contained
HTML file and its ``.json`` sidecar, showing progress on stderr and printing the report's path
on stdout. Exit codes: 0 written; 1 a notebook cell failed (the partial notebook is written
next to the report), or a run directory among several was missing or held nothing readable
(named on stderr; the report covers the others); 2 bad input (unknown notebook or parameter,
no run directory).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from toolkit.cli.options import add_output, add_quiet, add_run_dirs
from toolkit.cli.output import fail
from toolkit.cli.runs import report_problems
from toolkit.errors import ToolkitError
from toolkit.load.run import load_run, run_directory
from toolkit.report.paths import join_runs

NAME = "report"
HELP = "render an offline HTML postmortem (and its JSON sidecar) from run directories"
EXAMPLES = """\
examples:
  ppscope report runs/tp8 runs/pp8 -o reports/pp8-vs-tp8.html
  ppscope report runs/pp8 -o reports/pp8.html --notebook stage_timeline
  ppscope report -o reports/demo.html               the sample incident
"""
NOTEBOOKS = "postmortem, scaling_gap, stage_timeline, config_diff, gpu_trace, or a .ipynb path"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_dirs(parser, minimum=0)
    add_output(parser, required=True, what="the report (NAME.html; NAME.json beside it)")
    parser.add_argument(
        "-p", "--param", nargs=2, action="append", default=[], metavar=("KEY", "VALUE"),
        help="a notebook parameter, as with papermill -p",
    )  # fmt: skip
    parser.add_argument("--notebook", default="postmortem", help=NOTEBOOKS)
    parser.add_argument("--with-code", action="store_true", help="show the code cells")
    parser.add_argument(
        "--full-paths", action="store_true",
        help="show absolute paths (default: relative to the folder that holds the runs)",
    )  # fmt: skip
    parser.add_argument(
        "--no-redact", dest="redact", action="store_false",
        help="keep API keys, tokens and passwords in the report",
    )  # fmt: skip
    add_quiet(parser, what="no progress while the notebook runs")


def run(args: argparse.Namespace) -> int:
    """Render the notebook on the run directories; ``-p runs ...`` is used when no directory
    is named. The report shows paths relative to the folder that holds the runs unless
    ``--full-paths``."""
    from toolkit.report.render import CellError, render  # papermill and nbconvert: only here

    params = dict(args.param)
    problems: list[str] = []
    if args.paths:
        if "runs" in params:
            raise ToolkitError("give run directories or -p runs, not both")
        usable = []
        for path in args.paths:
            try:
                if not load_run(path).has_inputs:  # an empty folder must not read as healthy
                    raise ToolkitError(
                        f"{path}: no SGLang log, benchmark result or GPU trace found"
                    )
                usable.append(run_directory(path).as_posix())
            except ToolkitError as e:
                if len(args.paths) == 1:
                    raise
                problems.append(str(e))  # reported; the report covers the others
        if not usable:
            raise ToolkitError("; ".join(problems))
        params["runs"] = join_runs(usable)
    out: Path = args.output
    if out.suffix.lower() != ".html":
        raise ToolkitError(f"the report must be an .html file, not {out}")
    try:
        report = render(
            args.notebook,
            params,
            out,
            with_code=args.with_code,
            redact=args.redact,
            progress=not args.quiet,
            full_paths=args.full_paths,
        )
    except CellError as e:
        fail(e)
        return 1
    print(report.html)
    return report_problems(problems)
