"""Gateway spellings: ``sglang_*`` read as ``sglang:*``, router series kept apart, workers and
stages never added up, and the rename stated as a caveat."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA

from toolkit.analyze.stage_wait import stage_wait_share
from toolkit.diagnose.measured_stages import stage_shares
from toolkit.load.prometheus import TEXT, load_metrics, summarize_metrics
from toolkit.load.sniff import sniff
from toolkit.run_analysis import RunAnalysis
from toolkit.schema.prometheus import METRICS

DATA = TEST_DATA / "prometheus"
NATIVE = DATA / "metrics-dated.txt"
GATEWAY = DATA / "metrics-gateway.txt"
WORKER = "http://10.0.0.5:30000"


def _shares(path: Path) -> pl.DataFrame:
    return stage_wait_share(load_metrics([path]).samples).drop("metric")


def test_a_gateway_scrape_is_recognized_and_read_under_sglang_names() -> None:
    assert sniff(GATEWAY) == TEXT
    m = load_metrics([GATEWAY])
    names = set(m.samples["metric"].to_list())
    assert "sglang:gpu_execution_seconds_total" in names
    assert not any(n.startswith(("sglang_", "sgl_router_")) for n in names)
    # the worker label stays with each series
    engine = m.samples.filter(pl.col("metric").str.starts_with("sglang:num_running"))
    assert {json.loads(x)["worker_addr"] for x in engine["labels"]} == {WORKER}
    kinds = {c.kind: c for c in m.caveats}
    assert kinds["gateway-rename"].file == str(GATEWAY)
    assert kinds["gateway-rename"].count == 9  # distinct sglang_* series of the file
    assert "via a gateway" in kinds["gateway-rename"].text()


def test_gateway_and_native_scrapes_of_one_run_give_the_same_stage_shares() -> None:
    native, gateway = _shares(NATIVE), _shares(GATEWAY)
    assert native.height > 0
    assert gateway.equals(native)
    busy = native.filter(pl.col("measure") == "gpu_busy").sort("pp_rank")
    # 9.5 and 9.0 busy seconds over the 10 s between the two answers
    assert busy["share"].to_list() == pytest.approx([0.95, 0.90])


def test_router_series_are_their_own_table() -> None:
    m = load_metrics([GATEWAY])
    assert m.router.schema == METRICS
    assert set(m.router["metric"].to_list()) == {
        "sgl_router_requests_total",
        "sgl_router_processed_requests_total",
        "sgl_router_running_requests",
        "sgl_router_generate_duration_seconds",
    }
    processed = m.router.filter(pl.col("metric") == "sgl_router_processed_requests_total")
    assert processed["value"].to_list() == [1424 - 1180]
    latency = m.router.filter(pl.col("metric") == "sgl_router_generate_duration_seconds")
    # the interval's mean latency: Δsum / Δcount
    assert latency["value"][0] == pytest.approx((1424 * 3.6 - 1180 * 3.1) / (1424 - 1180))
    summary = summarize_metrics(GATEWAY)
    assert summary["router"]["workers"] == [WORKER]
    assert "sgl_router_running_requests" not in summary["metrics"]
    assert {c["kind"] for c in summary["caveats"]} == {"gateway-rename", "router-series"}


def test_a_router_only_file_is_read_with_no_engine_series(tmp_path: Path) -> None:
    text = GATEWAY.read_text()
    kept = [ln for ln in text.splitlines() if not re.match(r"^(# \w+ )?(sglang_|python_)", ln)]
    path = tmp_path / "router.txt"
    path.write_text("\n".join(kept) + "\n")
    assert sniff(path) == TEXT
    m = load_metrics([path])
    assert m.samples.height == 0 and m.router.height > 0


def test_two_workers_behind_a_gateway_are_averaged_per_stage_never_added(
    tmp_path: Path,
) -> None:
    """The same stage of two workers is two ranks of the stage: its share is their mean."""
    lines = []
    for line in GATEWAY.read_text().splitlines():
        lines.append(line)
        if line.startswith("sglang_gpu_execution_seconds_total{"):
            other = line.replace(WORKER, "http://10.0.0.6:30000")
            name, value = other.rsplit(" ", 1)
            lines.append(f"{name} {float(value) * 0.5}")  # grows half as fast
    path = tmp_path / "two-workers.txt"
    path.write_text("\n".join(lines) + "\n")
    busy = stage_wait_share(load_metrics([path]).samples).filter(pl.col("measure") == "gpu_busy")
    busy = busy.sort("pp_rank")
    assert busy["ranks"].to_list() == [2, 2]
    assert busy["share"].to_list() == pytest.approx([(0.95 + 0.475) / 2, (0.90 + 0.45) / 2])
    assert busy["pp_rank"].to_list() == [0, 1]  # one row per stage: never summed across stages


def _pp2_log() -> str:
    """A PP2 server's log decoding through both answers' span (the clock the metrics join)."""
    lines = [
        "[2026-05-01 10:15:30] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', "
        "tp_size=1, pp_size=2, pp_async_batch_depth=0, chunked_prefill_size=8192)"
    ]
    for s in range(32, 60):
        for pp in (0, 1):
            lines.append(
                f"[2026-05-01 10:15:{s:02d} PP{pp}] Decode batch, #running-req: 8, #token: 9000, "
                "token usage: 0.05, cuda graph: True, gen throughput (token/s): 240.00, "
                "#queue-req: 4"
            )
    return "\n".join(lines) + "\n"


def test_the_diagnosis_reads_the_same_shares_from_either_spelling(tmp_path: Path) -> None:
    shares = []
    for name, path in (("native", NATIVE), ("gateway", GATEWAY)):
        run_dir = tmp_path / name
        run_dir.mkdir()
        (run_dir / "server.log").write_text(_pp2_log())
        (run_dir / "metrics.txt").write_text(path.read_text())
        shares.append(stage_shares(RunAnalysis(run_dir), by_phase=False))
    busy = shares[0].filter(pl.col("measure") == "gpu_busy").sort("pp_rank")
    assert busy["share"].to_list() == pytest.approx([0.95, 0.90])
    assert shares[1].equals(shares[0])
