"""How the measurements were recorded: GPU trace shapes and the benchmark's printed result block.

GPU traces are written from one list of samples (``Sample``: when, and per GPU its busy share,
memory and power), so the three shapes carry the same numbers:

* ``smi``: ``nvidia-smi --query-gpu=timestamp,index,name[,uuid],utilization.gpu,memory.used,
  power.draw --format=csv -lms N`` (the family's default);
* ``smi-dmon``: ``nvidia-smi dmon -s pum -o DT`` (1 s resolution, date and time columns, no
  GPU name);
* ``dcgmi``: ``dcgmi dmon -e 203,1001,1002,155,252 -d N`` (no time at all: the first block is
  all ``N/A``; SM active is a ratio, 0.9 of the busy share while kernels run).

Formats as in ``gpu-trace-formats.md`` §1–3. The printed benchmark block follows
``sglang-log-formats.md`` §5.1 (labels padded to 40, values to 10, rows by version).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

__all__ = ["GPU_FORMATS", "Gpu", "Sample", "bench_block", "gpu_text"]

GPU_FORMATS: dict[str, str] = {
    "smi": "nvidia-smi --query-gpu CSV (timestamp, index, name, utilization, memory, power)",
    "smi-dmon": "nvidia-smi dmon -s pum -o DT (1 s resolution, no GPU name)",
    "dcgmi": "dcgmi dmon -e 203,1001,1002,155,252 (GPUTL GRACT SMACT POWER FBUSD, no timestamps)",
}
"""GPU trace shape → what it is."""

SM_ACTIVE_PER_BUSY = 0.9  # SM active cycles while a decode kernel runs, as a share of its time


@dataclass(frozen=True)
class Gpu:
    index: int
    stage: int
    mem_mib: int
    uuid: str


@dataclass(frozen=True)
class Sample:
    """One polling round: ``t`` ms after the launch on the trace's clock, per GPU (busy, W)."""

    t: float
    values: tuple[tuple[float, float], ...]


def gpu_text(
    fmt: str,
    epoch: datetime,
    gpus: Sequence[Gpu],
    samples: Iterable[Sample],
    name: str,
    multi: bool,
) -> str:
    """The trace of ``gpus`` in shape ``fmt`` (``GPU_FORMATS``); ``multi`` adds the uuid column
    to the nvidia-smi CSV (one file per node of a multi-node run)."""
    if fmt == "smi":
        return _smi(epoch, gpus, samples, name, multi)
    if fmt == "smi-dmon":
        return _dmon(epoch, gpus, samples)
    if fmt == "dcgmi":
        return _dcgmi(gpus, samples)
    raise KeyError(f"no GPU format {fmt!r}; known: {', '.join(GPU_FORMATS)}")


