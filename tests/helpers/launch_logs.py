"""SGLang server logs of one or more launches, in the shapes SGLang 0.5 prints: a launch command
line, the ``server_args=`` dump, each stage's startup lines, lock-step decode lines, and a
crash's traceback; optionally under journald (``May 12 10:14:03 host python3[pid]: ...``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Launch:
    """One server start: when, its layout and model, what it printed."""

    start: datetime
    pp: int = 4
    tp: int = 1
    depth: int = 0
    model: str = "Qwen/Qwen2.5-7B-Instruct"
    mrr: int = 256
    decode_lines: int = 20
    running: int = 8
    command: str | None = None  # the launch_server line printed before the dump
    dump: bool = True
    crash: str | None = None  # the exception line of a traceback printed after the decode lines


def command_for(launch: Launch) -> str:
    """The ``python -m sglang.launch_server ...`` command that asks for ``launch``'s settings."""
    flags = f"--model-path {launch.model} --tp-size {launch.tp} --pp-size {launch.pp}"
    if launch.depth:
        flags += f" --pp-async-batch-depth {launch.depth}"
    return f"python -m sglang.launch_server {flags} --max-running-requests {launch.mrr}"


def launch_lines(launch: Launch) -> list[tuple[datetime, str]]:
    """(time, line without wrapper) of one launch, in the order the server prints them."""
    t0 = launch.start

    def at(s: float, tag: str = "") -> tuple[datetime, str]:
        ts = t0 + timedelta(seconds=s)
        return ts, f"[{ts:%Y-%m-%d %H:%M:%S}{tag}]"

    stages = [
        f" PP{p}" if launch.pp > 1 else (" TP0" if launch.tp > 1 else "") for p in range(launch.pp)
    ]
    out: list[tuple[datetime, str]] = []
    if launch.command:
        out.append((t0, launch.command))
    if launch.dump:
        ts, stamp = at(0)
        args = (
            f"model_path='{launch.model}', tp_size={launch.tp}, pp_size={launch.pp}, "
            f"max_running_requests={launch.mrr}, pp_async_batch_depth={launch.depth}, "
            "chunked_prefill_size=8192, decode_log_interval=40"
        )
        out.append((ts, f"{stamp} server_args=ServerArgs({args})"))
    for tag in stages:
        ts, stamp = at(5, tag)
        out.append((ts, f"{stamp} Init torch distributed begin."))
        ts, stamp = at(10, tag)
        out.append((ts, f"{stamp} Load weight begin. avail mem=78.12 GB"))
    for tag in stages:
        ts, stamp = at(30, tag)
        out.append(
            (
                ts,
                f"{stamp} max_total_num_tokens=500000, chunked_prefill_size=8192, "
                f"max_prefill_tokens=16384, max_running_requests={launch.mrr}, "
                "context_len=32768, available_gpu_mem=12.10 GB",
            )
        )
    ts, stamp = at(31)
    out.append((ts, f"{stamp} The server is fired up and ready to roll!"))
    for i in range(launch.decode_lines):
        for tag in stages:
            ts, stamp = at(60 + 2 * i, tag)
            tokens = launch.running * (100 + 2 * i)
            out.append(
                (
                    ts,
                    f"{stamp} Decode batch, #running-req: {launch.running}, #token: {tokens}, "
                    "token usage: 0.01, cuda graph: True, gen throughput (token/s): 120.00, "
                    "#queue-req: 0",
                )
            )
    if launch.crash:
        ts, stamp = at(60 + 2 * launch.decode_lines + 1, stages[0])
        out += [
            (ts, f"{stamp} Scheduler hit an exception: Traceback (most recent call last):"),
            (ts, '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2530, in run'),
            (ts, "    self.event_loop_pp()"),
            (ts, launch.crash),
        ]
        ts, stamp = at(60 + 2 * launch.decode_lines + 2)
        out.append(
            (
                ts,
                f"{stamp} Received sigquit from a child process. It usually means the child "
                "failed.",
            )
        )
    return out


def log_text(*launches: Launch, host: str | None = None, pids: list[int] | None = None) -> str:
    """The log of ``launches`` in order; under journald with ``host`` (one process id per
    launch from ``pids``)."""
    lines = []
    for k, launch in enumerate(launches):
        for ts, line in launch_lines(launch):
            if host is not None:
                pid = (pids or [4000 + k for k in range(len(launches))])[k]
                line = f"{ts:%b %d %H:%M:%S} {host} python3[{pid}]: {line}"
            lines.append(line)
    return "\n".join(lines) + "\n"


def bench_jsonl(start: datetime, concurrencies: list[int]) -> str:
    """``sglang.bench_serving --output-file`` lines, each stamped with its ``date`` (as vLLM's
    runner writes it), one per concurrency, a minute apart from ``start``."""
    rows = []
    for i, c in enumerate(concurrencies):
        when = start + timedelta(minutes=i)
        rows.append(
            {
                "backend": "vllm",
                "date": f"{when:%Y%m%d-%H%M%S}",
                "max_concurrency": c,
                "num_prompts": 4 * c,
                "completed": 4 * c,
                "duration": 30.0,
                "total_input_tokens": 4000 * c,
                "total_output_tokens": 1000 * c,
                "request_throughput": 0.1 * c,
                "output_throughput": 30.0 * c,
                "mean_tpot_ms": 30.0,
                "median_tpot_ms": 30.0,
            }
        )
    return "".join(json.dumps(r) + "\n" for r in rows)
