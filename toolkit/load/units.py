"""One run directory, one launch at a time: a view of a run pinned to one of its server starts.

A run directory may hold several launches (a crash and a relaunch, logs of unrelated servers,
another host, years apart). Each launch group (``assembly.launch_spans``) is diagnosed on its
own, as a ``LaunchRun``: its batch lines, ServerArgs and startup facts, layout, the launch
command that started it, and the measurements inside its window (its first line to its last
batch line, widened by ``MARGIN_S``, never past the next launch's start). A measurement file
whose times meet no launch belongs to none (``stray_inputs``): it is listed, never used.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from toolkit.load.assembly import owning_launch
from toolkit.load.bench.results import BenchResults
from toolkit.load.gpu.trace import GpuTrace
from toolkit.load.prometheus import Metrics
from toolkit.load.run import _LAUNCH_LINE, Run
from toolkit.load.sglang.server_args import ServerArgsError, parse_launch_command
from toolkit.load.windows import launch_windows, stray_notes

__all__ = ["LaunchRun", "command_lines", "launch_units", "toml_command_groups"]

_MATCH_KEYS = ("tp_size", "pp_size", "dp_size", "ep_size", "model_path")


def launch_units(run: Run) -> list[Run]:
    """One ``LaunchRun`` per launch group of ``run``, in time order; ``[run]`` when it holds
    one launch or none."""
    windows = launch_windows(run.launch_spans)
    if len(windows) < 2:
        return [run]
    return [
        LaunchRun(run.path, run.config, run.files, run.cache, parent=run, window=w) for w in windows
    ]


@dataclass
class LaunchRun(Run):
    """One launch of a run directory that holds several, with what was measured against it."""

    parent: Run | None = field(default=None, repr=False)
    window: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def _whole(self) -> Run:
        assert self.parent is not None
        return self.parent

    @property
    def group(self) -> int:
        return int(self.window["group"])

    @property
    def number(self) -> int:
        """1-based position of the launch in the run directory, in time order."""
        return int(self.window["number"])

    @property
    def label(self) -> str:
        return self._whole.label

    # the inputs: the whole run's, loaded once, cut to this launch
    @cached_property
    def log(self) -> Any:
        return self._whole.log

    @cached_property
    def launch_spans(self) -> pl.DataFrame:
        return self._whole.launch_spans

    @cached_property
    def launch_choice(self) -> tuple[int | None, str]:
        return self.group, "one launch of several, diagnosed on its own"

    @cached_property
    def gpu(self) -> GpuTrace | None:
        trace = self._whole.gpu
        if trace is None:
            return None
        part = copy.copy(trace)
        part.samples = self._inside(trace.samples, "ts", "ts", keep_untimed=True)
        return part

    @cached_property
    def bench(self) -> BenchResults | None:
        results = self._whole.bench_all
        if results is None:
            return None
        runs = results.runs
        mine = self._inside(runs, "ts", "ts", keep_untimed=False)
        untimed = self._printed_here(runs.filter(pl.col("ts").is_null()))
        runs = pl.concat([mine, untimed]).filter(~pl.col("source").is_in(self._stray_files))
        if not runs.height:
            return None
        requests = results.requests
        if "run" in requests.columns:
            requests = requests.filter(pl.col("run").is_in(runs["run"].implode()))
        return replace(results, runs=runs.sort("run"), requests=requests)

    @cached_property
    def phase_marks(self) -> pl.DataFrame | None:
        marks = self._whole.phase_marks
        return None if marks is None else self._inside(marks, "start", "end", keep_untimed=False)

    @cached_property
    def server_info(self) -> pl.DataFrame | None:
        info = self._whole.server_info
        return None if info is None else self._inside(info, "ts", "ts", keep_untimed=False)

    @cached_property
    def metrics(self) -> Metrics | None:
        metrics = self._whole.metrics
        if metrics is None:
            return None
        return replace(metrics, samples=self._inside(metrics.samples, "ts", "ts", False))

    @cached_property
    def server_requests(self) -> pl.DataFrame | None:
        table = self._whole.server_requests
        if table is None:
            return None
        own = pl.col("launch").is_in(list(self.window["members"]))
        return table.filter(own.fill_null(False))

    @cached_property
    def compute_apps(self) -> pl.DataFrame | None:
        return self._whole.compute_apps

    @cached_property
    def gpu_inventory(self) -> pl.DataFrame | None:
        return self._whole.gpu_inventory

    @cached_property
    def topology(self) -> Any:
        return self._whole.topology

    @cached_property
    def model_config(self) -> dict[str, Any] | None:
        return self._whole.model_config

    def _rank_sizes(self) -> dict[str, int]:
        """Highest rank + 1 of each parallel tag among this launch's batch lines."""
        out = {}
        for tag in ("tp", "pp", "dp"):
            if tag in self.batches.columns and self.batches[tag].drop_nulls().len():
                out[tag] = int(self.batches[tag].max()) + 1  # type: ignore[arg-type]
        return out

    # the command that started this launch
    @cached_property
    def command(self) -> tuple[str, str] | None:
        """(launch command, where from): a ``launch_server`` line of the log whose next start
        in its file is this launch, else ``run.toml``'s when it matches this launch alone (or
        fits no launch's dump and this launch has none)."""
        for message, where, group in command_lines(self._whole):
            if group == self.group:
                return message, where
        text = self.config.command
        if not text:
            return None
        return (text, "run.toml") if self.group in toml_command_groups(self._whole) else None

    # what does not belong, and why
    @cached_property
    def mismatches(self) -> list[dict[str, str]]:
        """``Run.mismatches`` of this launch, the note on the other launches said as it is
        (each is diagnosed on its own), and the inputs that belong to no launch."""
        out = [m for m in super().mismatches if m["input"] not in ("launches", "log files")]
        whole = self._whole
        windows = launch_windows(whole.launch_spans)
        files = sorted({Path(s).name for w in windows for s in w["sources"]})
        note = (
            f"the run directory holds {len(windows)} server starts (other times, servers, "
            f"hosts or models); each is diagnosed on its own, this is launch {self.number}"
        )
        out.insert(0, {"input": "launches", "files": ", ".join(files), "detail": note})
        out += stray_notes(whole.stray_inputs)
        untimed = self._untimed_bench()
        if untimed:
            out.append(
                {
                    "input": "benchmark results",
                    "files": ", ".join(untimed),
                    "detail": "these results carry no time, so nothing tells which launch they "
                    "measured; they are not used",
                }
            )
        if self.config.command and self.group not in toml_command_groups(whole):
            out.append(
                {
                    "input": "run.toml command",
                    "files": "run.toml",
                    "detail": "the command is not compared with this launch: it "
                    + (
                        "matches another launch's parallel sizes and model"
                        if toml_command_groups(whole)
                        else "matches no single launch's parallel sizes and model"
                    ),
                }
            )
        return out

    # helpers
    @cached_property
    def _stray_files(self) -> list[str]:
        return [s["file"] for s in self._whole.stray_inputs]

    def _inside(self, frame: pl.DataFrame, lo: str, hi: str, keep_untimed: bool) -> pl.DataFrame:
        """The rows of ``frame`` whose ``lo``–``hi`` meets this launch's window."""
        w_lo, w_hi = self.window["lo"], self.window["hi"]
        if w_lo is None or w_hi is None:
            return frame.clear()
        meets = (pl.col(lo) <= w_hi) & (pl.col(hi) >= w_lo)
        if keep_untimed:
            meets = meets | pl.col(lo).is_null()
        return frame.filter(meets.fill_null(False))

    def _printed_here(self, runs: pl.DataFrame) -> pl.DataFrame:
        """Untimed results printed inside this launch's part of a log file."""
        logs = [str(p) for p in self.files.get("sglang-log", [])]
        printed = runs.filter(pl.col("source").is_in(logs) & pl.col("lineno").is_not_null())
        if not printed.height:
            return runs.clear()
        owned = owning_launch(printed, self.launch_spans)
        return owned.filter(pl.col("group") == self.group).drop("launch", "group")

    def _untimed_bench(self) -> list[str]:
        results = self._whole.bench_all
        if results is None:
            return []
        logs = [str(p) for p in self.files.get("sglang-log", [])]
        rows = results.runs.filter(pl.col("ts").is_null() & ~pl.col("source").is_in(logs))
        return sorted({Path(s).name for s in rows["source"].to_list()})


