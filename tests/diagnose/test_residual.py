"""``unexplained-slowdown`` from the GPU idle of a full pipeline, against the eager cost.

The run is the ``tp8-eager`` diagnose fixture (every decode line ``cuda graph: False``, no
graph line to compare with) with an nvidia-smi trace of its 8 GPUs at 40 % while it decodes.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.model import StageClock
from toolkit.diagnose import Finding, diagnose
from toolkit.diagnose.cudagraph import cuda_graph_miss
from toolkit.diagnose.residual import full_pipeline_idle, unexplained_slowdown
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

HEADER = "timestamp, index, name, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"


def _eager_run(tmp_path: Path, util: int = 40) -> RunAnalysis:
    run = tmp_path / "tp8-eager"
    shutil.copytree(TEST_DATA / "diagnose" / "tp8-eager", run)
    start = datetime(2026, 5, 1, 10, 6, 50)
    rows = []
    for i in range(80):
        ts = (start + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        for gpu in range(8):
            rows.append(f"{ts}, {gpu}, NVIDIA H200, {util} %, 120000 MiB, 310.00 W\n")
    (run / "gpu.csv").write_text(HEADER + "".join(rows), encoding="utf-8")
    return RunAnalysis(run)


def test_an_assumed_eager_cost_takes_the_idle_as_its_own(tmp_path: Path) -> None:
    ctx = _eager_run(tmp_path)
    found = {f.id: f for f in diagnose([ctx])}
    eager = found["cuda-graph-miss"]
    assert eager.basis == "assumed"
    idle = full_pipeline_idle(ctx, eager.phase)
    assert idle is not None and idle[0] == pytest.approx(0.60, abs=0.01)
    assert "idled 60%" in eager.summary and "not as an unexplained slowdown" in eager.summary
    residual = found.get("unexplained-slowdown")
    assert residual is None or residual.basis == "modelled"


def test_a_measured_eager_cost_leaves_the_rest_of_the_idle_unexplained(tmp_path: Path) -> None:
    ctx = _eager_run(tmp_path)
    eager = cuda_graph_miss(ctx)
    assert eager is not None
    ctx.found = [replace(eager, impact=0.30, basis="measured")]
    residual = unexplained_slowdown(ctx)
    assert residual is not None and residual.basis == "measured"
    assert residual.impact == pytest.approx(0.60 - 0.30, abs=0.01)
    assert "explain 30% of it" in residual.summary


def _imbalance(ctx: RunAnalysis, impact: float) -> Finding:
    return Finding(
        id="stage-imbalance",
        severity="high",
        title="stage 7 busier",
        summary="stage 7 ran busier than the mean",
        evidence=pl.DataFrame({"pp": [7]}),
        remedy="SGLANG_PP_LAYER_PARTITION",
        impact=impact,
        basis="measured",
    )


def test_a_stage_imbalance_explains_only_what_the_models_split_does_not() -> None:
    """pp8-underfilled: Kimi K2 over PP8 (7,7,7,8,8,8,8,8 and the lm_head on the last)."""
    ctx = RunAnalysis(load_run(TEST_DATA / "diagnose" / "pp8-underfilled", cache=False))
    alone = unexplained_slowdown(ctx)
    assert alone is not None and alone.basis == "modelled"
    b = alone.evidence["slot_req"][0]
    clock = StageClock(ctx.layout, ctx.params)
    times = [clock.decode(k, b) for k in range(ctx.pp)]
    modelled = 1 - sum(times) / len(times) / max(times)
    ctx.found = [_imbalance(ctx, modelled)]  # no more than the split itself predicts
    same = unexplained_slowdown(ctx)
    assert same is not None and same.impact == pytest.approx(alone.impact)
    assert "stage-imbalance" not in same.summary
    ctx.found = [_imbalance(ctx, modelled + 0.10)]  # a stage slower than its layers say
    less = unexplained_slowdown(ctx)
    assert less is not None and "after the stage-imbalance found here" in less.summary
    share = 1 - (1 - alone.impact) / (1 - 0.10)
    assert less.impact == pytest.approx(share, abs=0.005)
