"""``ppscope timeline``: the stage timeline as Chrome trace JSON, for ui.perfetto.dev.

Each run becomes its own group of processes (a track per pipeline stage, counters for the
queue, KV usage, gen throughput and each GPU's busy %), all on one clock. When the run has
SGLang ``/metrics`` per stage, an ``SGLang /metrics`` process holds a counter per stage and
measure (GPU busy, scheduler idle, each scheduler stage) and ``otherData.stage_wait_share`` holds
``stage_wait_share``'s rows. A run's profiler traces add a group per stage (``PPk profile``: the
loop's ranges and each GPU stream's kernels) on the log's clock, and ``otherData.profile`` says
how each trace was placed.
"""

from __future__ import annotations

import argparse
from typing import Any

from toolkit.analyze.stage_wait import stage_share_series
from toolkit.analyze.timeline import stage_gpu_series
from toolkit.cli.options import add_output, add_quiet, add_run_dirs
from toolkit.cli.output import secrets
from toolkit.cli.runs import damage_status, load_analyses, report_problems
from toolkit.diagnose.measured_stages import run_metrics, stage_shares
from toolkit.errors import ToolkitError
from toolkit.export.perfetto import chrome_trace, merge_chrome_traces, write_chrome_trace
from toolkit.export.profile_tracks import profile_tracks
from toolkit.run_analysis import RunAnalysis

__all__ = ["run_trace"]

NAME = "timeline"
HELP = "write the stage timeline as Chrome trace JSON (open it in ui.perfetto.dev)"
EXAMPLES = """\
examples:
  ppscope timeline runs/pp8 -o pp8-trace.json
  ppscope timeline runs/pp8 runs/pp8-fixed -o both.json
"""
GPU_POINTS = 200_000  # GPU busy samples per run kept in the trace


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_dirs(parser)
    add_output(parser, required=True, what="the trace")
    add_quiet(parser)


def run(args: argparse.Namespace) -> int:
    problems: list[str] = []
    loaded = load_analyses(args.paths, quiet=args.quiet, problems=problems, title="timeline")
    traces = [run_trace(ctx) for ctx in loaded]
    trace = traces[0] if len(traces) == 1 else merge_chrome_traces(traces)
    write_chrome_trace(args.output, trace, secrets())
    counters = sum(1 for e in trace["traceEvents"] if e["ph"] == "C")
    stages = sum(t["otherData"]["stages"] for t in traces)
    print(
        f"{args.output}: {len(trace['traceEvents'])} events, {stages} stage track(s), "
        f"{counters} counter samples; open it in https://ui.perfetto.dev"
    )
    return max(report_problems(problems), damage_status(loaded))


def run_trace(ctx: RunAnalysis) -> dict[str, Any]:
    """The Chrome trace of one run's stage timeline (and GPU busy, when it has a trace)."""
    timeline = ctx.timeline
    if not timeline.height:
        raise ToolkitError(f"{ctx.run.path}: no Prefill/Decode batch lines to put on a timeline")
    gpu = None
    if ctx.gpu_samples is not None:
        gpu = stage_gpu_series(ctx.gpu_samples, ctx.roles, every="100ms", max_points=GPU_POINTS)
    metrics = run_metrics(ctx)
    stages = stage_share_series(metrics.samples) if metrics is not None else None
    trace = chrome_trace(
        timeline, gpu=gpu, label=ctx.label, log_interval=ctx.log_interval, stages=stages
    )
    trace["otherData"]["stages"] = timeline.select("dp", "pp").unique().height
    profiled, placed = profile_tracks(ctx)
    if placed:  # the stages' profiler traces, on the log's clock
        trace["traceEvents"] += profiled
        trace["otherData"]["profile"] = placed
    shares = stage_shares(ctx)
    if shares.height:  # what SGLang's /metrics measured per stage and phase
        trace["otherData"]["stage_wait_share"] = shares.to_dicts()
    return trace
