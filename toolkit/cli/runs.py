"""Run directories loaded for a command, with a progress line while their files are parsed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolkit.cli.output import Progress, remember_secrets, say
from toolkit.cli.stdin import spooled
from toolkit.errors import ToolkitError
from toolkit.load.damage import all_damage, damage_rows
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

__all__ = ["bench_damage_status", "damage_status", "load_analyses"]

DAMAGED = 1
"""Exit code when some input failed and the rest were used."""


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


def damage_status(contexts: Sequence[RunAnalysis]) -> int:
    """``DAMAGED`` after naming on stderr each input used only as far as it was readable
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
    return DAMAGED
