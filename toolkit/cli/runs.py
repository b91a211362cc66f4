"""Run directories loaded for a command, with a progress line while their files are parsed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolkit.cli.output import Progress, remember_secrets
from toolkit.cli.stdin import spooled
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

__all__ = ["load_analyses"]


def load_analyses(paths: Sequence[Path], *, quiet: bool = False) -> list[RunAnalysis]:
    """One ``RunAnalysis`` per run directory, its log, results and GPU trace parsed now."""
    runs = [load_run(p, cache=not spooled(p)) for p in paths]  # stdin's copy is removed after
    out = []
    with Progress(len(runs), quiet=quiet) as progress:
        for path, run in zip(paths, runs, strict=True):
            with progress.step(str(path)):
                for part in ("log", "bench", "gpu"):
                    getattr(run, part)
            remember_secrets(run.secrets)
            out.append(RunAnalysis(run))
    for ctx in out:  # runs loaded together are compared with each other
        ctx.peers = tuple(c for c in out if c is not ctx)
    return out
