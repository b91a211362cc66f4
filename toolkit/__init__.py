"""ppscope: why a parallel layout does not scale, from SGLang logs, GPU traces and benchmarks.

The facade reads like a table of contents:

- ``load_sglang_log``: SGLang server logs → ``events``, ``batches``, ``launches``, ``http``...
- ``open_dataset``: the same tables from a dataset ``ppscope ingest`` wrote (lazy Parquet scans)
- ``load_gpu_trace``, ``load_topology``, ``gpu_roles``: GPU traces, links, GPU → pipeline stage
- ``load_bench``: SGLang/vLLM/GenAI-Perf/AIPerf results and sweep CSVs → ``runs``, ``requests``
- ``load_metrics``: SGLang's Prometheus ``/metrics`` (capture snapshots, ``query_range``) →
  ``samples``; ``stage_wait_share`` each PP stage's measured busy/idle/wait shares per phase
- ``load_run``: a run directory (server log, results, traces, ``run.toml``) as one object
- ``load_profile_trace``, ``load_profile``: PyTorch profiler traces per rank (SGLang
  ``/start_profile``); ``stage_account``, ``stage_summary``: where each PP stage's loop
  iterations go (kernels, transfers, waits, CPU), and the slowest stage, bubble and transfer shares
- ``load_server_requests``: the server's per-request records (metrics export, JSON request log);
  ``request_breakdown``: server-side TTFT split into queueing and prefill, per phase
- ``capture``: record a run directory from a live SGLang server; ``load_phase_marks`` its phases
- ``scaling_table``, ``scaling_gap``, ``crossover``, ``knee``: how each layout scales, and the gap
- ``diagnose``: every hypothesis checked at once, ``Finding`` s ranked with their evidence
- ``slot_occupancy``, ``stage_timeline``, ``config_diff``, ``cuda_graph_coverage``, ``kv_pressure``
- ``fit``, ``predict, ``simulate``, ``what_if``: the PP/TP serving model, expected vs observed
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from toolkit._version import __version__ as __version__

# Each public name and the module it lives in: imported on first use, so ``import toolkit``
# (and every command line) pays only for what it touches.
_HOMES: dict[str, str] = {
    "config_diff": "toolkit.analyze.config",
    "derived_settings": "toolkit.analyze.config",
    "intended_vs_effective": "toolkit.analyze.config",
    "cuda_graph_coverage": "toolkit.analyze.cudagraph",
    "align": "toolkit.analyze.gpu",
    "busy_share": "toolkit.analyze.gpu",
    "downsample": "toolkit.analyze.gpu",
    "oscillation": "toolkit.analyze.gpu",
    "stage_comparison": "toolkit.analyze.gpu",
    "kv_pressure": "toolkit.analyze.kv",
    "INCIDENT": "toolkit.analyze.model",
    "KIMI_K2": "toolkit.analyze.model",
    "Layout": "toolkit.analyze.model",
    "Params": "toolkit.analyze.model",
    "Workload": "toolkit.analyze.model",
    "admission": "toolkit.analyze.model",
    "expected_vs_observed": "toolkit.analyze.model",
    "fit": "toolkit.analyze.model",
    "incident_points": "toolkit.analyze.model",
    "predict": "toolkit.analyze.model",
    "what_if": "toolkit.analyze.model",
    "what_if_table": "toolkit.analyze.model",
    "simulate": "toolkit.analyze.model.sim",
    "occupancy_summary": "toolkit.analyze.occupancy",
    "slot_occupancy": "toolkit.analyze.occupancy",
    "decode_phases": "toolkit.analyze.phases",
    "request_breakdown": "toolkit.analyze.requests",
    "request_timeline": "toolkit.analyze.requests",
    "crossover": "toolkit.analyze.scaling",
    "frontier": "toolkit.analyze.scaling",
    "knee": "toolkit.analyze.scaling",
    "scaling_gap": "toolkit.analyze.scaling",
    "scaling_table": "toolkit.analyze.scaling",
    "stage_account": "toolkit.analyze.stage_account",
    "stage_summary": "toolkit.analyze.stage_account",
    "stage_wait_share": "toolkit.analyze.stage_wait",
    "stage_busy": "toolkit.analyze.stages",
    "stage_cadence": "toolkit.analyze.stages",
    "stage_desync": "toolkit.analyze.stages",
    "stage_timeline": "toolkit.analyze.stages",
    "CaptureOptions": "toolkit.capture",
    "capture": "toolkit.capture",
    "Finding": "toolkit.diagnose",
    "diagnose": "toolkit.diagnose",
    "CaptureError": "toolkit.errors",
    "ConfigError": "toolkit.errors",
    "ParseError": "toolkit.errors",
    "ToolkitError": "toolkit.errors",
    "UnknownFormat": "toolkit.errors",
    "chrome_trace": "toolkit.export",
    "write_chrome_trace": "toolkit.export",
    "BenchResults": "toolkit.load.bench.results",
    "load_bench": "toolkit.load.bench.results",
    "GpuTrace": "toolkit.load.gpu.trace",
    "Topology": "toolkit.load.gpu.trace",
    "gpu_roles": "toolkit.load.gpu.trace",
    "load_compute_apps": "toolkit.load.gpu.trace",
    "load_gpu_list": "toolkit.load.gpu.trace",
    "load_gpu_trace": "toolkit.load.gpu.trace",
    "load_topology": "toolkit.load.gpu.trace",
    "processes_per_gpu": "toolkit.load.gpu.trace",
    "load_phase_marks": "toolkit.load.phase_marks",
    "Metrics": "toolkit.load.prometheus",
    "load_metrics": "toolkit.load.prometheus",
    "load_profile": "toolkit.load.profile",
    "load_profile_trace": "toolkit.load.profile",
    "load_server_requests": "toolkit.load.requests",
    "Run": "toolkit.load.run",
    "load_run": "toolkit.load.run",
    "RunConfig": "toolkit.load.run_config",
    "read_run_config": "toolkit.load.run_config",
    "Launch": "toolkit.load.sglang.log",
    "SGLangLog": "toolkit.load.sglang.log",
    "load_sglang_log": "toolkit.load.sglang.log",
    "open_dataset": "toolkit.load.sglang.log",
}

__all__ = sorted([*_HOMES, "__version__"])


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'toolkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Facade(types.ModuleType):
    """The package module: a subpackage named like a facade function (``toolkit.diagnose``,
    ``toolkit.capture``) never replaces the function when it is first imported."""

    def __setattr__(self, name: str, value: Any) -> None:
        if (
            isinstance(value, types.ModuleType)
            and name in _HOMES
            and _HOMES[name] == value.__name__
        ):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Facade
