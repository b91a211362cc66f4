"""Body of ``ppscope report RUN_DIR... -o reports/NAME.html [-p key value] [--with-code]
[--no-redact] [--notebook NAME]``.

Renders a notebook of ``notebooks/`` (the postmortem by default) on the run directories into a
self-contained HTML file and its ``.json`` sidecar, showing progress on stderr and printing the
report's path on stdout. Exit codes: 0 written; 1 a notebook cell failed (the partial notebook
is written next to the report); 2 bad input (unknown notebook or parameter, no run directory).
"""

from __future__ import annotations

import sys
from pathlib import Path

from toolkit.errors import ToolkitError
from toolkit.report.render import CellError, render

__all__ = ["run_report"]


def run_report(
    run_dirs: list[Path],
    out: Path,
    params: dict[str, str],
    with_code: bool,
    redact: bool,
    notebook: str = "postmortem",
) -> int:
    """Render ``notebook`` on ``run_dirs`` to ``out``; returns the exit code.

    ``run_dirs`` become the notebook's ``runs`` parameter, as given (relative paths stay
    relative in the report's provenance); a ``runs`` in ``params`` is used when no directory
    is named.
    """
    params = dict(params)
    if run_dirs:
        if "runs" in params:
            print("ppscope: give run directories or -p runs, not both", file=sys.stderr)
            return 2
        for path in run_dirs:
            if not path.is_dir():
                print(f"ppscope: {path}: not a run directory", file=sys.stderr)
                return 2
        params["runs"] = ",".join(p.as_posix() for p in run_dirs)
    if out.suffix.lower() != ".html":
        print(f"ppscope: the report must be an .html file, not {out}", file=sys.stderr)
        return 2
    try:
        report = render(notebook, params, out, with_code=with_code, redact=redact, progress=True)
    except CellError as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 1
    except ToolkitError as e:
        print(f"ppscope: {e}", file=sys.stderr)
        return 2
    print(report.html)
    return 0
