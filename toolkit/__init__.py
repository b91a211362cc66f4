"""ppscope: why a parallel layout does not scale, from SGLang logs, GPU traces and benchmarks.

The facade reads like a table of contents:

- ``load_sglang_log``: SGLang server logs → ``events``, ``batches``, ``launches``, ``http``...
- ``open_dataset``: the same tables from a dataset ``ppscope ingest`` wrote (lazy Parquet scans)
- ``load_gpu_trace``, ``load_topology``, ``gpu_roles``: GPU traces, links, GPU → pipeline stage
- ``load_bench``: SGLang/vLLM/GenAI-Perf/AIPerf results and sweep CSVs → ``runs``, ``requests``
- ``load_metrics``: SGLang's Prometheus ``/metrics`` (capture snapshots, ``query_range``) →
  ``samples``; ``stage_wait_share`` each PP stage's measured busy/idle/wait shares per phase
- ``load_run``: a run directory (server log, results, traces, ``run.toml``) as one object
- ``load_server_requests``: the server's per-request records (metrics export, JSON request log);
  ``request_breakdown``: server-side TTFT split into queueing and prefill, per phase
- ``capture``: record a run directory from a live SGLang server; ``load_phase_marks`` its phases
- ``scaling_table``, ``scaling_gap``, ``crossover``, ``knee``: how each layout scales, and the gap
- ``diagnose``: every hypothesis checked at once, ``Finding`` s ranked with their evidence
- ``slot_occupancy``, ``stage_timeline``, ``config_diff``, ``cuda_graph_coverage``, ``kv_pressure``
- ``fit``, ``predict, ``simulate``, ``what_if``: the PP/TP serving model, expected vs observed
"""

from __future__ import annotations

from toolkit._version import __version__
from toolkit.analyze.config import config_diff, derived_settings, intended_vs_effective
from toolkit.analyze.cudagraph import cuda_graph_coverage
from toolkit.analyze.gpu import align, busy_share, downsample, oscillation, stage_comparison
from toolkit.analyze.kv import kv_pressure
from toolkit.analyze.model import (
    INCIDENT,
    KIMI_K2,
    Layout,
    Params,
    Workload,
    admission,
    expected_vs_observed,
    fit,
    incident_points,
    predict,
    what_if,
    what_if_table,
)
from toolkit.analyze.model.sim import simulate
from toolkit.analyze.occupancy import occupancy_summary, slot_occupancy
from toolkit.analyze.phases import decode_phases
from toolkit.analyze.requests import request_breakdown, request_timeline
from toolkit.analyze.scaling import crossover, frontier, knee, scaling_gap, scaling_table
from toolkit.analyze.stage_wait import stage_wait_share
from toolkit.analyze.stages import stage_busy, stage_cadence, stage_desync, stage_timeline
from toolkit.capture import CaptureOptions, capture
from toolkit.diagnose import Finding, diagnose
from toolkit.errors import CaptureError, ConfigError, ParseError, ToolkitError, UnknownFormat
from toolkit.export import chrome_trace, write_chrome_trace
from toolkit.load.bench.results import BenchResults, load_bench
from toolkit.load.gpu.trace import (
    GpuTrace,
    Topology,
    gpu_roles,
    load_compute_apps,
    load_gpu_list,
    load_gpu_trace,
    load_topology,
    processes_per_gpu,
)
from toolkit.load.phase_marks import load_phase_marks
from toolkit.load.prometheus import Metrics, load_metrics
from toolkit.load.requests import load_server_requests
from toolkit.load.run import Run, load_run
from toolkit.load.run_config import RunConfig, read_run_config
from toolkit.load.sglang.log import Launch, SGLangLog, load_sglang_log, open_dataset

__all__ = [
    "INCIDENT",
    "KIMI_K2",
    "BenchResults",
    "CaptureError",
    "CaptureOptions",
    "ConfigError",
    "Finding",
    "GpuTrace",
    "Launch",
    "Layout",
    "Metrics",
    "Params",
    "ParseError",
    "Run",
    "RunConfig",
    "SGLangLog",
    "ToolkitError",
    "Topology",
    "UnknownFormat",
    "Workload",
    "__version__",
    "admission",
    "align",
    "busy_share",
    "capture",
    "chrome_trace",
    "config_diff",
    "crossover",
    "cuda_graph_coverage",
    "decode_phases",
    "derived_settings",
    "diagnose",
    "downsample",
    "expected_vs_observed",
    "fit",
    "frontier",
    "gpu_roles",
    "incident_points",
    "intended_vs_effective",
    "knee",
    "kv_pressure",
    "load_bench",
    "load_compute_apps",
    "load_gpu_list",
    "load_gpu_trace",
    "load_metrics",
    "load_phase_marks",
    "load_run",
    "load_server_requests",
    "load_sglang_log",
    "load_topology",
    "occupancy_summary",
    "open_dataset",
    "oscillation",
    "predict",
    "processes_per_gpu",
    "read_run_config",
    "request_breakdown",
    "request_timeline",
    "scaling_gap",
    "scaling_table",
    "simulate",
    "slot_occupancy",
    "stage_busy",
    "stage_cadence",
    "stage_comparison",
    "stage_desync",
    "stage_timeline",
    "stage_wait_share",
    "what_if",
    "what_if_table",
    "write_chrome_trace",
]