def command_lines(run: Run) -> list[tuple[str, str, int | None]]:
    """Each ``launch_server`` command line of the log: (command, ``file:line``, the launch group
    whose start next follows it in its file; None when none follows)."""
    log = run.log
    if log is None:
        return []
    hits = (
        log.scan()
        .filter(pl.col("message").str.contains("launch_server", literal=True))
        .select("message", "lineno", "source")
        .head(200)
        .collect()
    )
    starts = run.launch_spans.select("source", "lineno", "group").sort("source", "lineno")
    out = []
    for message, lineno, source in hits.iter_rows():
        m = _LAUNCH_LINE.search(message or "")
        if m is None:
            continue
        after = starts.filter((pl.col("source") == source) & (pl.col("lineno") > lineno))
        group = int(after["group"][0]) if after.height else None
        out.append((message[m.start() :], f"{Path(source).name}:{lineno}", group))
    return out


def toml_command_groups(run: Run) -> set[int]:
    """The launch groups ``run.toml``'s command belongs to: the one whose dump matches its
    parallel sizes and model; the single launch when the run has one; else none."""
    text = run.config.command
    windows = launch_windows(run.launch_spans)
    if not text or not windows:
        return set()
    if len(windows) == 1:
        return {windows[0]["group"]}
    try:
        flags = parse_launch_command(text)
    except ServerArgsError:
        return set()
    log = run.log
    args_of = {la.index: la.server_args for la in (log.launches if log is not None else [])}
    fits = set()
    for w in windows:
        dumps = [args_of[i] for i in w["members"] if args_of.get(i)]
        if dumps and all(_matches(flags, d) for d in dumps[:1]):
            fits.add(int(w["group"]))
    return fits if len(fits) == 1 else set()


def _matches(flags: dict[str, Any], args: dict[str, Any]) -> bool:
    """Whether the command's parallel sizes and model are the dump's (1 when not given)."""
    for key in _MATCH_KEYS:
        if key == "model_path":
            if key in flags and flags[key] != args.get(key):
                return False
            continue
        if flags.get(key, 1) != (args.get(key) or 1):
            return False
    return True
