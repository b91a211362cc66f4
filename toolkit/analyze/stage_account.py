"""Where each pipeline stage's time goes, per scheduler-loop iteration, from its profiler trace.

An iteration of SGLang's PP loop starts with its ``recv_requests`` range (SGLang ≥ 0.5.7 marks
the loop with ``torch.profiler.record_function`` ranges); without those ranges, ``run_batch``
starts one, and without either the trace is one iteration. Each iteration's time is split on
the GPU side, every instant counted once:

* ``compute_ms``: any kernel, copy or set other than communication runs (on any stream);
* ``comm_ms``: only communication kernels run (NCCL ``SendRecv``, collectives). A SendRecv
  kernel's span holds the wait for its peer and the transfer: ``transfer_ms`` is
  ``bytes / bandwidth`` when both are known (modelled, the bandwidth's source named), else the
  shortest communication kernel of the same size and name on the stage (one that found its
  peer ready: measured); ``wait_ms`` is the rest;
* idle: nothing runs on the GPU. ``idle_recv_ms`` while the loop thread blocks in a receive
  (``recv_*`` ranges: waiting for the stage before), ``idle_cpu_ms`` while it is in another
  range (scheduling, launching, processing results), ``idle_other_ms`` outside every range.

``graph_launch_ms`` is CPU time in ``cudaGraphLaunch``, counted beside the split. One trace per
stage is used (its lowest TP rank: every TP rank of a stage runs the same loop).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit.load.profile import Profile, ProfileTrace
from toolkit.schema.profile import ACCOUNT

__all__ = [
    "DTYPE_BYTES",
    "StageSummary",
    "profile_phase",
    "round_waterfall",
    "stage_account",
    "stage_summary",
    "stage_totals",
]

DTYPE_BYTES: dict[str, int] = {
    "Float": 4,
    "Double": 8,
    "Half": 2,
    "BFloat16": 2,
    "Float8_e4m3fn": 1,
    "Float8_e5m2": 1,
    "Int": 4,
    "Long": 8,
    "Short": 2,
    "Char": 1,
    "Byte": 1,
    "Bool": 1,
}
"""Bytes per element of the ``dtype`` names PyTorch writes in communication arguments."""
COMM_PREFIXES = ("nccl", "Nccl", "rccl")
STEP_RANGES = ("recv_requests", "run_batch")
RECV_PREFIX = "recv"
_GPU = ("kernel", "gpu_memcpy", "gpu_memset")
_FOLDER_LOAD = re.compile(r"(?:^|[-_])c(\d+)$")


def profile_phase(name: str | None, phases: pl.DataFrame) -> int | None:
    """The phase of ``phases`` a profile folder names: ``…-c32`` (as ``ppscope capture
    --profile`` names them) is the phase at 32 concurrent requests, a bare number a phase's
    index; None otherwise."""
    if not name or not phases.height:
        return None
    m = _FOLDER_LOAD.search(name)
    if m is not None and "offered" in phases.columns:
        hits = phases.filter(pl.col("offered") == int(m.group(1)))
        return int(hits["phase"][0]) if hits.height else None
    if name.isdigit():
        hits = phases.filter(pl.col("phase") == int(name))
        return int(name) if hits.height else None
    return None


def stage_account(
    profile: Profile,
    *,
    bandwidth_gb_s: float | None = None,
    bandwidth_source: str = "",
) -> pl.DataFrame:
    """One row per stage and loop iteration (``ACCOUNT``), over every phase of ``profile``.

    Parameters
    ----------
    bandwidth_gb_s
        Stage-to-stage link bandwidth (GB/s) to model transfers with; None measures them.
    bandwidth_source
        Where the bandwidth comes from, for ``transfer_basis``.
    """
    chosen: dict[tuple[str | None, int], ProfileTrace] = {}
    for trace, phase in zip(profile.traces, profile.phases, strict=True):
        pp = trace.pp if trace.pp is not None else (trace.rank or 0)
        key = (phase, pp)
        if key not in chosen or (trace.tp or 0) < (chosen[key].tp or 0):
            chosen[key] = trace
    frames = [
        _account(trace, phase, pp, bandwidth_gb_s, bandwidth_source)
        for (phase, pp), trace in sorted(chosen.items(), key=lambda kv: (str(kv[0][0]), kv[0][1]))
    ]
    frames = [f for f in frames if f.height]
    return pl.concat(frames) if frames else pl.DataFrame(schema=ACCOUNT)


def _merged(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted disjoint ``(starts, ends)``."""
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], np.maximum.accumulate(ends[order])
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    groups = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(len(out_s))
    np.maximum.at(out_e, groups, e)
    return out_s, out_e


