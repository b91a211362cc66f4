"""``gpu.csv``: ``nvidia-smi --query-gpu=... --format=csv -lms 100`` over the benchmark sweep.

One nvidia-smi process runs from just before the first benchmark to just after the last one:
one header, then a row per GPU every ≈ 100 ms. ``utilization.gpu`` is what the driver reports:
the share of its last sampling window (1/6 s on this class of GPU) in which a kernel ran, taken
from the simulated forwards of the GPU's stage (a stage's TP ranks share its timeline; under TP
the all-reduces are inside the forward, so they count as busy, as NCCL kernels do). Power,
memory activity, clocks and temperature follow the utilization; memory used is the static pool.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from pathlib import Path

from toolkit.analyze.model import Layout
from toolkit.synth.clock import smi_ts
from toolkit.synth.machine import gpu_memory
from toolkit.synth.phases import Phase

__all__ = [
    "APPS_HEADER",
    "GPU_NAME",
    "HEADER",
    "QUERY",
    "SAMPLE_S",
    "compute_apps_lines",
    "gpu_csv_lines",
    "write_gpu_csv",
]

QUERY = (
    "timestamp,index,name,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,"
    "power.draw,clocks.sm,temperature.gpu"
)
# The header prints canonical names with units: clocks.sm comes out as clocks.current.sm.
HEADER = (
    "timestamp, index, name, uuid, utilization.gpu [%], utilization.memory [%], "
    "memory.used [MiB], memory.total [MiB], power.draw [W], clocks.current.sm [MHz], "
    "temperature.gpu"
)
GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
MEMORY_TOTAL_MIB = 97887
SAMPLE_S = 0.1
WINDOW_S = 1 / 6  # the driver's utilization window
APPS_HEADER = "timestamp, gpu_uuid, gpu_bus_id, pid, process_name, used_gpu_memory [MiB]"
_CONTEXT_MIB = 512  # memory.used counts the driver's own context too; a process's share does not
MARGIN_S = 1.0  # nvidia-smi starts a little before the first run and stops after the last


class _Busy:
    """Busy time of one GPU stream in any interval, from its (sorted, disjoint) forwards."""

    def __init__(self, spans: list[tuple[float, float]]) -> None:
        spans.sort()
        self.starts = [a for a, _ in spans]
        self.ends = [b for _, b in spans]
        self.cum = [0.0]
        for a, b in spans:
            self.cum.append(self.cum[-1] + (b - a))

    def share(self, lo: float, hi: float) -> float:
        i = bisect.bisect_right(self.ends, lo)  # first span ending after lo
        j = bisect.bisect_left(self.starts, hi)  # spans starting before hi
        if j <= i:
            return 0.0
        busy = self.cum[j] - self.cum[i]
        busy -= max(0.0, lo - self.starts[i])  # clip the first span
        busy -= max(0.0, self.ends[j - 1] - hi)  # and the last
        return max(0.0, min(1.0, busy / (hi - lo)))


def _uuid(rng: random.Random) -> str:
    h = f"{rng.getrandbits(128):032x}"
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _machine(layout: Layout, seed: int) -> tuple[random.Random, list[str]]:
    """The random stream of a run's GPUs, after drawing their UUIDs (index order)."""
    rng = random.Random(f"gpu-{seed}-{layout.tp}-{layout.pp}")
    return rng, [_uuid(rng) for _ in range(layout.tp * layout.pp)]


def gpu_csv_lines(layout: Layout, phases: Sequence[Phase], seed: int) -> list[str]:
    """The header and every sample row, GPU index order within a sample."""
    rng, uuids = _machine(layout, seed)
    gpus = len(uuids)
    memory = gpu_memory(layout)
    used = [memory[g // layout.tp].used_mib + rng.randrange(-40, 41) for g in range(gpus)]
    spans: list[list[tuple[float, float]]] = [[] for _ in range(layout.pp)]
    for phase in phases:
        for rank, a, b in phase.forwards().select("pp_rank", "start_s", "end_s").iter_rows():
            spans[rank].append((a, b))
    busy = [_Busy(s) for s in spans]
    # TP ranks spend part of every "busy" step waiting in all-reduces: less power per % busy.
    watts_per_pct = 2.2 if layout.tp > 1 else 3.1
    mem_share = 0.45 if layout.tp > 1 else 0.7
    idle_w = [round(rng.uniform(78.0, 92.0), 1) for _ in range(gpus)]
    temp = [rng.uniform(33.0, 37.0) for _ in range(gpus)]
    t0 = phases[0].start_s - MARGIN_S
    end = phases[-1].end_s + MARGIN_S
    lines = [HEADER]
    n = 0
    while True:
        t = t0 + n * SAMPLE_S + rng.uniform(-0.002, 0.002)
        if t > end:
            break
        for g in range(gpus):
            ts = t + 0.0004 * g  # each GPU is queried in turn
            util = round(100 * busy[g // layout.tp].share(ts - WINDOW_S, ts))
            power = idle_w[g] + watts_per_pct * util + rng.uniform(-3.0, 3.0)
            # First-order lag towards a power-dependent temperature (τ ≈ 40 s).
            temp[g] += (30.0 + 0.11 * power - temp[g]) * (SAMPLE_S / 40.0)
            clock = 2100 if util == 0 else 2475 - round(0.6 * util) + rng.randrange(-15, 16)
            lines.append(
                f"{smi_ts(ts)}, {g}, {GPU_NAME}, {uuids[g]}, {util} %, "
                f"{round(util * mem_share)} %, {used[g]} MiB, {MEMORY_TOTAL_MIB} MiB, "
                f"{power:.2f} W, {clock} MHz, {round(temp[g])}"
            )
        n += 1
    return lines


def compute_apps_lines(
    layout: Layout, schedulers: Sequence[int], phases: Sequence[Phase], seed: int
) -> list[str]:
    """``nvidia-smi --query-compute-apps=timestamp,gpu_uuid,gpu_bus_id,pid,process_name,
    used_memory --format=csv`` as the first benchmark starts: one scheduler per GPU (PP-major
    pids, GPU ``pp × tp + tp_rank``), titled as SGLang titles it, holding its static pool."""
    _, uuids = _machine(layout, seed)
    memory = gpu_memory(layout)
    at = smi_ts(phases[0].start_s)
    lines = [APPS_HEADER]
    for g, (uuid, pid) in enumerate(zip(uuids, schedulers, strict=True)):
        stage, rank = divmod(g, layout.tp)
        title = "sglang::scheduler"
        title += f"_TP{rank}" if layout.tp > 1 else ""
        title += f"_PP{stage}" if layout.pp > 1 else ""
        used = memory[stage].used_mib - _CONTEXT_MIB
        lines.append(
            f"{at}, {uuid}, 00000000:{0x18 + 0x10 * g:02X}:00.0, {pid}, {title}, {used} MiB"
        )
    return lines


def write_gpu_csv(path: Path, lines: Sequence[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