def _smi(
    epoch: datetime, gpus: Sequence[Gpu], samples: Iterable[Sample], name: str, multi: bool
) -> str:
    head = "timestamp, index, name, " + ("uuid, " if multi else "")
    lines = [head + "utilization.gpu [%], memory.used [MiB], power.draw [W]"]
    for s in samples:
        when = epoch + timedelta(milliseconds=s.t)
        stamp, ms = when.strftime("%Y/%m/%d %H:%M:%S."), when.microsecond // 1000
        for n, (gpu, (busy, power)) in enumerate(zip(gpus, s.values, strict=True)):
            ts = f"{stamp}{ms + n // 3:03d}"  # rows of one sample a few ms apart
            cells = [ts, str(gpu.index), name] + ([gpu.uuid] if multi else [])
            cells += [f"{round(100 * busy)} %", f"{gpu.mem_mib} MiB", f"{power:.2f} W"]
            lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def _dmon(epoch: datetime, gpus: Sequence[Gpu], samples: Iterable[Sample]) -> str:
    cols = ["gpu", "pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "fb"]
    cols += ["bar1", "ccpm"]
    units = ["Idx", "W", "C", "C", "%", "%", "%", "%", "%", "%", "MB", "MB", "MB"]
    lines = [
        "#Date       Time      " + "".join(f"{c:>7}" for c in cols) + " ",
        "#YYYYMMDD   HH:MM:SS  " + "".join(f"{u:>7}" for u in units) + " ",
    ]
    for s in samples:
        when = epoch + timedelta(milliseconds=s.t)
        for gpu, (busy, power) in zip(gpus, s.values, strict=True):
            util = round(100 * busy)
            cells = [gpu.index, round(power), 31 + round(40 * busy), 38 + round(30 * busy)]
            cells += [util, round(0.6 * util), 0, 0, 0, 0, gpu.mem_mib, 5, 0]
            lines.append(
                f" {when:%Y%m%d}   {when:%H:%M:%S}  " + "".join(f"{c:>7}" for c in cells) + " "
            )
    return "\n".join(lines) + "\n"


def _dcgmi(gpus: Sequence[Gpu], samples: Iterable[Sample]) -> str:
    names = ["GPUTL", "GRACT", "SMACT", "POWER", "FBUSD"]
    lines = ["#Entity    " + "".join(f"{n:<13}" for n in names).rstrip(), "ID"]
    for k, s in enumerate(samples):
        for gpu, (busy, power) in zip(gpus, s.values, strict=True):
            if k == 0:  # dcgmi's first block: nothing watched yet
                cells = ["N/A"] * len(names)
            else:
                cells = [
                    str(round(100 * busy)),
                    f"{busy:.3f}",
                    f"{busy * SM_ACTIVE_PER_BUSY:.3f}",
                    f"{power:.3f}",
                    str(gpu.mem_mib),
                ]
            lines.append(f"{f'GPU {gpu.index}':<11}" + "".join(f"{c:<13}" for c in cells).rstrip())
    return "\n".join(lines) + "\n"


# -- the benchmark's printed result ---------------------------------------------------------------


def _row(label: str, value: Any) -> str:
    if isinstance(value, float):
        return f"{label:<40} {value:<10.2f}"
    return f"{label:<40} {value:<10}"


def bench_block(v: tuple[int, ...], rec: dict[str, Any]) -> list[str]:
    """The ``Serving Benchmark Result`` block ``bench_serving`` prints for one result ``rec``
    (the JSONL record of the same run), with the rows of version ``v``."""
    out = ["", "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=")]
    out.append(_row("Backend:", rec["backend"]))
    rate = rec["request_rate"]
    out.append(_row("Traffic request rate:", "inf" if math.isinf(rate) else rate))
    out.append(_row("Max request concurrency:", rec["max_concurrency"]))
    out.append(_row("Successful requests:", rec["completed"]))
    out.append(_row("Benchmark duration (s):", rec["duration"]))
    out.append(_row("Total input tokens:", rec["total_input_tokens"]))
    if v >= (0, 5, 5):
        out.append(_row("Total input text tokens:", rec["total_input_tokens"]))
    if (0, 5, 5) <= v < (0, 5, 23):
        out.append(_row("Total input vision tokens:", 0))
    out.append(_row("Total generated tokens:", rec["total_output_tokens"]))
    out.append(_row("Total generated tokens (retokenized):", rec["total_output_tokens"]))
    out.append(_row("Request throughput (req/s):", rec["request_throughput"]))
    out.append(_row("Input token throughput (tok/s):", rec["input_throughput"]))
    out.append(_row("Output token throughput (tok/s):", rec["output_throughput"]))
    if v >= (0, 5, 10):
        out.append(_row("Peak output token throughput (tok/s):", rec["max_output_tokens_per_s"]))
        out.append(_row("Peak concurrent requests:", rec["max_concurrent_requests"]))
    total = rec["input_throughput"] + rec["output_throughput"]
    out.append(_row("Total token throughput (tok/s):", total))
    out.append(_row("Concurrency:", rec["concurrency"]))
    out.append("{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"))
    out.append(_row("Mean E2E Latency (ms):", rec["mean_e2e_latency_ms"]))
    out.append(_row("Median E2E Latency (ms):", rec["median_e2e_latency_ms"]))
    for p in (90, 95, 99):
        if f"p{p}_e2e_latency_ms" in rec:
            out.append(_row(f"P{p} E2E Latency (ms):", rec[f"p{p}_e2e_latency_ms"]))
    out.append("{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"))
    out.append(_row("Mean TTFT (ms):", rec["mean_ttft_ms"]))
    out.append(_row("Median TTFT (ms):", rec["median_ttft_ms"]))
    for p in (90, 95, 99):
        if f"p{p}_ttft_ms" in rec:
            out.append(_row(f"P{p} TTFT (ms):", rec[f"p{p}_ttft_ms"]))
    if not (0, 4, 6) <= v <= (0, 5, 5):  # those versions print no TPOT section
        out.append("{s:{c}^{n}}".format(s="Time per Output Token (excl. 1st token)", n=50, c="-"))
        out.append(_row("Mean TPOT (ms):", rec["mean_tpot_ms"]))
        out.append(_row("Median TPOT (ms):", rec["median_tpot_ms"]))
        for p in (90, 95, 99):
            if f"p{p}_tpot_ms" in rec:
                out.append(_row(f"P{p} TPOT (ms):", rec[f"p{p}_tpot_ms"]))
    out.append("{s:{c}^{n}}".format(s="Inter-Token Latency", n=50, c="-"))
    out.append(_row("Mean ITL (ms):", rec["mean_itl_ms"]))
    out.append(_row("Median ITL (ms):", rec["median_itl_ms"]))
    for p in (90, 95, 99):
        if f"p{p}_itl_ms" in rec:
            out.append(_row(f"P{p} ITL (ms):", rec[f"p{p}_itl_ms"]))
    out.append("=" * 50)
    return out
