"""What each check needs from a run, and which checks a run's inputs could not support.

A rule that lacks an input returns no finding, which must not read as "clear": ``skipped`` lists
each check that found nothing on a run for want of an input it needs to clear it, the input it
lacked, and how to supply it. A check that reported a finding ran, whatever else it lacked: it
is never listed as skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from toolkit.run_analysis import RunAnalysis

__all__ = ["INPUTS", "NEEDS", "Input", "skipped"]


@dataclass(frozen=True)
class Input:
    """One kind of input a check may need: how to tell whether a run has it, and how to add it."""

    name: str
    present: Callable[[RunAnalysis], bool]
    supply: str
    why: Callable[[RunAnalysis], str | None] | None = None  # a run's own reason, before supply


def _damaged(ctx: RunAnalysis, what: str) -> str | None:
    """Why a run that holds the input has none of it: its files could not be read (never the
    advice to add what is there)."""
    errors = ctx.run.found.get(what) or []
    if not errors:
        return None
    return f"the run holds {what} that could not be read ({errors[0]}): repair or re-record it"


def _has_decode(ctx: RunAnalysis) -> bool:
    return bool(ctx.batches.filter(pl.col("kind") == "decode").height)


def _has_graph_flag(ctx: RunAnalysis) -> bool:
    decode = ctx.batches.filter(pl.col("kind") == "decode")
    return bool(decode.height) and decode["cuda_graph"].null_count() < decode.height


def _has_stage_times(ctx: RunAnalysis) -> bool:
    return _has_gpu_time(ctx) or bool(ctx.busy.height) or ctx.model.known


def _has_gpu_time(ctx: RunAnalysis) -> bool:
    """A GPU trace, or profiler traces of the stages (they measure idle time too)."""
    return ctx.gpu_samples is not None or ctx.stage_account is not None


INPUTS: dict[str, Input] = {
    i.name: i
    for i in (
        Input(
            "server log",
            lambda ctx: ctx.run.log is not None,
            "add the SGLang server log (journalctl -u UNIT, docker logs -t NAME, or the file)",
        ),
        Input(
            "decode lines",
            _has_decode,
            "keep the `Decode batch` lines: log at INFO level, as the benchmark ran",
        ),
        Input(
            "ServerArgs dump",
            lambda ctx: bool(ctx.server_args),
            "log the server start (the `server_args=` line comes first; `ppscope capture "
            "--from-start` keeps it)",
        ),
        Input(
            "launch settings",
            lambda ctx: (
                ctx.run.layout.layout_from in ("ServerArgs", "launch command", "/server_info")
            ),
            "log the server start (`ppscope capture --from-start` keeps it: the `server_args=` "
            "line comes first), record `/server_info` beside the log (capture does), or add "
            '`command = "python -m sglang.launch_server ..."` to run.toml',
            lambda ctx: _damaged(ctx, "server info"),
        ),
        Input(
            "launch command",
            lambda ctx: ctx.command is not None,
            'add `command = "python -m sglang.launch_server ..."` to run.toml',
        ),
        Input(
            "benchmark results",
            lambda ctx: ctx.bench is not None,
            "add the `sglang.bench_serving --output-file` JSONL (or its printed result block)",
            lambda ctx: _damaged(ctx, "benchmark results"),
        ),
        Input(
            "GPU trace",
            _has_gpu_time,
            "record `nvidia-smi --query-gpu=timestamp,index,utilization.gpu,power.draw "
            "--format=csv -lms 100` (or dcgmi dmon) while the benchmark runs, or profile the "
            "stages (ppscope capture --profile STEPS)",
            lambda ctx: ctx.clock_problem("GPU trace"),
        ),
        Input(
            "process listing",
            lambda ctx: ctx.run.compute_apps is not None,
            "record `nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,process_name,"
            "used_memory --format=csv` while the benchmark runs, with `nvidia-smi -L` (or a "
            "GPU trace with uuid) to map its GPUs to indices",
        ),
        Input(
            "stage times",
            _has_stage_times,
            "a GPU trace, SGLang's /metrics with per-rank device time "
            "(SGLANG_ENABLE_METRICS_DEVICE_TIMER), SGLang ≥ 0.5.16's `fwd occupancy` in the "
            "decode lines, or the model's config.json (its layer split)",
            lambda ctx: _damaged(ctx, "metrics") or ctx.clock_problem("GPU trace", "metrics"),
        ),
        Input(
            "model architecture",
            lambda ctx: ctx.model.known,
            "place the model's config.json in the run directory, or set `model` in run.toml "
            "to a known id",
        ),
        Input(
            "CUDA-graph flag",
            _has_graph_flag,
            "SGLang ≥ 0.4.6 prints `cuda graph: True/False` on decode lines",
        ),
    )
}
"""Input name → how to tell whether a run has it, and how to supply it."""

NEEDS: dict[str, tuple[str, ...]] = {
    "input-mismatch": (),
    "server-restart": ("server log",),
    "config-not-applied": ("launch command", "ServerArgs dump"),
    "stage-desync": ("decode lines",),
    "pp-underfilled-slots": ("decode lines", "launch settings"),
    "running-cap": ("decode lines",),
    "kv-cache-pressure": ("server log",),
    "cuda-graph-miss": ("CUDA-graph flag",),
    "foreign-gpu-process": ("process listing",),
    "stage-imbalance": ("decode lines", "stage times"),
    "gpu-idle-bubbles": ("GPU trace", "decode lines"),
    "prefill-interference": ("decode lines",),
    "scaling-collapse": ("benchmark results",),
    "queue-backlog": ("decode lines",),
    "pp-empty-async-slots": ("decode lines", "launch settings"),
    "pp-low-concurrency": ("decode lines",),
    "pp-lockstep-logging": ("decode lines",),
    # To clear a run it takes both ways: the serving model (the architecture, calibrated on the
    # benchmark's single-stream results) for kernels slower than the layout explains, the GPU
    # trace for idle the model does not predict. Either alone can name a gap, and a check that
    # named one ran.
    "unexplained-slowdown": (
        "decode lines",
        "model architecture",
        "benchmark results",
        "GPU trace",
    ),
}
"""Check id → the inputs it needs to clear a run; a check with one missing that found nothing
is skipped on that run."""


def skipped(ctx: RunAnalysis, checks: tuple[str, ...]) -> list[dict[str, str]]:
    """The checks of ``checks`` this run could not support: ``run``, ``check``, the first
    ``missing`` input, and how to ``supply`` it. A check among ``ctx.found`` (the findings
    ``diagnose`` made on the run) ran, and is not listed."""
    ran = {f.id for f in ctx.found}
    out = []
    for check in checks:
        if check in ran:
            continue
        for name in NEEDS.get(check, ()):
            need = INPUTS[name]
            if not need.present(ctx):
                supply = (need.why(ctx) if need.why is not None else None) or need.supply
                out.append({"run": ctx.label, "check": check, "missing": name, "supply": supply})
                break
    return out
