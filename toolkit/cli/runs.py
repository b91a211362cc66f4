"""Run directories loaded for a command, one progress step per run while its files are parsed.

A command given several run directories reports one it cannot read (missing, a file, nothing
recognized in it) and goes on with the others when it passes ``problems``; it then exits with
``PARTLY_FAILED`` once its output is written.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

from toolkit.cli.output import Progress, remember_secrets, say
from toolkit.cli.stdin import spooled
from toolkit.errors import ToolkitError
from toolkit.load.damage import all_damage, damage_rows
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

__all__ = [
    "PARTLY_FAILED",
    "bench_damage_status",
    "damage_status",
    "load_analyses",
    "report_problems",
]

PARTLY_FAILED = 1
"""Exit code when some inputs could not be read, or were read only in part, and the rest were
used."""


def load_analyses(
    paths: Sequence[Path],
    *,
    quiet: bool = False,
    progress: Progress | None = None,
    problems: list[str] | None = None,
    title: str = "",
    empty_ok: bool = False,
) -> list[RunAnalysis]:
    """One ``RunAnalysis`` per run directory, its log, results and GPU trace parsed now.

    Parameters
    ----------
    paths
        Run directories.
    quiet
        No progress (when ``progress`` is not given).
    progress
        The command's progress (counting one step per run among its steps); default one of
        its own.
    problems
        When given, a directory that cannot be read (missing, no recognized input) is recorded
        here (``path: reason``) and left out, and the others load; else the error of a
        missing one is raised.
    title
        The command's name, heading its progress lines (when ``progress`` is not given).
    empty_ok
        Keep a directory with no recognized input (the command says what it lacks).

    Raises
    ------
    ToolkitError
        A directory that cannot be read (without ``problems``), or none that can.
    """
    own = progress is None
    bar = progress if progress is not None else Progress(len(paths), quiet=quiet, title=title)
    out = []
    with bar if own else nullcontext():
        for path in paths:
            with bar.step(f"load {path}"):
                try:
                    run = load_run(path, cache=not spooled(path))  # stdin's copy is removed after
                    if problems is not None and not (empty_ok or run.has_inputs):
                        raise ToolkitError(
                            f"{path}: no SGLang log, benchmark result or GPU trace found"
                        )
                except ToolkitError as e:
                    if problems is None:
                        raise
                    problems.append(str(e))
                    continue
                for part in ("log", "bench", "gpu"):
                    getattr(run, part)
            remember_secrets(run.secrets)
            out.append(RunAnalysis(run))
    if not out:
        raise ToolkitError("; ".join(problems or ["no run directory given"]))
    for ctx in out:  # runs loaded together are compared with each other
        ctx.peers = tuple(c for c in out if c is not ctx)
    return out


def report_problems(problems: Sequence[str]) -> int:
    """Print each input that could not be read on stderr; the exit code: 0 when there were
    none, else ``PARTLY_FAILED``."""
    for problem in problems:
        print(f"ppscope: skipped {problem}", file=sys.stderr)
    return PARTLY_FAILED if problems else 0


def damage_status(contexts: Sequence[RunAnalysis]) -> int:
    """``PARTLY_FAILED`` after naming on stderr each input used only as far as it was readable
    (``damage.all_damage``); 0 when every input was read whole."""
    return _said([row for ctx in contexts for row in all_damage(ctx.run)])


def bench_damage_status(errors: Sequence[ToolkitError]) -> int:
    """``damage_status`` of benchmark results loaded on their own (``BenchResults.damaged``)."""
    return _said(damage_rows(list(errors), "benchmark results"))


def _said(rows: list[dict[str, str]]) -> int:
    if not rows:
        return 0
    say("ppscope: some input failed, the rest were used:")
    for row in rows:
        say(f"  {row['input']}: {row['detail']}")
    return PARTLY_FAILED
