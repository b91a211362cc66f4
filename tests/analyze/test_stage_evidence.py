"""Each stage's busy share from the best evidence a run holds, and the stage findings on it.

The runs are the sample's PP8 run with ``/metrics`` snapshots as ``ppscope capture`` writes
them (``metrics.jsonl``: one ``{"ts", "text"}`` object per one-second scrape of the server's
own ``/metrics``, every family with its HELP and TYPE lines, scheduler series labelled
``engine_type``, ``model_name``, ``moe_ep_rank``, ``pp_rank``, ``tp_rank``, counters with their
``_created`` lines, tokenizer counters labelled ``model_name`` only). The stages' device-time
counters grow only while the log shows decoding.
"""

from __future__ import annotations

import json
import math
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from helpers import SAMPLE

from toolkit.analyze.stage_evidence import SOURCES, STAGE_EVIDENCE, stage_shares
from toolkit.diagnose import diagnose
from toolkit.run_analysis import RunAnalysis

MODEL = "moonshotai/Kimi-K2.6"
JITTER = 0.04  # each scrape's device time is the stage's rate ± this, alternating
RATES = {pp: (0.92 if pp == 5 else 0.52) for pp in range(8)}


def _labels(pp: int, **extra: str) -> str:
    pairs = {
        **extra,
        "engine_type": "unified",
        "model_name": MODEL,
        "moe_ep_rank": "0",
        "pp_rank": str(pp),
        "tp_rank": "0",
    }
    return ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items()))


def _scrape(totals: dict[str, float], running: int, created: float, metric: str) -> str:
    family = metric.removesuffix("_total")
    lines = [
        "# HELP sglang:num_running_reqs The number of running requests.",
        "# TYPE sglang:num_running_reqs gauge",
        *(f"sglang:num_running_reqs{{{_labels(pp)}}} {running:.1f}" for pp in RATES),
        f"# HELP {metric} Total time that GPU is busy executing a workload.",
        f"# TYPE {metric} counter",
    ]
    for pp in RATES:
        labels = _labels(pp, category="decode")
        lines.append(f"{metric}{{{labels}}} {totals[f'busy{pp}']:.6f}")
        lines.append(f"{family}_created{{{labels}}} {created:.7e}")
    lines += [
        "# HELP sglang:scheduler_idle_seconds_total Scheduler idle wall time.",
        "# TYPE sglang:scheduler_idle_seconds_total counter",
        *(
            f"sglang:scheduler_idle_seconds_total{{{_labels(pp)}}} {totals[f'idle{pp}']:.6f}"
            for pp in RATES
        ),
        "# HELP sglang:generation_tokens_total Number of generation tokens processed.",
        "# TYPE sglang:generation_tokens_total counter",
        f'sglang:generation_tokens_total{{model_name="{MODEL}"}} {totals["tokens"]:.1f}',
        f'sglang:generation_tokens_created{{model_name="{MODEL}"}} {created:.7e}',
    ]
    return "\n".join(lines) + "\n"


def _capture_metrics(
    run_dir: Path,
    windows: list[tuple[datetime, datetime]],
    *,
    ahead: timedelta = timedelta(0),
    metric: str = "sglang:gpu_execution_seconds_total",
) -> None:
    """``metrics.jsonl`` scraped every second from a minute before the first decoding window
    to a minute after the last, on a clock ``ahead`` of the log's."""
    start, end = windows[0][0] - timedelta(minutes=1), windows[-1][1] + timedelta(minutes=1)
    totals = {"tokens": 0.0, **{f"busy{pp}": 0.0 for pp in RATES}}
    totals |= {f"idle{pp}": 0.0 for pp in RATES}
    created = (start - timedelta(minutes=5)).timestamp()
    out, k, t = [], 0, start
    while t <= end:
        # the share of the second before this scrape the server spent decoding
        inside = sum(
            max(0.0, (min(t, b) - max(t - timedelta(seconds=1), a)).total_seconds())
            for a, b in windows
        )
        sign = 1 if k % 2 else -1
        for pp, rate in RATES.items():
            totals[f"busy{pp}"] += inside * (rate + sign * JITTER)
            totals[f"idle{pp}"] += 1.0 - inside
        totals["tokens"] += 250.0 * inside
        text = _scrape(totals, 8 if inside else 0, created, metric)
        ts = (t + ahead).isoformat(timespec="milliseconds")
        out.append(json.dumps({"ts": ts, "text": text}))
        k, t = k + 1, t + timedelta(seconds=1)
    (run_dir / "metrics.jsonl").write_text("\n".join(out) + "\n")


def _decoding(ctx: RunAnalysis) -> list[tuple[datetime, datetime]]:
    return list(ctx.phases.select("start", "end").iter_rows())


@pytest.fixture(scope="module")
def sample() -> RunAnalysis:
    return RunAnalysis(SAMPLE / "pp8")


def _metrics_run(tmp_path: Path, sample: RunAnalysis, **options: object) -> Path:
    """The sample's PP8 run without its GPU trace, with ``/metrics`` snapshots."""
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    (run_dir / "gpu.csv").unlink()
    _capture_metrics(run_dir, _decoding(sample), **options)  # type: ignore[arg-type]
    return run_dir


