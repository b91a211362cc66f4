"""Per-stage shares measured by SGLang's /metrics, per phase, and where they are reported."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.stage_wait import (
    STAGE_SERIES,
    STAGE_SHARES,
    stage_share_series,
    stage_wait_share,
)
from toolkit.cli.main import main
from toolkit.diagnose import RunAnalysis, diagnose
from toolkit.load.prometheus import load_metrics

SNAPSHOTS = TEST_DATA / "prometheus" / "metrics.jsonl"


def _rates(path: Path) -> dict[tuple[str, int, str | None], float]:
    """Per (metric, pp_rank, category): the growth between the file's first two scrapes."""
    first: dict[tuple[str, int, str | None], float] = {}
    out: dict[tuple[str, int, str | None], float] = {}
    for i, line in enumerate(path.read_text().splitlines()[:2]):
        for row in json.loads(line)["text"].splitlines():
            if row.startswith("#") or 'pp_rank="' not in row or "_created" in row:
                continue
            name = row.split("{", 1)[0]
            pp = int(row.split('pp_rank="', 1)[1].split('"', 1)[0])
            category = (
                row.split('category="', 1)[1].split('"', 1)[0] if "category=" in row else None
            )
            key, value = (name, pp, category), float(row.rsplit(" ", 1)[1])
            if i == 0:
                first[key] = value
            else:
                out[key] = value - first[key]
    return out


def test_shares_are_the_counters_growth_over_wall_time() -> None:
    shares = stage_wait_share(load_metrics([SNAPSHOTS]).samples)
    assert shares.schema == STAGE_SHARES
    rates = _rates(SNAPSHOTS)  # the fixture's scrapes are one second apart
    for measure, metric in (
        ("gpu_busy", "sglang:gpu_execution_seconds_total"),
        ("scheduler_idle", "sglang:scheduler_idle_seconds_total"),
    ):
        rows = shares.filter(pl.col("measure") == measure)
        assert rows["pp_rank"].to_list() == [0, 1, 2, 3]
        for pp, share in zip(rows["pp_rank"], rows["share"], strict=True):
            assert share == pytest.approx(
                rates[(metric, pp, "decode" if "gpu" in measure else None)]
            )
    recv = shares.filter(pl.col("category") == "recv_requests")
    for pp, share in zip(recv["pp_rank"], recv["share"], strict=True):
        assert share == pytest.approx(
            rates[("sglang:scheduler_stage_seconds_total", pp, "recv_requests")]
        )
    # the scheduler's stages split its whole wall time
    stages = shares.filter(pl.col("measure") == "scheduler_stage")
    assert (
        stages.group_by("pp_rank").agg(pl.col("share").sum())["share"].to_list()
        == [pytest.approx(1.0)] * 4
    )


def test_phases_take_the_intervals_whose_midpoint_they_hold() -> None:
    samples = load_metrics([SNAPSHOTS]).samples
    t0 = samples["ts"].min()
    phases = pl.DataFrame(
        {
            "phase": [0, 1, 2],
            "start": [t0, t0 + timedelta(seconds=3), t0 + timedelta(hours=1)],
            "end": [t0 + timedelta(seconds=3), t0 + timedelta(seconds=6), t0 + timedelta(hours=2)],
        }
    )
    shares = stage_wait_share(samples, phases)
    busy = shares.filter(pl.col("measure") == "gpu_busy", pl.col("pp_rank") == 0)
    assert busy["phase"].to_list() == [0, 1]  # nothing was scraped in phase 2
    assert busy["wall_s"].to_list() == [3.0, 3.0]
    queued = shares.filter(pl.col("measure") == "queued", pl.col("pp_rank") == 0)
    assert queued["samples"].to_list() == [4, 4]  # gauges: scrapes inside the phase


def test_no_pp_rank_label_gives_no_rows() -> None:
    samples = load_metrics([SNAPSHOTS]).samples.with_columns(
        pl.lit(None, pl.Int32).alias("pp_rank")
    )
    assert stage_wait_share(samples).height == 0


