"""The timeline, the report's stage strips and the diagnosis read one busy share per stage.

A PP2 run whose GPU trace is dcgm-exporter text with both ``GPU_UTIL`` (≈100 % on both GPUs:
a stage waiting in NCCL counts as busy) and ``PROF_SM_ACTIVE`` (PP0 ≈ 85 %, PP1 ≈ 45 %). All
three views must show the ``sm_active`` numbers, not ``util_pct``.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from toolkit.cli.main import main
from toolkit.report import sections as views
from toolkit.run_analysis import RunAnalysis

T0 = datetime(2026, 5, 1, 10, 0, 10)
STEPS = 30  # a decode line per stage and a scrape every 2 s, 10:00:10 … 10:01:08
SM_ACTIVE = {0: (0.90, 0.80), 1: (0.40, 0.50)}  # alternating per scrape: means 85 % and 45 %
GPU_UTIL = {0: (100, 100), 1: (98, 99)}
UUID = {
    0: "GPU-a6158b59-1f3c-4e5e-9c57-5e2c0a3b7d10",
    1: "GPU-02348a17-a825-300c-0336-48e33d0dadb2",
}

SERVER_ARGS = (
    "{'model_path': '/models/Kimi-K2.6', 'tokenizer_path': '/models/Kimi-K2.6', "
    "'trust_remote_code': True, 'host': '0.0.0.0', 'port': 30000, 'mem_fraction_static': 0.86, "
    "'max_running_requests': None, 'max_total_tokens': None, 'chunked_prefill_size': 8192, "
    "'max_prefill_tokens': 16384, 'schedule_policy': 'fcfs', 'page_size': 1, 'tp_size': 1, "
    "'pp_size': 2, 'pp_max_micro_batch_size': None, 'pp_async_batch_depth': 0, "
    "'decode_log_interval': 40, 'dp_size': 1, 'ep_size': 1, 'nnodes': 1, "
    "'disable_cuda_graph': False}"
)


def _stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M:%S")


def _log() -> str:
    lines = [f"[{_stamp(T0 - timedelta(minutes=5))}] server_args={SERVER_ARGS}"]
    for i in range(STEPS):
        t = _stamp(T0 + timedelta(seconds=2 * i))
        for pp in (0, 1):
            lines.append(
                f"[{t} PP{pp}] Decode batch, #running-req: 8, #token: {8 * (1000 + 80 * i)}, "
                "token usage: 0.03, cuda graph: True, gen throughput (token/s): 160.00, "
                "#queue-req: 0"
            )
    return "\n".join(lines) + "\n"


def _series(name: str, help_text: str, values: dict[int, float]) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
    for gpu, value in values.items():
        labels = (
            f'gpu="{gpu}",UUID="{UUID[gpu]}",device="nvidia{gpu}",'
            f'modelName="NVIDIA RTX PRO 6000 Blackwell",Hostname="node-1"'
        )
        # dcgm-exporter prints int fields bare and floats %f-style
        text = str(value) if isinstance(value, int) else f"{value:f}"
        out.append(f"{name}{{{labels}}} {text}")
    return out


def _exporter() -> str:
    lines = []
    for i in range(STEPS):
        lines.append((T0 + timedelta(seconds=2 * i)).strftime("%Y-%m-%dT%H:%M:%S"))
        util = {g: GPU_UTIL[g][i % 2] for g in (0, 1)}
        sm = {g: SM_ACTIVE[g][i % 2] for g in (0, 1)}
        lines += _series("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", util)
        lines += _series(
            "DCGM_FI_PROF_SM_ACTIVE",
            "The ratio of cycles an SM has at least 1 warp assigned (in %).",
            sm,
        )
    return "\n".join(lines) + "\n"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "pp2-dcgm"
    run.mkdir()
    (run / "server.log").write_text(_log())
    (run / "dcgm.prom").write_text(_exporter())
    (run / "run.toml").write_text('label = "PP2 dcgm"\n')
    return run


def _means(values: dict[int, tuple[float, float]], scale: float) -> list[float]:
    return [scale * sum(values[g]) / 2 for g in (0, 1)]


def test_timeline_report_and_diagnosis_agree_on_sm_active(run_dir: Path, tmp_path: Path) -> None:
    expected = _means(SM_ACTIVE, 100.0)  # [85.0, 45.0]
    util = _means(GPU_UTIL, 1.0)
    assert min(util) > 95  # util_pct would tell the stages apart by ~1 point only

    # the diagnosis: per stage busy while decoding
    ctx = RunAnalysis(run_dir)
    busy = ctx.busy.sort("pp")
    assert busy["metric"].to_list() == ["sm_active", "sm_active"]
    diagnosis = busy["busy_pct"].to_list()

    # `ppscope timeline`: the GPU counters of the Chrome trace, averaged per stage
    out = tmp_path / "timeline.json"
    assert main(["timeline", str(run_dir), "-o", str(out)]) == 0
    counters = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "C"]
    gpu = [e for e in counters if e["name"].startswith("GPU ")]
    timeline = [
        sum(e["args"]["busy_pct"] for e in mine) / len(mine)
        for stage in ("(PP0)", "(PP1)")
        if (mine := [e for e in gpu if e["name"].endswith(stage)])
    ]

    # the report's stage strips: the busy series is named after its metric
    view = views.stage_timeline(views.load_runs([str(run_dir)], progress=False))
    stages = view.record["stage_timeline"]["stages"].sort("stage")
    assert "sm_active" in stages.columns and "util_pct" not in stages.columns
    report = stages["sm_active"].to_list()

    # The diagnosis weights each sample by the part of the period before its stamp that falls
    # inside a decoding window, so the windows' edges move it by a fraction of a point; the
    # metric is the same (util_pct would read above 95 for both stages).
    assert diagnosis == pytest.approx(expected, abs=0.5)
    assert timeline == pytest.approx(expected)
    assert report == pytest.approx(expected)
    legend = json.dumps(view.chart.to_dict())
    assert "GPU SM active, %" in legend and "mean SM active" in legend
