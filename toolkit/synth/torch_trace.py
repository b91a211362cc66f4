"""Generated PyTorch profiler traces of an SGLang PP server, one file per stage, with the time
each part of every loop iteration took as known truth.

The files follow the Kineto Chrome-trace schema as PyTorch writes it (``schemaVersion``,
``deviceProperties``, ``distributedInfo``, then ``traceEvents`` of complete ``X`` events,
``ac2g`` flows, ``M`` metadata, and ``traceName``/``displayTimeUnit``/``baseTimeNanoseconds``
after the events; ``shape="kineto-2023"`` writes the older shape: absolute integer times, a
bare ``distributedInfo`` and no base time) and SGLang's names (``{id}-TP-0-PP-{k}.trace.json.gz``,
the PP loop's ``record_function`` ranges). They are generated, not recorded.

Each iteration of stage ``k`` (one micro-batch turn) lasts the pipeline's tick: the loop blocks
in ``recv_requests`` for what the slowest stage leaves over, schedules, launches a CUDA graph,
the GPU computes and sends the proxy tensors (a ``SendRecv`` kernel whose span is a wait for
the peer plus the transfer), and the CPU processes the results.
"""

from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

__all__ = ["PipelineProfile", "write_pp_profile"]

_KERNELS = (
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas", 0.3),
    ("void flashinfer::BatchDecodeWithPagedKVCacheKernel<(flashinfer::PosEncodingMode)0>", 0.2),
    ("fused_moe_kernel", 0.5),
)
_SENDRECV = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"


@dataclass(frozen=True)
class PipelineProfile:
    """What the generated stages spend per iteration (ms), and the shape of the files.

    ``wait_ms`` is each stage's wait in its SendRecv kernel per iteration, cycling through the
    values given (a 0 among them: some sends find their peer ready).
    """

    compute_ms: tuple[float, ...] = (8.0, 8.0, 8.0, 8.0)
    tokens: int = 8  # micro-batch size: proxy tensors of tokens × hidden
    hidden: int = 7168
    link_gb_s: float = 20.0
    slow_links: tuple[tuple[int, float], ...] = ()  # (sending stage, GB/s) of slower links
    sched_ms: float = 0.6  # CPU: get_next_batch_to_run
    launch_ms: float = 0.2  # CPU: run_batch before the graph runs
    graph_ms: float = 0.05  # cudaGraphLaunch
    process_ms: float = 0.8  # CPU: process_batch_result, GPU idle
    wait_ms: tuple[float, ...] = (0.0, 0.4, 0.2)
    steps: int = 12
    idle_ms: float = 0.0  # more receive wait per iteration on every stage (empty slots)
    jitter: float = 0.0  # each iteration's kernels vary by up to ± this share (seeded)
    seed: int = 0
    shape: str = "kineto-2.5"  # or "kineto-2023"
    base_ns: int = 1_764_000_000_000_000_000
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pp(self) -> int:
        return len(self.compute_ms)

    @property
    def proxy_bytes(self) -> int:
        return 2 * self.tokens * self.hidden * 2  # hidden_states and residual, bf16

    @property
    def transfer_ms(self) -> float:
        """A transfer over the usual link."""
        return self.transfer_ms_of(-1)

    def transfer_ms_of(self, k: int) -> float:
        """Stage ``k``'s send of the proxy tensors to the next stage."""
        gb_s = dict(self.slow_links).get(k, self.link_gb_s)
        return self.proxy_bytes / (gb_s * 1e9) * 1e3

    def busy_ms(self, k: int) -> float:
        """Stage ``k``'s own time per iteration, waits in recv_requests and SendRecv aside."""
        comm = self.transfer_ms_of(k) + max(self.wait_ms) if k < self.pp - 1 else 0.0
        cpu = self.sched_ms + self.launch_ms + self.process_ms
        return cpu + self.compute_ms[k] * (1 + self.jitter) + comm

    @property
    def tick_ms(self) -> float:
        """The iteration length: the slowest stage's own time plus a minimal receive."""
        return max(self.busy_ms(k) for k in range(self.pp)) + 0.05 + self.idle_ms


