"""``ppscope demo``: the sample incident and its postmortem, from anywhere ppscope is installed.

Writes the three synthetic runs (TP8, PP8, the remedied PP8; generated deterministically, the
same bytes as the repository's ``data/incident``) into a folder and renders the postmortem of
them beside, so a new user sees the whole pipeline without data of their own.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from toolkit.cli.options import add_output, add_quiet
from toolkit.errors import ToolkitError

NAME = "demo"
HELP = "write the sample incident's runs and render their postmortem"
EXAMPLES = """\
examples:
  ppscope demo                           into ./ppscope-demo/
  ppscope demo -o /tmp/sample -q
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_output(
        parser,
        what="the sample runs and their report",
        metavar="DIR",
        default=Path("ppscope-demo"),
    )
    add_quiet(parser, what="no progress while the report renders")


def run(args: argparse.Namespace) -> int:
    from toolkit.report.render import CellError, render  # papermill and nbconvert: only here
    from toolkit.synth import INCIDENT_RUNS, sample_root

    out: Path = args.output
    if out.exists() and not out.is_dir():
        raise ToolkitError(f"{out}: not a folder")
    source = sample_root()
    for name in INCIDENT_RUNS:
        target = out / name
        if not target.exists():
            shutil.copytree(source / name, target, ignore=shutil.ignore_patterns(".*"))
    runs = ",".join((out / name).as_posix() for name in INCIDENT_RUNS)
    html = out / "incident-postmortem.html"
    try:
        report = render("postmortem", {"runs": runs}, html, progress=not args.quiet)
    except CellError as e:
        raise ToolkitError(str(e)) from e
    print(report.html)
    return 0
