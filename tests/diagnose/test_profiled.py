"""Findings from profiler traces on a generated PP8 run: a slow stage is ``stage-imbalance``
with basis measured and a narrow range; a slow stage-to-stage link is no imbalance but the
residual's transfer; a CPU-bound loop is the residual's CPU part; without traces the rules
keep their other evidence."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from toolkit.diagnose import diagnose
from toolkit.diagnose.imbalance import stage_imbalance
from toolkit.diagnose.residual import unexplained_slowdown
from toolkit.run_analysis import RunAnalysis
from toolkit.synth.runs import write_run
from toolkit.synth.torch_trace import PipelineProfile, write_pp_profile

FOLDER = "phase-1-c32"  # as ppscope capture --profile names the phase at 32 requests
SLOW_STAGE = PipelineProfile(compute_ms=(8.0,) * 7 + (13.0,), steps=16, jitter=0.05)
SLOW_LINK = PipelineProfile(
    compute_ms=(8.0,) * 8, tokens=64, slow_links=((3, 0.4),), steps=16, jitter=0.05, seed=1
)
CPU_BOUND = PipelineProfile(
    compute_ms=(4.0,) * 8, process_ms=6.0, sched_ms=2.0, steps=16, jitter=0.05, seed=2
)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_run(tmp_path_factory.mktemp("pp8") / "run", layout_name="pp8",
                     concurrencies=(1, 32))  # fmt: skip


def _with_profile(base: Path, tmp_path: Path, spec: PipelineProfile) -> tuple[Path, pl.DataFrame]:
    run = tmp_path / "run"
    shutil.copytree(base, run)
    return run, write_pp_profile(run / "profile" / FOLDER, spec)


def test_a_slow_stage_is_a_measured_imbalance_with_a_narrow_range(
    base: Path, tmp_path: Path
) -> None:
    run, truth = _with_profile(base, tmp_path, SLOW_STAGE)
    findings = {f.id: f for f in diagnose([run])}
    f = findings["stage-imbalance"]
    assert f.basis == "measured" and "Stage 7" in f.title and f.phase == 1
    low, high = f.impact_range
    assert high - low < 0.05
    # the gain, from the generator's truth: stage 7's excess kernel time over the mean
    # stage's, less what it waited to receive, over the iteration
    per = truth.group_by("pp").agg(pl.col("compute_ms", "idle_recv_ms", "span_ms").mean())
    slow = per.filter(pl.col("pp") == 7)
    excess = slow["compute_ms"].item() - per["compute_ms"].mean() - slow["idle_recv_ms"].item()
    assert f.impact == pytest.approx(excess / slow["span_ms"].item(), abs=0.01)
    assert low <= f.impact <= high
    assert "SGLANG_PP_LAYER_PARTITION=" in f.remedy
    assert f.evidence.height == 8 and "step_compute_ms" in f.evidence.columns
    bubbles = findings["gpu-idle-bubbles"]
    assert bubbles.severity == "info" and "stage-imbalance" in bubbles.summary
    residual = findings.get("unexplained-slowdown")
    assert residual is None or "mostly transfer" not in residual.title


def test_a_slow_link_is_no_imbalance_but_the_residuals_transfer(base: Path, tmp_path: Path) -> None:
    run, _ = _with_profile(base, tmp_path, SLOW_LINK)
    ctx = RunAnalysis(run)
    assert stage_imbalance(ctx) is None  # the kernels are even
    f = unexplained_slowdown(ctx)
    assert f is not None and f.basis == "measured" and "mostly transfer" in f.title
    assert "put stage 3" in f.summary and "link" in f.remedy
    mb = SLOW_LINK.proxy_bytes / 1e6  # the bytes measured against the link's plausible speed
    assert f"carry {mb:.2f} MB per iteration: {SLOW_LINK.transfer_ms_of(3):.2f} ms measured" in (
        f.summary
    )
    assert f.impact_range[1] - f.impact_range[0] < 0.05


def test_a_cpu_bound_loop_is_the_residuals_cpu_part(base: Path, tmp_path: Path) -> None:
    run, truth = _with_profile(base, tmp_path, CPU_BOUND)
    ctx = RunAnalysis(run)
    f = unexplained_slowdown(ctx)
    assert f is not None and "mostly CPU loop" in f.title and f.severity == "high"
    outside = truth.select(pl.col("span_ms") - pl.col("compute_ms")).sum().item()
    assert f.impact == pytest.approx(outside / truth["span_ms"].sum(), abs=0.02)
    assert "CPU-bound" in f.remedy


def test_without_traces_the_rules_keep_their_other_evidence(base: Path) -> None:
    ctx = RunAnalysis(base)
    assert ctx.stage_account is None
    f = stage_imbalance(ctx)
    assert f is None or "(profiled)" not in f.title


def test_a_slow_stage_that_waits_for_work_costs_nothing_yet(base: Path, tmp_path: Path) -> None:
    waiting = PipelineProfile(compute_ms=(8.0,) * 7 + (13.0,), idle_ms=20.0, steps=16)
    run, _ = _with_profile(base, tmp_path, waiting)
    f = stage_imbalance(RunAnalysis(run))
    assert f is not None and f.basis == "measured" and f.severity == "info"
    assert f.impact == 0.0 and "recovers nothing at this load" in f.summary