def write_pp_profile(
    folder: Path, spec: PipelineProfile, *, profile_id: str = "1764000000.123"
) -> pl.DataFrame:
    """Write one gzipped trace per stage into ``folder``; the truth per stage and iteration
    (``schema.profile.ACCOUNT`` columns without ``phase``/``start_us``/``transfer_basis``)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for k in range(spec.pp):
        events, truth = _stage_events(spec, k)
        rows += truth
        doc = _document(spec, k, events)
        name = f"{profile_id}-TP-0-PP-{k}.trace.json.gz"
        with gzip.open(folder / name, "wt", encoding="utf-8") as f:
            f.write(doc)
    return pl.DataFrame(rows)


def _stage_events(spec: PipelineProfile, k: int) -> tuple[list[dict[str, Any]], list[dict]]:
    pid, tid = 4000 + k, 4000 + k
    t = 1_000.0 if spec.shape != "kineto-2023" else spec.base_ns / 1e3
    tick = spec.tick_ms * 1e3
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_name", "pid": k, "tid": 0, "args": {"name": f"GPU {k}"}},
    ]
    truth = []
    rng = random.Random(spec.seed * 1000 + k)
    corr = 1000 * (k + 1)
    last = k == spec.pp - 1
    for s in range(spec.steps + 1):
        scale = 1 + spec.jitter * (2 * rng.random() - 1)
        wait = spec.wait_ms[s % len(spec.wait_ms)] * 1e3 if not last else 0.0
        transfer = spec.transfer_ms_of(k) * 1e3 if not last else 0.0
        compute = spec.compute_ms[k] * scale * 1e3
        slack = spec.compute_ms[k] * (1 + spec.jitter) * 1e3 - compute
        own = (spec.busy_ms(k) - (max(spec.wait_ms) if not last else 0.0)) * 1e3 + wait - slack
        recv = tick - own
        cpu = t
        _cpu(events, "recv_requests", cpu, recv, pid, tid)
        cpu += recv
        _cpu(events, "get_next_batch_to_run", cpu, spec.sched_ms * 1e3, pid, tid)
        cpu += spec.sched_ms * 1e3
        run_start = cpu
        _cpu(events, "run_batch", cpu, spec.launch_ms * 1e3, pid, tid)
        graph_at = cpu + spec.launch_ms * 1e3 - spec.graph_ms * 1e3
        corr += 1
        events.append(_runtime("cudaGraphLaunch", graph_at, spec.graph_ms * 1e3, pid, tid, corr))
        events.append(_runtime("cudaLaunchKernel", run_start, 5.0, pid, tid, corr + 500))
        cpu += spec.launch_ms * 1e3
        gpu = cpu
        events.append({"ph": "s", "id": corr, "pid": pid, "tid": tid, "ts": graph_at,
                       "cat": "ac2g", "name": "ac2g"})  # fmt: skip
        events.append({"ph": "f", "id": corr, "pid": k, "tid": 7, "ts": gpu,
                       "cat": "ac2g", "name": "ac2g", "bp": "e"})  # fmt: skip
        for name, part in _KERNELS:
            events.append(_kernel(name, gpu, compute * part, k, 7, corr))
            gpu += compute * part
        if not last:
            _cpu(events, "send_proxy_dict_to_next_stage", cpu, 30.0, pid, tid)
            comm = _kernel(_SENDRECV, gpu, wait + transfer, k, 23, corr)
            comm["args"].update(
                {"Collective name": "send", "In msg nelems": spec.proxy_bytes // 2,
                 "Out msg nelems": spec.proxy_bytes // 2, "Group size": 2, "dtype": "BFloat16"}
            )  # fmt: skip
            events.append(comm)
            gpu += wait + transfer
        cpu = max(cpu + 30.0, gpu)
        process = spec.process_ms * 1e3
        _cpu(events, "process_batch_result", cpu, process, pid, tid)
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": pid,
                       "tid": tid, "ts": cpu + 10.0, "dur": 20.0,
                       "args": {"External id": corr}})  # fmt: skip
        if s < spec.steps:
            truth.append(
                {
                    "pp": k,
                    "step": s,
                    "span_ms": tick / 1e3,
                    "compute_ms": compute / 1e3,
                    "comm_ms": (wait + transfer) / 1e3,
                    "transfer_ms": transfer / 1e3,
                    "wait_ms": wait / 1e3,
                    "idle_cpu_ms": (tick - recv - compute - wait - transfer) / 1e3,
                    "idle_recv_ms": recv / 1e3,
                    "idle_other_ms": 0.0,
                    "graph_launch_ms": spec.graph_ms,
                    "graph_launches": 1,
                    "comm_bytes": spec.proxy_bytes if not last else None,
                }
            )
        t += tick
    if spec.shape == "kineto-2023":
        for e in events:
            if "ts" in e:
                e["ts"] = round(e["ts"])
            if "dur" in e:
                e["dur"] = round(e["dur"])
    return events, truth


def _cpu(events: list, name: str, ts: float, dur: float, pid: int, tid: int) -> None:
    events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": pid, "tid": tid,
                   "ts": ts, "dur": dur, "args": {"External id": len(events)}})  # fmt: skip


def _runtime(name: str, ts: float, dur: float, pid: int, tid: int, corr: int) -> dict[str, Any]:
    args = {"External id": corr, "cbid": 311, "correlation": corr}
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": ts,
            "dur": dur, "args": args}  # fmt: skip


def _kernel(name: str, ts: float, dur: float, device: int, stream: int, corr: int) -> dict:
    return {
        "ph": "X", "cat": "kernel", "name": name, "pid": device, "tid": stream, "ts": ts,
        "dur": dur,
        "args": {"External id": corr, "queued": 0, "device": device, "context": 1,
                 "stream": stream, "correlation": corr, "registers per thread": 128,
                 "grid": [132, 1, 1], "block": [256, 1, 1]},
    }  # fmt: skip


def _document(spec: PipelineProfile, k: int, events: list[dict[str, Any]]) -> str:
    """The file's text, laid out as Kineto writes it: header keys, one event per block."""
    device = {"id": k, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
              "computeMajor": 9, "computeMinor": 0, "numSms": 132}  # fmt: skip
    if spec.shape == "kineto-2023":
        dist: dict[str, Any] = {"rank": k}
    else:
        dist = {"backend": "nccl", "rank": k, "world_size": spec.pp, "pg_count": 2,
                "pg_config": [{"pg_name": "0", "pg_desc": "default_pg",
                               "backend_config": "cuda:nccl", "pg_size": spec.pp,
                               "ranks": list(range(spec.pp))}],
                "nccl_version": "2.21.5"}  # fmt: skip
    head = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    '
        + json.dumps(device)
        + '\n  ],\n  "distributedInfo": '
        + json.dumps(dist)
        + ',\n  "traceEvents": [\n'
    )
    body = ",\n".join("  " + json.dumps(e, indent=None) for e in events)
    end = spec.base_ns / 1e3 if spec.shape == "kineto-2023" else 0.0
    window = {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "",
              "ts": end + 10 * spec.tick_ms * 1e3 * (spec.steps + 2)}  # fmt: skip
    tail = f',\n  {json.dumps(window)}\n  ],\n  "traceName": "trace-pp{k}.json"'
    if spec.shape != "kineto-2023":
        tail += f',\n  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {spec.base_ns}'
    return head + body + tail + "\n}\n"
