"""How ``TRUTH`` was found: the four seed numbers, measured the way ``toolkit.synth`` writes them.

Each knob of ``Truth`` moves mainly one of the four benchmark numbers (see ``truth``), so a
few rounds of one-dimensional secant steps, knob by knob, solve all four. ``TRUTH`` holds the
result, pinned, so writing a run never depends on a solver; ``solve(TRUTH)`` returns at once.
"""

from __future__ import annotations

from dataclasses import replace

from toolkit.synth.bench_jsonl import bench_result
from toolkit.synth.phases import Bench, run_sweep
from toolkit.synth.profiles import profile_named
from toolkit.synth.truth import LAYOUTS, TRUTH, Truth, truth_params

__all__ = ["SEED_POINTS", "measure", "solve"]

SEED_POINTS: dict[tuple[str, int], float] = {
    ("tp8", 1): 26.3,
    ("tp8", 32): 577.8,
    ("pp8", 1): 34.3,
    ("pp8", 32): 248.1,
}
"""The incident's benchmark output throughputs (tok/s) by (layout, concurrency)."""

# Which knob mainly sets which point.
_KNOBS = (
    ("allreduce_s", ("tp8", 1)),
    ("e_eff", ("tp8", 32)),
    ("hop_s", ("pp8", 1)),
    ("expert_penalty", ("pp8", 32)),
)


def measure(
    name: str, concurrency: int, truth: Truth = TRUTH, bench: Bench | None = None, seed: int = 0
) -> float:
    """The ``output_throughput`` a synthetic run of ``name`` writes for one concurrency."""
    bench = bench or Bench()
    layout = LAYOUTS[name]
    (phase,) = run_sweep(
        layout,
        truth_params(layout, truth),
        (concurrency,),
        bench=bench,
        start_s=0.0,
        seed=seed,
        jitter=truth.jitter,
        iteration_s=truth.iteration_s,
    )
    return float(bench_result(phase, bench, profile_named("0.5.23"), {})["output_throughput"])


def solve(
    start: Truth = TRUTH, bench: Bench | None = None, *, tol: float = 0.003, rounds: int = 6
) -> Truth:
    """``Truth`` whose synthetic benchmark numbers are within ``tol`` of ``SEED_POINTS``."""
    truth = start
    for _ in range(rounds):
        errors = {p: measure(*p, truth, bench) / v - 1 for p, v in SEED_POINTS.items()}
        if max(abs(e) for e in errors.values()) <= tol:
            return truth
        for knob, point in _KNOBS:
            truth = _secant(truth, knob, point, bench, tol)
    return truth


def _secant(
    truth: Truth, knob: str, point: tuple[str, int], bench: Bench | None, tol: float
) -> Truth:
    """Move one knob until its point is within ``tol`` (every knob slows its point as it grows)."""
    target = SEED_POINTS[point]
    x0 = getattr(truth, knob)
    f0 = measure(*point, truth, bench) - target
    if abs(f0) <= tol * target:
        return truth
    x1 = x0 * (1.1 if f0 < 0 else 0.9) if x0 else 0.1
    for _ in range(12):
        f1 = measure(*point, replace(truth, **{knob: x1}), bench) - target
        if abs(f1) <= tol * target or f1 == f0:
            break
        x0, x1, f0 = x1, max(1e-9, x1 - f1 * (x1 - x0) / (f1 - f0)), f1
    return replace(truth, **{knob: x1})
