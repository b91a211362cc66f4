"""The per-stage account of generated PP traces against the generator's known truth: every
part of every stage within 5 %, on both Kineto layouts, with kernels that vary per iteration;
transfers measured (the shortest SendRecv) or modelled (bytes / a bandwidth)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from toolkit.analyze.stage_account import stage_account, stage_summary, stage_totals
from toolkit.load.profile import load_profile
from toolkit.synth.torch_trace import PipelineProfile, write_pp_profile

PARTS = ["span_ms", "compute_ms", "comm_ms", "transfer_ms", "wait_ms", "idle_cpu_ms"]
PARTS += ["idle_recv_ms", "graph_launch_ms"]

CASES = {
    "balanced": PipelineProfile(compute_ms=(6.0,) * 4, jitter=0.1),
    "slow stage": PipelineProfile(compute_ms=(6.0, 6.0, 6.0, 11.0), jitter=0.1, seed=1),
    "slow link": PipelineProfile(compute_ms=(6.0,) * 4, link_gb_s=0.8, seed=2),
    "cpu-bound": PipelineProfile(compute_ms=(3.0,) * 4, process_ms=5.0, sched_ms=2.0, seed=3),
    "empty slots": PipelineProfile(compute_ms=(6.0, 6.0, 9.0), idle_ms=12.0, seed=4),
    "old layout": PipelineProfile(compute_ms=(6.0, 9.0, 6.0), shape="kineto-2023", jitter=0.1),
}


def _account(tmp_path: Path, spec: PipelineProfile, **options: object) -> tuple:
    truth = write_pp_profile(tmp_path / "profile" / "c8", spec)
    profile = load_profile(sorted(tmp_path.rglob("*.gz")), tmp_path)
    return stage_account(profile, **options), truth  # type: ignore[arg-type]


def _per_stage(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.group_by("pp").agg(pl.col(PARTS).sum()).sort("pp")


@pytest.mark.parametrize("case", list(CASES))
def test_every_part_of_every_stage_within_5_percent(tmp_path: Path, case: str) -> None:
    spec = CASES[case]
    account, truth = _account(tmp_path, spec)
    assert account["step"].max() + 1 == spec.steps
    got, want = _per_stage(account), _per_stage(truth)
    for part in PARTS:
        for g, w in zip(got[part], want[part], strict=True):
            # within 5 % of the part, or of the stage's iteration time for parts near zero
            assert abs(g - w) <= 0.05 * max(w, 0.0) + 0.05 * spec.tick_ms * 0.1, (part, g, w)
    assert account["idle_other_ms"].sum() == pytest.approx(0.0, abs=0.01 * spec.steps)
    sent = account.filter(pl.col("pp") < spec.pp - 1)["comm_bytes"]
    assert sent.to_list() == [spec.proxy_bytes] * sent.len()


def test_each_iteration_splits_its_whole_span(tmp_path: Path) -> None:
    account, _ = _account(tmp_path, CASES["slow stage"])
    whole = pl.sum_horizontal("compute_ms", "comm_ms", "idle_cpu_ms", "idle_recv_ms")
    parts = account.select(whole + pl.col("idle_other_ms"), "span_ms")
    assert parts.to_series(0).to_list() == pytest.approx(parts["span_ms"].to_list())


def test_the_summary_names_the_slow_stage(tmp_path: Path) -> None:
    spec = CASES["slow stage"]
    account, truth = _account(tmp_path, spec)
    summary = stage_summary(account, "c8")
    assert summary is not None and summary.slowest_pp == 3 and summary.stages == 4
    kernels = dict(truth.group_by("pp").agg(pl.col("compute_ms").mean()).iter_rows())
    assert summary.imbalance == pytest.approx(kernels[3] / (sum(kernels.values()) / 4), rel=0.05)
    assert summary.pace_pp == 3  # the others wait for it
    assert 0 < summary.imbalance_noise < 0.1  # kernels vary per iteration
    idle = truth.select(pl.sum_horizontal("wait_ms", "idle_cpu_ms", "idle_recv_ms")).sum()
    assert summary.bubble_share == pytest.approx(idle.item() / truth["span_ms"].sum(), rel=0.05)


def test_a_slow_link_is_transfer_not_work_imbalance(tmp_path: Path) -> None:
    spec = CASES["slow link"]
    account, _ = _account(tmp_path, spec)
    summary = stage_summary(account, "c8")
    assert summary is not None
    assert summary.transfer_share == pytest.approx(
        3 * spec.transfer_ms / (4 * spec.tick_ms), rel=0.05
    )
    assert summary.transfer_basis.startswith("measured")
    totals = stage_totals(account)
    assert totals.filter(pl.col("pp") == 3)["transfer_ms"].item() == 0.0
    assert summary.imbalance == pytest.approx(1.0, abs=0.01)  # kernels are even


def test_one_slow_link_sets_the_pace_without_a_slow_stage(tmp_path: Path) -> None:
    spec = PipelineProfile(compute_ms=(6.0,) * 4, tokens=64, slow_links=((1, 0.5),), jitter=0.05)
    account, _ = _account(tmp_path, spec)
    summary = stage_summary(account, "c8")
    assert summary is not None and summary.pace_pp == 1
    assert summary.imbalance < 1.05
    sent = stage_totals(account).filter(pl.col("pp") == 1)
    assert sent["transfer_ms"].item() / spec.steps == pytest.approx(
        spec.transfer_ms_of(1), rel=0.05
    )


def test_a_given_bandwidth_models_transfers_and_says_so(tmp_path: Path) -> None:
    spec = CASES["slow link"]
    account, _ = _account(tmp_path, spec, bandwidth_gb_s=1.6, bandwidth_source="run.toml")
    sending = account.filter(pl.col("pp") == 0)
    assert sending["transfer_ms"].to_list() == pytest.approx(
        [spec.proxy_bytes / 1.6e9 * 1e3] * spec.steps
    )
    assert sending["transfer_basis"][0] == "modelled: bytes / 1.6 GB/s (run.toml)"


def test_the_lowest_tp_rank_stands_for_its_stage(tmp_path: Path) -> None:
    spec = PipelineProfile(compute_ms=(2.0, 2.0), steps=3)
    write_pp_profile(tmp_path / "a", spec, profile_id="1.0")
    write_pp_profile(tmp_path / "b", PipelineProfile(compute_ms=(5.0, 5.0), steps=3))
    for path in (tmp_path / "b").glob("*.gz"):  # the same stages, as TP rank 1
        path.rename(tmp_path / "a" / path.name.replace("-TP-0-", "-TP-1-"))
    profile = load_profile(sorted((tmp_path / "a").glob("*.gz")), tmp_path)
    account = stage_account(profile)
    assert account["compute_ms"].to_list() == pytest.approx([2.0] * 6)