def _metrics_over(run: Path, start: datetime, seconds: int, busy: dict[int, float]) -> None:
    lines = []
    for i in range(seconds + 1):
        text = "# TYPE sglang:gpu_execution_seconds counter\n" + "".join(
            f'sglang:gpu_execution_seconds_total{{category="decode",pp_rank="{pp}",tp_rank="0"}} '
            f"{rate * i:.6f}\n"
            for pp, rate in busy.items()
        )
        ts = (start + timedelta(seconds=i)).isoformat(timespec="milliseconds")
        lines.append(json.dumps({"ts": ts, "text": text}))
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")


def test_idle_findings_carry_the_measured_shares(tmp_path: Path) -> None:
    run = tmp_path / "pp8"
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-bubbles", run)
    before = {f.id: f for f in diagnose([run])}
    assert "gpu-idle-bubbles" in before and "/metrics" not in before["gpu-idle-bubbles"].summary
    ctx = RunAnalysis(run)
    start = ctx.phases["start"].min() - timedelta(seconds=5)
    span = int((ctx.phases["end"].max() - start).total_seconds()) + 10
    busy = {pp: round(0.30 + 0.05 * pp, 2) for pp in range(8)}
    _metrics_over(run, start, span, busy)
    after = {f.id: f for f in diagnose([run])}
    finding = after["gpu-idle-bubbles"]
    # the measured shares are the finding's evidence now (the log's fwd occupancy was before),
    # and its summary still lists them stage by stage
    mean = sum(busy.values()) / len(busy)
    assert f"busy {mean:.0%} (/metrics sglang:gpu_execution_seconds_total)" in finding.summary
    expected = ", ".join(f"PP{pp} {rate:.0%}" for pp, rate in busy.items())
    assert f"GPU busy {expected} (sglang:gpu_execution_seconds_total)" in finding.summary
    # the stages' measured shares climb from PP0 to PP7: the busiest sets the pace
    imbalance = after["stage-imbalance"]
    assert imbalance.title.startswith("Stage 7 ") and "/metrics" in imbalance.summary


def test_timeline_json_carries_the_shares(tmp_path: Path) -> None:
    run = tmp_path / "pp8"
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-bubbles", run)
    ctx = RunAnalysis(run)
    _metrics_over(run, ctx.phases["start"].min(), 10, {0: 0.5, 1: 0.25})
    out = tmp_path / "trace.json"
    assert main(["timeline", str(run), "-o", str(out), "-q"]) == 0
    trace = json.loads(out.read_text())
    rows = trace["otherData"]["stage_wait_share"]
    busy = {r["pp_rank"]: r["share"] for r in rows if r["measure"] == "gpu_busy"}
    assert busy == {0: pytest.approx(0.5), 1: pytest.approx(0.25)}
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "PP1 gpu_busy %"]
    assert len(counters) == 10 and {e["args"]["pct"] for e in counters} == {25.0}


def test_share_series_per_interval() -> None:
    samples = load_metrics([SNAPSHOTS]).samples
    series = stage_share_series(samples)
    assert series.schema == STAGE_SERIES
    rates = _rates(SNAPSHOTS)
    busy = series.filter(pl.col("measure") == "gpu_busy", pl.col("pp_rank") == 3)
    intervals = samples.filter(
        pl.col("metric") == "sglang:gpu_execution_seconds_total", pl.col("pp_rank") == 3
    )
    assert busy.height == intervals.height
    assert busy["share"].to_list() == pytest.approx(
        [rates[("sglang:gpu_execution_seconds_total", 3, "decode")]] * busy.height
    )
    stages = series.filter(pl.col("measure") == "scheduler_stage")
    total = stages.group_by("ts", "pp_rank").agg(pl.col("share").sum())["share"]
    # a restart drops an interval from the series that went down only
    assert (total <= 1 + 1e-9).all()


def test_an_unreadable_metrics_file_is_named_and_leaves_the_rest_as_it_was(tmp_path: Path) -> None:
    run = tmp_path / "pp8"
    shutil.copytree(TEST_DATA / "diagnose" / "pp8-bubbles", run)
    before = [(f.id, f.summary) for f in diagnose([run])]
    (run / "answer.json").write_text('{"status": "error", "data": {"resultType": "matrix"}}')
    after = diagnose([run])
    named = [f for f in after if f.id == "input-mismatch"]
    assert len(named) == 1 and "answer.json" in named[0].summary  # never dropped in silence
    assert [(f.id, f.summary) for f in after if f.id != "input-mismatch"] == before
