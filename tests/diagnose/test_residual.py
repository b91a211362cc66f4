"""``unexplained-slowdown`` from the GPU idle of a full pipeline, against the eager cost.

The runs are diagnose fixtures (``tests/data/diagnose``, SGLang 0.5.23 lines) with an
nvidia-smi trace of their 8 GPUs at 40 % while they decode: ``tp8-eager`` (every decode line
``cuda graph: False``, no graph line to compare with), and a TP8 sweep whose graph steps were
logged at one batch size only.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.model import StageClock
from toolkit.diagnose import Finding, diagnose
from toolkit.diagnose.cudagraph import cuda_graph_miss, eager_cost_in, eager_effect
from toolkit.diagnose.residual import unexplained_slowdown
from toolkit.diagnose.slots import full_pipeline_idle
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis

HEADER = "timestamp, index, name, utilization.gpu [%], memory.used [MiB], power.draw [W]\n"


def _trace(run: Path, start: datetime, seconds: int, util: int = 40) -> None:
    rows = []
    for i in range(seconds):
        ts = (start + timedelta(seconds=i)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        for gpu in range(8):
            rows.append(f"{ts}, {gpu}, NVIDIA H200, {util} %, 120000 MiB, 310.00 W\n")
    (run / "gpu.csv").write_text(HEADER + "".join(rows), encoding="utf-8")


def _eager_run(tmp_path: Path) -> RunAnalysis:
    run = tmp_path / "tp8-eager"
    shutil.copytree(TEST_DATA / "diagnose" / "tp8-eager", run)
    _trace(run, datetime(2026, 5, 1, 10, 6, 50), 80)
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
    # 60 % idle, 30 % of it eager: the rest less the idle the model expects between steps
    expected = float(residual.summary.split("per-step overhead (")[1].split("%")[0]) / 100
    assert residual.impact == pytest.approx(0.60 - 0.30 - expected, abs=0.01)
    assert 0 < expected < 0.2 and residual.impact_range[0] > 0
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


def _fixtures() -> Any:
    """``tests/data/diagnose/make_fixtures.py`` as a module: its SGLang 0.5.23 line writers."""
    spec = importlib.util.spec_from_file_location(
        "diagnose_fixtures", TEST_DATA / "diagnose" / "make_fixtures.py"
    )
    assert spec is not None and spec.loader is not None
    fx = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fx
    spec.loader.exec_module(fx)
    return fx


def test_an_eager_cost_bounded_from_below_takes_the_idle_as_its_own(tmp_path: Path) -> None:
    """Graph steps at batch 32 only (55 ms), eager steps at 48 (96 ms): a graph step at 48 is
    at most 83 ms, so the slowdown is at least 1.16; the 60 % idle is the eager gaps'."""
    fx = _fixtures()
    la = fx.Launch(tp=8, pool=139827, graph_max=32)
    graph = fx.Phase(400, [32], 577.8, interval=2.2)
    eager = fx.Phase(440, [48], 500.0, graph=False, interval=2.6)
    lines = fx.startup(la, 0.0) + fx.phase_lines(la, graph) + fx.phase_lines(la, eager)
    lines.sort(key=lambda s: s[1:20])
    run = tmp_path / "tp8-bounded"
    run.mkdir()
    (run / "server.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    bench = [fx.bench_line(32, 577.8), fx.bench_line(48, 500.0)]
    (run / "bench.jsonl").write_text("\n".join(bench) + "\n", encoding="utf-8")
    _trace(run, datetime(2026, 5, 1, 10, 6, 30), 80)
    ctx = RunAnalysis(run)
    found = {f.id: f for f in diagnose([ctx])}
    miss = found["cuda-graph-miss"]
    assert miss.basis == "measured" and "at least" in miss.summary
    assert "not as an unexplained slowdown" in miss.summary
    residual = found.get("unexplained-slowdown")
    assert residual is None or residual.basis == "modelled"


def _eager_then_graph_drain(tmp_path: Path) -> RunAnalysis:
    """TP8, graphs to 32: graph phases at 16 (40 ms a step) and 32 (44 ms); then 48 requests
    decode eagerly at 96 ms a step (a graph step there: 48 ms, 2×) for 14 lines, and the
    phase drains at 24 on graphs (42 ms) for 14 more. The trace has every GPU 30 % busy."""
    fx = _fixtures()
    la = fx.Launch(tp=8, pool=139827, graph_max=32)
    small = fx.Phase(400, [16], 16 / 0.040, interval=2.0)
    mid = fx.Phase(440, [32], 32 / 0.044, interval=2.0)
    steady = fx.Phase(480, [48], 48 / 0.096, graph=False, interval=2.0)
    drain = fx.Phase(480 + 1 + 14 * 2.0, [24], 24 / 0.042, interval=2.0)
    lines = fx.startup(la, 0.0)
    for ph in (small, mid, steady):
        lines += fx.phase_lines(la, ph)
    lines += [s for s in fx.phase_lines(la, drain) if "Prefill batch" not in s]  # no burst
    lines.sort(key=lambda s: s[1:20])
    run = tmp_path / "tp8-eager-then-drain"
    run.mkdir()
    (run / "server.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    bench = [fx.bench_line(ph.running, ph.gen_tok_s) for ph in (small, mid, steady)]
    (run / "bench.jsonl").write_text("\n".join(bench) + "\n", encoding="utf-8")
    _trace(run, datetime(2026, 5, 1, 10, 6, 30), 150, util=20)
    return RunAnalysis(run)


def test_eager_decode_explains_the_steady_window_by_its_own_eager_share(tmp_path: Path) -> None:
    """The finding sizes eager decode over the phase (the graph drain halves its share); the
    residual judges the steady window, all eager, so there eager decode costs 1 − 1/2."""
    ctx = _eager_then_graph_drain(tmp_path)
    found = {f.id: f for f in diagnose([ctx])}
    miss = found["cuda-graph-miss"]
    assert miss.basis == "measured" and miss.phase == 2
    effect = eager_effect(ctx)
    assert effect is not None and effect.slowdown == pytest.approx(2.0, rel=0.01)
    assert 0.3 < effect.phase_share < 0.6  # the drain's graph tokens thin the phase's share
    assert miss.impact == pytest.approx(effect.phase_share * 0.5, rel=0.01)
    r = ctx.phase_summary.row(2, named=True)
    assert r["running_est"] == pytest.approx(48)
    start, end = r["steady_start"], r["steady_end"]
    window = eager_cost_in(ctx, miss, 2, start, end)
    assert window is not None
    assert window[0] == pytest.approx(1.0) and window[1] == pytest.approx(0.5, abs=0.005)
    whole = ctx.phases.row(2, named=True)
    same = eager_cost_in(ctx, miss, 2, whole["start"], whole["end"])
    assert same is not None and same[1] == pytest.approx(miss.impact)  # the phase: its impact
    residual = found["unexplained-slowdown"]
    assert residual.basis == "measured" and residual.phase == 2
    expected = float(residual.summary.split("per-step overhead (")[1].split("%")[0]) / 100
    # 80 % idle less the window's own eager cost (not the phase's), less the model's idle
    assert residual.impact == pytest.approx(0.80 - 0.50 - expected, abs=0.01)
    assert "steady window, 100% of its decode tokens eager) explain 50% of it" in residual.summary
    assert set(residual.evidence["explained_by"]) == {
        "cuda-graph-miss 0.500 (steady window, 100% of its decode tokens eager)"
    }


def test_a_cause_the_window_cannot_size_keeps_its_phase_impact() -> None:
    """A prefill stall is sized over its phase only: the evidence says so."""
    ctx = RunAnalysis(load_run(TEST_DATA / "diagnose" / "pp8-underfilled", cache=False))
    alone = unexplained_slowdown(ctx)
    assert alone is not None and alone.basis == "modelled"
    assert alone.evidence["explained_by"][0] == "no finding sized for this window"
    phase = alone.phase
    stall = Finding(
        id="prefill-interference",
        severity="medium",
        title="prefill stalls decode",
        summary="windows with a prefill pass generated fewer tokens",
        evidence=pl.DataFrame({"phase": [phase]}),
        remedy="--chunked-prefill-size",
        impact=0.05,
        basis="measured",
        phase=phase,
    )
    ctx.found = [stall]
    less = unexplained_slowdown(ctx)
    assert less is not None and less.impact == pytest.approx(
        1 - (1 - alone.impact) / (1 - 0.05), abs=0.005
    )
    assert less.evidence["explained_by"][0] == (
        f"prefill-interference 0.050 (phase {phase} as a whole)"
    )
