"""The launches of a run directory as a reader sees them: when each ran, how it ended, what
was measured against it, and on which clock each input was read.

``launch_list`` is what ``ppscope diagnose --json`` prints per run under ``launches``;
``ending`` says how one launch ended (the next launch, a crash with its last error line, the end
of the log); ``launch_name`` names a launch of a run that holds several
(``launch 2 of 3 (2026-05-12 10:14:03, server.log:8812)``).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.errors import ToolkitError
from toolkit.load.run import Run
from toolkit.load.units import LaunchRun, launch_units
from toolkit.load.windows import launch_windows

__all__ = ["LaunchViews", "ending", "launch_list", "launch_name"]


class LaunchViews:
    """The launches of a run analysis (``RunAnalysis`` mixes this in): one analysis per launch
    of a run directory that holds several, each pinned to its launch (``units.LaunchRun``)."""

    run: Run
    label: str
    mismatches: list[dict[str, str]]
    clocks: list[dict[str, Any]]

    @cached_property
    def launches(self) -> tuple[Any, ...]:
        """One analysis per launch of the run directory (``units.launch_units``), in time
        order; ``(self,)`` when it holds one launch (or none)."""
        units = launch_units(self.run)
        if len(units) == 1 and units[0] is self.run:
            return (self,)
        return tuple(type(self)(u) for u in units)  # type: ignore[call-arg]

    @property
    def launch_name(self) -> str | None:
        """``launch 2 of 3 (2026-05-12 10:14:03, server.log:8812)`` for one launch of several;
        None for a run of one launch."""
        run = self.run
        return launch_name(run._whole, run.window) if isinstance(run, LaunchRun) else None

    @property
    def display_label(self) -> str:
        """The label shown to users: ``PP8``, or ``PP8 · launch 2`` for one of several."""
        run = self.run
        return f"{self.label} · launch {run.number}" if isinstance(run, LaunchRun) else self.label

    @cached_property
    def ending(self) -> dict[str, Any] | None:
        """How this launch (of a run's several; else the one the run is about) ended
        (``ending``); None for a run of one launch."""
        run = self.run
        if isinstance(run, LaunchRun):
            return ending(run._whole, run.window)
        windows = launch_windows(run.launch_spans)
        group = run.launch_choice[0]
        chosen = [w for w in windows if w["group"] == group]
        return ending(run, chosen[0]) if len(windows) > 1 and chosen else None

    def launch_record(self) -> dict[str, Any]:
        """``launches`` (``launch_list``) and ``clocks`` (``RunEvidence.clocks``: per timed
        input, the offset applied and why) of the run, as ``ppscope diagnose --json`` prints
        them per run."""
        return {
            "launches": launch_list(self.run, [u.run for u in self.launches]),
            "clocks": self.clocks,
        }


def launch_name(run: Run, window: dict[str, Any]) -> str:
    """``launch 2 of 3 (2026-05-12 10:14:03, server.log:8812)``: its place, start and line."""
    total = len(launch_windows(run.launch_spans))
    start = window["start"] or window["end"]
    when = f"{start:%Y-%m-%d %H:%M:%S}, " if start is not None else ""
    where = f"{Path(window['sources'][0]).name}:{window['lineno']}"
    return f"launch {window['number']} of {total} ({when}{where})"


def ending(run: Run, window: dict[str, Any]) -> dict[str, Any]:
    """How one launch ended: ``ended`` (``next launch``, ``crash``, ``end of log``), ``at``
    (the time of its last batch line, or of the error), ``error`` (the last exception a
    traceback ends with after its last batch line and before the next start in its file, else
    the last error line there, with its ``file:line``), ``next``
    (the next launch's number, when one follows in its file)."""
    spans = run.launch_spans
    log = run.log
    members = spans.filter(pl.col("group") == window["group"])
    out: dict[str, Any] = {"ended": "end of log", "at": window["end"], "error": None, "next": None}
    errors = log.errors if log is not None else None
    last: dict[str, Any] | None = None
    numbers = {w["group"]: w["number"] for w in launch_windows(spans)}
    for source, lineno in members.select("source", "lineno").iter_rows():
        later = spans.filter((pl.col("source") == source) & (pl.col("lineno") > lineno)).sort(
            "lineno"
        )
        stop = int(later["lineno"][0]) if later.height else None
        if later.height:
            out.update(ended="next launch", next=numbers.get(int(later["group"][0])))
        if errors is None or not errors.height:
            continue
        after = pl.col("lineno") > lineno
        before = pl.col("lineno") < stop if stop is not None else pl.lit(True)
        tail = errors.filter(
            (pl.col("source") == source) & after & before & (pl.col("level") != "warning")
        )
        if window["end"] is not None:
            tail = tail.filter(pl.col("ts").is_null() | (pl.col("ts") >= window["end"]))
        if tail.height:
            # the exception a traceback ends with says more than the launcher's echo of it
            raised = tail.filter(pl.col("level") == "traceback")
            pick = raised if raised.height else tail
            row = pick.row(pick.height - 1, named=True)
            if last is None or (row["ts"] is not None and (last["ts"] or row["ts"]) <= row["ts"]):
                last = row
    if last is not None:
        out.update(
            ended="crash",
            at=last["ts"] or window["end"],
            error={
                "line": last["summary"],
                "where": f"{Path(last['source']).name}:{last['lineno']}",
            },
        )
    return out


def launch_list(run: Run, units: list[Run]) -> list[dict[str, Any]]:
    """One JSON-ready record per launch of ``run``: name, source file and line, start, end,
    batch lines, what marks its start, how it ended, and the input files attributed to it
    (``units`` are its per-launch views, or ``[run]``)."""
    windows = launch_windows(run.launch_spans)
    out = []
    for w in windows:
        unit = next((u for u in units if getattr(u, "window", {}).get("group") == w["group"]), run)
        record = {
            "name": launch_name(run, w) if len(windows) > 1 else "the run's launch",
            "source": Path(w["sources"][0]).name,
            "lineno": w["lineno"],
            "start": w["start"],
            "end": w["end"],
            "batch_lines": w["batch_lines"],
            "marked_by": w["why"] or "server_args dump",
            **ending(run, w),
            "inputs": _inputs_of(unit),
        }
        out.append(record)
    return out


def _inputs_of(run: Run) -> list[str]:
    """The measurement files a (per-launch) run reads."""
    names: list[str] = []
    bench = run.bench
    if bench is not None:
        names += bench.runs["source"].unique(maintain_order=True).to_list()
    reads = (
        lambda: run.gpu.samples if run.gpu is not None else None,
        lambda: run.metrics.samples if run.metrics is not None else None,
        lambda: run.phase_marks,
        lambda: run.server_info,
    )
    for read in reads:
        try:
            frame = read()
        except ToolkitError:
            continue  # an unreadable file is its loader's error, where it is used
        if frame is not None and frame.height:
            names += frame["source"].cast(pl.String).unique(maintain_order=True).to_list()
    return list(dict.fromkeys(Path(n).name for n in names if n is not None))