@pytest.mark.parametrize(
    "metric", ["sglang:gpu_execution_seconds_total", "sglang:forward_execution_seconds_total"]
)
def test_per_rank_device_time_gives_the_stage_imbalance(
    tmp_path: Path, sample: RunAnalysis, metric: str
) -> None:
    run_dir = _metrics_run(tmp_path, sample, metric=metric)
    ctx = RunAnalysis(run_dir)
    assert ctx.gpu_samples is None
    evidence = ctx.stage_evidence
    assert evidence.schema == STAGE_EVIDENCE
    assert evidence["source"].unique().to_list() == ["/metrics device time"]
    assert evidence["metric"].unique().to_list() == [metric]
    # in each phase's steady window every stage runs at its own rate
    full = evidence.filter(pl.col("phase") == 6).sort("pp")
    rates = [100 * RATES[pp] for pp in range(8)]
    assert full["busy_pct"].to_list() == pytest.approx(rates, abs=1.0)
    # the noise is the spread of the per-scrape shares over the intervals read
    for n, stderr in full.select("samples", "stderr_pct").iter_rows():
        assert stderr == pytest.approx(100 * JITTER / math.sqrt(n), rel=0.35)
    # over every decoding stretch (pauses between benchmark runs included) the ratio holds
    whole = evidence.filter(pl.col("phase").is_null()).sort("pp")
    assert whole.height == 8
    assert whole["busy_pct"][5] / whole["busy_pct"][0] == pytest.approx(0.92 / 0.52, rel=0.02)
    assert ctx.busy["metric"].unique().to_list() == [f"/metrics {metric}"]
    found = {f.id: f for f in diagnose([ctx])}
    imbalance = found["stage-imbalance"]
    mean = sum(RATES.values()) / len(RATES)
    assert imbalance.title == f"Stage 5 is {0.92 / mean:.2f}× as busy as the mean stage"
    assert f"(/metrics {metric})" in imbalance.summary
    assert "92 % busy" in imbalance.summary


def test_without_metrics_the_stage_split_is_only_modelled(tmp_path: Path) -> None:
    """The same run without ``/metrics``: nothing measures the stages, the finding (if any)
    is the layer split's model, never stage 5."""
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    (run_dir / "gpu.csv").unlink()
    ctx = RunAnalysis(run_dir)
    assert not ctx.stage_evidence.height and ctx.busy_by_phase is None
    found = {f.id: f for f in diagnose([ctx])}
    if "stage-imbalance" in found:
        assert found["stage-imbalance"].basis == "modelled"
        assert not found["stage-imbalance"].title.startswith("Stage 5")


def test_metrics_on_a_clock_hours_ahead_are_placed_and_read(
    tmp_path: Path, sample: RunAnalysis
) -> None:
    run_dir = _metrics_run(tmp_path, sample, ahead=timedelta(hours=3))
    ctx = RunAnalysis(run_dir)
    (record,) = [r for r in ctx.clocks if r["input"] == "metrics"]
    assert record["files"] == "metrics.jsonl" and record["source"] == "estimated"
    assert record["offset_s"] == -10800
    assert "the /metrics scrapes are on a clock 3 h ahead of the log's" in record["note"]
    full = ctx.stage_evidence.filter(pl.col("phase") == 6).sort("pp")
    rates = [100 * RATES[pp] for pp in range(8)]
    assert full["busy_pct"].to_list() == pytest.approx(rates, abs=1.0)
    assert any(m["input"] == "metrics clock" for m in ctx.mismatches)


def test_a_gpu_trace_is_preferred_to_the_metrics(tmp_path: Path, sample: RunAnalysis) -> None:
    run_dir = tmp_path / "pp8"
    shutil.copytree(SAMPLE / "pp8", run_dir)
    _capture_metrics(run_dir, _decoding(sample))
    ctx = RunAnalysis(run_dir)
    assert set(ctx.stage_evidence["source"]) == {"gpu trace util_pct"}
    assert ctx.busy.equals(sample.busy)


def _timeline(rows: list[tuple[int, float]]) -> pl.DataFrame:
    t0 = datetime(2026, 5, 1, 10, 0, 0)
    return pl.DataFrame(
        {
            "ts": [t0 + timedelta(seconds=i) for i in range(len(rows))],
            "pp": [pp for pp, _ in rows],
            "kind": ["decode"] * len(rows),
            "fwd_occupancy_pct": [v for _, v in rows],
        },
        schema={
            "ts": pl.Datetime("ms"),
            "pp": pl.Int64,
            "kind": pl.String,
            "fwd_occupancy_pct": pl.Float64,
        },
    )


def test_the_log_s_fwd_occupancy_is_read_without_trace_or_metrics() -> None:
    rows = [(pp, 40.0 + 20 * pp + (2.0 if i % 2 else -2.0)) for i in range(20) for pp in (0, 1)]
    timeline = _timeline(rows)
    windows = pl.DataFrame(
        {"phase": [0], "start": [timeline["ts"].min()], "end": [timeline["ts"].max()]}
    )
    out = stage_shares(pl.DataFrame(), windows=windows, timeline=timeline).sort("pp")
    assert out["source"].to_list() == [SOURCES[3]] * 2
    assert out["busy_pct"].to_list() == pytest.approx([40.0, 60.0])
    assert out["samples"].to_list() == [20, 20]
    spread = 2.0 * math.sqrt(20 / 19)  # the sample standard deviation of ±2
    assert out["stderr_pct"].to_list() == pytest.approx([spread / math.sqrt(20)] * 2)