def _covered(union: tuple[np.ndarray, np.ndarray], t: np.ndarray) -> np.ndarray:
    """Length of ``union`` before each time of ``t``."""
    s, e = union
    if not len(s):
        return np.zeros(len(t))
    lengths = e - s
    before = np.concatenate([[0.0], np.cumsum(lengths)])
    j = np.searchsorted(s, t, side="right") - 1
    inside = np.where(j >= 0, np.clip(t - s[np.maximum(j, 0)], 0, lengths[np.maximum(j, 0)]), 0)
    return before[j + 1] - lengths[np.maximum(j, 0)] * (j >= 0) + inside


def _intervals(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    ts = frame["ts_us"].to_numpy().astype(float)
    return ts, ts + frame["dur_us"].to_numpy().astype(float)


def _loop_thread(cpu: pl.DataFrame) -> pl.DataFrame:
    """The CPU ranges of the scheduler loop's thread: the one with the most step ranges."""
    for name in STEP_RANGES:
        marks = cpu.filter(pl.col("name") == name)
        if marks.height:
            tid = marks.group_by("pid", "tid").len().sort("len", descending=True).row(0)
            return cpu.filter((pl.col("pid") == tid[0]) & (pl.col("tid") == tid[1]))
    return cpu.head(0)


def _account(
    trace: ProfileTrace,
    phase: str | None,
    pp: int,
    bandwidth_gb_s: float | None,
    bandwidth_source: str,
) -> pl.DataFrame:
    ev = trace.events.filter(
        (pl.col("ph") == "X") & pl.col("ts_us").is_not_null() & pl.col("dur_us").is_not_null()
    )
    gpu = ev.filter(pl.col("cat").is_in(_GPU))
    is_comm = pl.col("name").str.starts_with(COMM_PREFIXES[0])
    for prefix in COMM_PREFIXES[1:]:
        is_comm = is_comm | pl.col("name").str.starts_with(prefix)
    comm = gpu.filter((pl.col("cat") == "kernel") & is_comm)
    work = gpu.filter(~((pl.col("cat") == "kernel") & is_comm))
    loop = _loop_thread(ev.filter(pl.col("cat") == "user_annotation"))
    marks = next(
        (loop.filter(pl.col("name") == n) for n in STEP_RANGES if loop["name"].eq(n).any()), None
    )
    if marks is not None and marks.height >= 2:
        bounds = np.sort(marks["ts_us"].to_numpy().astype(float))
    elif gpu.height:
        first, last = _intervals(gpu)
        bounds = np.array([first.min(), last.max()])
    else:
        return pl.DataFrame(schema=ACCOUNT)
    any_gpu = _merged(*_intervals(gpu))
    busy = _merged(*_intervals(work))
    recv = _merged(*_intervals(loop.filter(pl.col("name").str.starts_with(RECV_PREFIX))))
    ranges = _merged(*_intervals(loop))
    # Elementary segments between every boundary: each is wholly in or out of each union.
    points = np.unique(np.concatenate([bounds, *any_gpu, *busy, *recv, *ranges]))
    points = points[(points >= bounds[0]) & (points <= bounds[-1])]
    lo, hi = points[:-1], points[1:]
    length = hi - lo

    def inside(union: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        return (_covered(union, hi) - _covered(union, lo)) > 0.5 * length

    on_gpu, on_work, in_recv, in_loop = inside(any_gpu), inside(busy), inside(recv), inside(ranges)
    step = np.searchsorted(bounds, lo, side="right") - 1
    steps = len(bounds) - 1

    def per_step(mask: np.ndarray) -> np.ndarray:
        return np.bincount(step[mask], weights=length[mask], minlength=steps)[:steps] / 1e3

    idle = ~on_gpu
    transfer, comm_bytes, basis = _transfers(comm, bounds, bandwidth_gb_s, bandwidth_source)
    comm_ms = per_step(on_gpu & ~on_work)
    transfer = np.minimum(transfer, comm_ms)
    launches = loop.head(0)
    runtime = ev.filter(pl.col("name").str.starts_with("cudaGraphLaunch"))
    if runtime.height:
        launches = runtime
    launch_at = np.searchsorted(bounds, launches["ts_us"].to_numpy().astype(float), "right") - 1
    ok = (launch_at >= 0) & (launch_at < steps)
    graph_ms = np.bincount(
        launch_at[ok], weights=launches["dur_us"].to_numpy().astype(float)[ok], minlength=steps
    )[:steps]
    graph_n = np.bincount(launch_at[ok], minlength=steps)[:steps]
    return pl.DataFrame(
        {
            "phase": [phase] * steps,
            "pp": [pp] * steps,
            "step": list(range(steps)),
            "start_us": bounds[:-1],
            "span_ms": np.diff(bounds) / 1e3,
            "compute_ms": per_step(on_work),
            "comm_ms": comm_ms,
            "transfer_ms": transfer,
            "wait_ms": comm_ms - transfer,
            "idle_cpu_ms": per_step(idle & in_loop & ~in_recv),
            "idle_recv_ms": per_step(idle & in_recv),
            "idle_other_ms": per_step(idle & ~in_loop),
            "graph_launch_ms": graph_ms / 1e3,
            "graph_launches": graph_n,
            "comm_bytes": comm_bytes,
            "transfer_basis": [basis] * steps,
        },
        schema=ACCOUNT,
    )


def _transfers(
    comm: pl.DataFrame, bounds: np.ndarray, bandwidth_gb_s: float | None, source: str
) -> tuple[np.ndarray, list[int | None], str]:
    """Per iteration: transfer time (ms) of the communication kernels starting in it, the
    bytes they carried (None when the trace does not say), and how transfers were found."""
    steps = len(bounds) - 1
    if not comm.height:
        return np.zeros(steps), [None] * steps, "no communication kernels"
    size = pl.col("dtype").replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    comm = comm.with_columns(nbytes=pl.col("in_nelems") * size)
    modelled = (
        bandwidth_gb_s is not None and bandwidth_gb_s > 0 and comm["nbytes"].is_not_null().all()
    )
    if modelled:
        assert bandwidth_gb_s is not None
        comm = comm.with_columns(
            transfer_us=pl.min_horizontal(pl.col("nbytes") / (bandwidth_gb_s * 1e3), "dur_us")
        )
        basis = f"modelled: bytes / {bandwidth_gb_s:g} GB/s ({source or 'bandwidth given'})"
    else:
        key = [pl.col("name").str.slice(0, 24), pl.col("in_nelems").fill_null(-1)]
        comm = comm.with_columns(transfer_us=pl.col("dur_us").min().over(key))
        basis = "measured: shortest communication kernel of its size on the stage"
    at = np.searchsorted(bounds, comm["ts_us"].to_numpy().astype(float), side="right") - 1
    ok = (at >= 0) & (at < steps)
    transfer = np.bincount(at[ok], weights=comm["transfer_us"].to_numpy()[ok], minlength=steps)
    nbytes = comm["nbytes"].to_numpy()
    known = ok & ~np.isnan(nbytes.astype(float))
    total = np.bincount(at[known], weights=nbytes.astype(float)[known], minlength=steps)
    seen = np.bincount(at[known], minlength=steps)
    carried = [int(b) if n else None for b, n in zip(total[:steps], seen[:steps], strict=True)]
    return transfer[:steps] / 1e3, carried, basis


@dataclass(frozen=True)
class StageSummary:
    """The measured quantities of a phase's profile, from ``stage_totals``.

    ``slowest_pp`` spends the most time in kernels per iteration (its layers' cost: what a new
    layer split moves); ``imbalance`` is that time over the mean stage's. ``pace_pp`` sets the
    pipeline's pace: the stage that waits least to receive (of equals, the one with the most
    kernel and transfer time). The shares are of all stages' time together.
    """

    phase: str | None
    stages: int
    steps: int
    step_ms: float
    slowest_pp: int
    slowest_compute_ms: float
    mean_compute_ms: float
    imbalance: float
    imbalance_noise: float  # relative standard error of the slowest stage's kernel time
    pace_pp: int
    bubble_share: float  # waiting in communication kernels or idle
    transfer_share: float
    cpu_share: float  # GPU idle while the loop's CPU works
    recv_share: float  # GPU idle while the loop blocks in a receive
    compute_share: float
    transfer_basis: str


def stage_totals(account: pl.DataFrame) -> pl.DataFrame:
    """Per phase and stage: iterations, their time, and each part's sum and share of it;
    ``step_compute_ms`` and ``step_work_ms`` (kernels and transfers) per iteration."""
    parts = ["compute_ms", "comm_ms", "transfer_ms", "wait_ms", "idle_cpu_ms", "idle_recv_ms"]
    parts += ["idle_other_ms", "graph_launch_ms"]
    out = (
        account.group_by("phase", "pp")
        .agg(
            pl.len().alias("steps"),
            pl.col("span_ms").sum(),
            *(pl.col(p).sum() for p in parts),
            pl.col("graph_launches").sum(),
            pl.col("compute_ms").std().alias("compute_std_ms"),
            pl.col("transfer_basis").first(),
        )
        .sort("phase", "pp", nulls_last=False)
    )
    return out.with_columns(
        step_compute_ms=pl.col("compute_ms") / pl.col("steps"),
        step_work_ms=(pl.col("compute_ms") + pl.col("transfer_ms")) / pl.col("steps"),
        **{p.removesuffix("_ms") + "_share": pl.col(p) / pl.col("span_ms") for p in parts[:7]},
    )


def stage_summary(account: pl.DataFrame, phase: str | None = None) -> StageSummary | None:
    """The slowest and pace-setting stages, bubble, transfer and CPU shares of one phase's
    profile (None without two stages and an iteration in it)."""
    rows = account.filter(pl.col("phase").is_null() if phase is None else pl.col("phase") == phase)
    totals = stage_totals(rows)
    if totals.height < 2:
        return None
    span = float(totals["span_ms"].sum())
    if span <= 0:
        return None
    top = totals.sort("step_compute_ms", descending=True).row(0, named=True)
    pace = totals.with_columns(recv=(pl.col("idle_recv_share") * 100).round(1))
    pace_pp = pace.sort(["recv", "step_work_ms"], descending=[False, True])["pp"][0]
    mean = float(totals["step_compute_ms"].mean() or 0.0)
    std, own = top["compute_std_ms"], top["step_compute_ms"]
    noise = (std / math.sqrt(top["steps"]) / own) if std and own else 0.0

    def share(col: str) -> float:
        return float(totals[col].sum()) / span

    idle = ("wait_ms", "idle_cpu_ms", "idle_recv_ms", "idle_other_ms")
    return StageSummary(
        phase=phase,
        stages=totals.height,
        steps=int(totals["steps"].min() or 0),
        step_ms=span / float(totals["steps"].sum()),
        slowest_pp=int(top["pp"]),
        slowest_compute_ms=float(own),
        mean_compute_ms=mean,
        imbalance=float(own) / mean if mean > 0 else 1.0,
        imbalance_noise=float(noise),
        pace_pp=int(pace_pp),
        bubble_share=sum(share(c) for c in idle),
        transfer_share=share("transfer_ms"),
        cpu_share=share("idle_cpu_ms"),
        recv_share=share("idle_recv_ms"),
        compute_share=share("compute_ms"),
        transfer_basis=str(top["transfer_basis"]),
    )


WATERFALL_PARTS: tuple[tuple[str, str], ...] = (
    ("idle_recv_ms", "receive wait"),
    ("idle_cpu_ms", "CPU loop"),
    ("compute_ms", "kernels"),
    ("transfer_ms", "transfer"),
    ("wait_ms", "SendRecv wait"),
    ("idle_other_ms", "outside the loop"),
)
"""Account column → part, in the order a loop iteration lays them out (the CPU's scheduling
and result processing drawn together)."""


def round_waterfall(account: pl.DataFrame) -> pl.DataFrame:
    """One typical loop iteration per phase and stage: each part's mean time per iteration,
    laid end to end in loop order (``phase``, ``pp``, ``part``, ``start_ms``, ``end_ms``)."""
    means = account.group_by("phase", "pp").agg(*(pl.col(c).mean() for c, _ in WATERFALL_PARTS))
    long = means.unpivot(
        index=["phase", "pp"], on=[c for c, _ in WATERFALL_PARTS], variable_name="part",
        value_name="ms",
    )  # fmt: skip
    order = {c: i for i, (c, _) in enumerate(WATERFALL_PARTS)}
    names = dict(WATERFALL_PARTS)
    long = long.with_columns(
        order=pl.col("part").replace_strict(order, return_dtype=pl.Int64),
        part=pl.col("part").replace_strict(names, return_dtype=pl.String),
    ).sort("phase", "pp", "order", nulls_last=False)
    long = long.with_columns(end_ms=pl.col("ms").cum_sum().over("phase", "pp"))
    return (
        long.with_columns(start_ms=pl.col("end_ms") - pl.col("ms"))
        .filter(pl.col("ms") > 0)
        .select("phase", "pp", "part", "start_ms", "end_ms")
    )
