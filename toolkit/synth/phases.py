"""The benchmark sweep as simulated phases on one clock: one closed-loop run per concurrency.

Times are seconds after the launch (the ``server_args`` line). Each phase is one
``sglang.bench_serving`` run: a burst of ``concurrency`` requests at its start, each finished
request replaced at once until ``num_prompts`` were sent, then a short idle gap before the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from toolkit.analyze.model import Layout, Params, Workload
from toolkit.analyze.model.sim import Simulation, simulate
from toolkit.errors import ToolkitError

__all__ = ["Bench", "Phase", "run_sweep"]


@dataclass(frozen=True)
class Bench:
    """What the client sends: fixed lengths (``--random-range-ratio 1.0``)."""

    input_len: int = 1000
    output_len: int = 256
    min_prompts: int = 2  # low concurrencies send a few waves, so the phase is not a blip
    gap_s: float = 3.0  # idle time between two benchmark runs of the sweep

    def num_prompts(self, concurrency: int) -> int:
        return max(concurrency, self.min_prompts)


@dataclass(frozen=True)
class Phase:
    """One benchmark run: its simulation, shifted to ``start_s`` on the launch clock."""

    concurrency: int
    num_prompts: int
    start_s: float
    sim: Simulation

    @property
    def end_s(self) -> float:
        """When the last request finished (the benchmark's end)."""
        return self.start_s + float(self.sim.requests["finished_s"].max() or 0.0)

    def requests(self) -> pl.DataFrame:
        """The phase's requests on the launch clock."""
        cols = ["arrival_s", "admitted_s", "first_token_s", "finished_s"]
        return self.sim.requests.with_columns(pl.col(cols) + self.start_s)

    def batches(self) -> pl.DataFrame:
        """Scheduler batches per rank on the launch clock."""
        return self.sim.batches.with_columns(pl.col("scheduled_s", "processed_s") + self.start_s)

    def forwards(self) -> pl.DataFrame:
        """GPU forwards per rank on the launch clock."""
        return self.sim.forwards.with_columns(pl.col("start_s", "end_s") + self.start_s)


def run_sweep(
    layout: Layout,
    params: Params,
    concurrencies: Sequence[int],
    *,
    bench: Bench,
    start_s: float,
    seed: int,
    jitter: float,
    iteration_s: float,
) -> list[Phase]:
    """Simulate one benchmark run per concurrency, back to back from ``start_s``."""
    if not concurrencies:
        raise ToolkitError("synth: the sweep needs at least one concurrency")
    phases = []
    t = start_s
    for c in concurrencies:
        if c < 1:
            raise ToolkitError(f"synth: concurrency must be at least 1, got {c}")
        n = bench.num_prompts(c)
        load = Workload(c, bench.input_len, bench.output_len, num_requests=n)
        # duration_s only bounds the run: it ends when every request has finished.
        sim = simulate(
            layout,
            load,
            params,
            duration_s=3600.0,
            seed=seed * 1009 + c,
            jitter=jitter,
            iteration_s=iteration_s,
        )
        if sim.requests["finished_s"].null_count():
            raise ToolkitError(f"synth: c={c} did not finish within the simulated hour")
        phase = Phase(c, n, t, sim)
        phases.append(phase)
        t = phase.end_s + bench.gap_s
    return phases
