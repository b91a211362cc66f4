"""Sizing a queue's cost from rounds the run itself measured (``queue_cost.queued_cost``).

The run is the scenario family's PP8 with three faults (``helpers.scenarios``: SGLang 0.5.23
lines on every stage, a bench_serving result per phase): c=32 with ISL 1000 packs four slots
of 8 and queues nothing, so it measures the round of a micro-batch of 8; c=64 with 8192-token
prompts runs about 23 at a time on a KV pool too small for 64 and queues the rest. With the
pool unlimited the admission replay gives 64 one a slot-turn: 8 slots of 8, the size phase 0
measured. "waves" sends four times c, so the pool-bound phase admits in a trickle.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from helpers.scenarios import build, build_variant

from toolkit.analyze.stages import reference_lines
from toolkit.diagnose import queue_cost
from toolkit.diagnose.kv import kv_cache_pressure
from toolkit.run_analysis import RunAnalysis


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RunAnalysis]:
    root = tmp_path_factory.mktemp("queued-cost")
    return {
        "base": RunAnalysis(build("pp8-several-causes", root / "base")),
        "waves": RunAnalysis(build_variant("pp8-several-causes", "waves", root / "waves")),
    }


def _from_the_run(ctx: RunAnalysis) -> float:
    """The cost by hand from the run's own numbers: a wave of 64 (prefill at the rate the
    pool-bound phase's back-to-back passes ran, then OSL rounds of phase 0's TPOT) against
    the benchmark's output throughput of the pool-bound phase."""
    kv, free = ctx.phase(2), ctx.phase(0)
    isl, osl, c = kv["input_len"], kv["output_len"], kv["offered"]
    prefill = reference_lines(ctx.batches, "prefill").filter(
        pl.col("ts").is_between(kv["start"], kv["end"])
    )
    rate = prefill["input_tok_s"].drop_nulls().quantile(0.9)
    wave_s = c * isl / rate + osl * free["bench_tpot_ms"] / 1e3
    return 1 - kv["bench_tok_s"] / (c * osl / wave_s)


@pytest.mark.parametrize("name", ["base", "waves"])
def test_the_pool_cost_is_measured_from_another_phases_round(
    runs: dict[str, RunAnalysis], name: str
) -> None:
    ctx = runs[name]
    f = kv_cache_pressure(ctx)
    assert f is not None and f.basis == "measured" and f.phase == 2
    assert f.impact == pytest.approx(_from_the_run(ctx), abs=1e-6)
    assert f"micro-batch size 8 {ctx.load_of(0)}" in f.summary  # named by its load
    assert "in phase" not in f.summary
    assert "8×8 by the admission replay" in f.summary and "prefill included" in f.summary


def test_a_trickle_of_admissions_costs_more_than_proportional_growth(
    runs: dict[str, RunAnalysis],
) -> None:
    """With four waves the pool-bound phase admits one request as another finishes: its prompts
    no longer pipeline and its slots go uneven, so it delivers far less than its running
    requests would decode; the measured cost says so, the proportional one could not."""
    ctx = runs["waves"]
    f = kv_cache_pressure(ctx)
    assert f is not None and f.impact is not None
    row = ctx.phase_summary.filter(pl.col("phase") == 2).row(0, named=True)
    proportional = 1 - row["running_est"] / row["offered"]
    assert math.isfinite(proportional) and f.impact > proportional + 0.1
    base = kv_cache_pressure(runs["base"])
    assert base is not None and base.impact is not None and f.impact > base.impact


def test_without_a_prefill_rate_both_sides_are_decode_rates(
    runs: dict[str, RunAnalysis], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines older than 0.5.9 carry no ``input throughput``: the phase's decode rate (its
    requests over its round) against 64 over phase 0's round."""
    monkeypatch.setattr(queue_cost, "_prefill_rate", lambda ctx, phase: None)
    ctx = runs["base"]
    f = kv_cache_pressure(ctx)
    assert f is not None and f.basis == "measured" and "prefill not counted" in f.summary
    kv = ctx.phase_summary.filter(pl.col("phase") == 2).row(0, named=True)
    now = kv["running_est"] / (ctx.phase(2)["bench_tpot_ms"] / 1e3)
    free = 64 / (ctx.phase(0)["bench_tpot_ms"] / 1e3)
    assert f.impact == pytest.approx(1 - now / free, abs=1e-6)
