"""``toolkit.synth``: deterministic runs that the loaders read cleanly and that match the seed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from helpers import SAMPLE

from toolkit import load_sglang_log
from toolkit.errors import ToolkitError
from toolkit.load.run_config import read_run_config
from toolkit.synth import SEED_POINTS, TRUTH, write_incident, write_run
from toolkit.synth.calibrate import solve
from toolkit.synth.gpu_csv import HEADER

FILES = ("server.log", "gpu.csv", "bench.jsonl", "run.toml")
INCIDENT = SAMPLE
SHORT = (1, 32)  # a single-stream and a multi-slot phase: the seed points, and fast
# uvicorn's own start-up lines are the only ones no loader claims.
UVICORN = re.compile(
    r"^INFO: {5}(Started server process|Waiting for application|Application startup|Uvicorn run)"
)
ABSOLUTE = re.compile(r"(?<![\w.:/])/(?:home|root|tmp|work|models|mnt|opt|srv|Users|var|data)/")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Short synthetic runs of each layout and both version profiles."""
    root = tmp_path_factory.mktemp("synth")
    out = {}
    for name in ("tp8", "pp8", "pp8-fixed"):
        out[name] = write_run(root / name, layout_name=name, concurrencies=SHORT)
    out["pp8-0.5.7"] = write_run(
        root / "pp8-057", layout_name="pp8", version="0.5.7", concurrencies=SHORT
    )
    out["tp8-0.5.7"] = write_run(
        root / "tp8-057", layout_name="tp8", version="0.5.7", concurrencies=SHORT
    )
    return out


def _bench(path: Path) -> dict[int, dict]:
    lines = (path / "bench.jsonl").read_text().splitlines()
    return {r["max_concurrency"]: r for r in map(json.loads, lines)}


def test_two_writes_give_identical_bytes(runs: dict[str, Path], tmp_path: Path) -> None:
    again = write_run(tmp_path / "again", layout_name="pp8", concurrencies=SHORT)
    for name in FILES:
        assert (again / name).read_bytes() == (runs["pp8"] / name).read_bytes(), name


@pytest.mark.parametrize("run", ["tp8", "pp8", "pp8-fixed", "pp8-0.5.7", "tp8-0.5.7"])
def test_log_loads_without_unrecognized_sglang_lines(runs: dict[str, Path], run: str) -> None:
    log = load_sglang_log(runs[run] / "server.log", cache=False)
    cov = log.coverage()
    assert cov["incomplete_batches"] == 0
    assert cov["unreadable"] == cov["undated"] == 0
    assert log.errors.height == 0
    other = log.unrecognized(100)["message"].to_list()
    assert other and all(UVICORN.match(m) for m in other), other
    assert log.http.height == sum(r["completed"] + 1 for r in _bench(runs[run]).values()) + 2


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ("tp8", {"tp_size": 8, "pp_size": 1, "pp_async_batch_depth": 0}),
        (
            "pp8",
            {
                "tp_size": 1,
                "pp_size": 8,
                "pp_async_batch_depth": 8,
                "pp_max_micro_batch_size": None,
            },
        ),
        ("pp8-fixed", {"pp_size": 8, "pp_async_batch_depth": 8, "pp_max_micro_batch_size": 4}),
        ("pp8-0.5.7", {"pp_size": 8, "pp_async_batch_depth": 8, "pp_max_micro_batch_size": None}),
    ],
)
def test_one_launch_with_the_intended_server_args(
    runs: dict[str, Path], run: str, expected: dict
) -> None:
    log = load_sglang_log(runs[run] / "server.log", cache=False)
    (launch,) = log.launches
    assert launch.complete
    for key, value in expected.items():
        assert launch.server_args[key] == value, key
    facts = launch.facts()
    assert facts["max_total_num_tokens"] == (327680 if "pp8" in run else 139827)
    assert facts["max_running_requests"] == 2048
    assert facts["ready"] == "ready"


@pytest.mark.parametrize("run", ["pp8", "pp8-fixed", "pp8-0.5.7"])
def test_pp_stages_log_in_lock_step(runs: dict[str, Path], run: str) -> None:
    batches = load_sglang_log(runs[run] / "server.log", cache=False).batches
    decode = batches.filter(pl.col("kind") == "decode").with_columns(
        ordinal=pl.int_range(pl.len()).over("pp")
    )
    assert sorted(decode["pp"].unique().to_list()) == list(range(8))
    assert decode.group_by("pp").len()["len"].n_unique() == 1  # every rank, every line
    per_line = decode.group_by("ordinal").agg(
        pl.col("running_req").n_unique().alias("running"),
        pl.col("token").n_unique().alias("token"),
        (pl.col("ts").max() - pl.col("ts").min()).alias("spread"),
    )
    assert per_line["running"].max() == 1 and per_line["token"].max() == 1
    assert per_line["spread"].dt.total_seconds().max() <= 1
    prefill = batches.filter(pl.col("kind") == "prefill")
    assert prefill.group_by("pp").len()["len"].n_unique() == 1


def test_pp_slot_size_and_front_packing(runs: dict[str, Path]) -> None:
    def decode(run: str, rank: int = 0) -> pl.DataFrame:
        b = load_sglang_log(runs[run] / "server.log", cache=False).batches
        return b.filter((pl.col("kind") == "decode") & (pl.col("pp") == rank))

    # c=32 on PP8 d=8: chunk-limited packing puts 8 requests in each of 4 slots (§1.2).
    assert decode("pp8")["running_req"].max() == 8
    assert decode("pp8-fixed")["running_req"].max() == 4
    burst = load_sglang_log(runs["pp8"] / "server.log", cache=False).batches.filter(
        (pl.col("kind") == "prefill") & (pl.col("pp") == 3) & (pl.col("queue_req") == 23)
    )
    assert burst.row(0, named=True)["new_token"] == 8192


def test_tp8_logs_only_from_tp0(runs: dict[str, Path]) -> None:
    log = load_sglang_log(runs["tp8"] / "server.log", cache=False)
    assert log.batches["tp"].unique().to_list() == [0]
    assert log.batches["pp"].null_count() == log.batches.height
    assert log.batches.filter(pl.col("kind") == "decode")["running_req"].max() == 32


def test_gpu_csv_is_nvidia_smi_query_output(runs: dict[str, Path]) -> None:
    path = runs["pp8"] / "gpu.csv"
    text = path.read_text().splitlines()
    assert text[0] == HEADER
    frame = pl.read_csv(path)
    samples = len(text) - 1
    assert frame.height == samples and samples % 8 == 0
    assert [c.strip() for c in frame.columns][4] == "utilization.gpu [%]"
    row = text[1].split(", ")
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", row[0])
    assert row[1] == "0" and re.fullmatch(r"\d+ %", row[4]) and row[6].endswith(" MiB")
    assert re.fullmatch(r"\d+\.\d\d W", row[8]) and row[9].endswith(" MHz")
    index = [int(line.split(", ")[1]) for line in text[1:17]]
    assert index == list(range(8)) * 2
    util = [int(line.split(", ")[4].removesuffix(" %")) for line in text[1:]]
    assert max(util) > 40 and min(util) == 0  # busy during the runs, idle in the gaps


def test_gpu_csv_through_the_gpu_loader(runs: dict[str, Path]) -> None:
    try:
        from toolkit.load.gpu.trace import load_gpu_trace
    except ImportError:
        pytest.skip("toolkit.load.gpu.trace is not available")
    path = runs["pp8"] / "gpu.csv"
    trace = load_gpu_trace(path)
    assert trace.samples.height == len(path.read_text().splitlines()) - 1
    assert trace.skipped.get_column("reason").to_list() == ["header"]


@pytest.mark.parametrize("run", ["pp8", "tp8-0.5.7"])
def test_bench_jsonl_keys_and_consistency(runs: dict[str, Path], run: str) -> None:
    results = _bench(runs[run])
    assert sorted(results) == list(SHORT)
    for c, r in results.items():
        assert r["backend"] == "sglang" and r["request_rate"] == float("inf")
        assert r["completed"] == max(c, 2)
        assert r["output_throughput"] == pytest.approx(r["total_output_tokens"] / r["duration"])
        assert r["mean_tpot_ms"] < r["mean_e2e_latency_ms"]
        assert r["p99_itl_ms"] >= r["median_itl_ms"] > 0
        info = r["server_info"]
        assert (info["tp_size"], info["pp_size"]) == ((1, 8) if "pp8" in run else (8, 1))
        newer = {"total_throughput", "p90_ttft_ms", "p95_tpot_ms", "max_output_tokens_per_s"}
        assert newer <= set(r) if run == "pp8" else not newer & set(r)


def test_run_toml_says_synthetic_and_how(runs: dict[str, Path]) -> None:
    for name in ("tp8", "pp8", "pp8-fixed"):
        config = read_run_config(runs[name])
        assert config.synthetic is True and config.interconnect == "pcie"
        assert config.hardware == "8x RTX PRO 6000 Blackwell"
        assert f'Written by toolkit.synth.write_run(<dir>, layout_name="{name}"' in config.notes
        assert "seed=0" in config.notes and "SYNTHETIC" in config.notes
        assert "launch_server" in config.command
    assert "Injected" in read_run_config(runs["pp8"]).notes
    assert "Remedy" in read_run_config(runs["pp8-fixed"]).notes


def test_no_absolute_paths_in_generated_files(runs: dict[str, Path]) -> None:
    for run in runs.values():
        for name in FILES:
            text = (run / name).read_text()
            assert not ABSOLUTE.search(text), (run.name, name, ABSOLUTE.search(text))
            assert str(run) not in text


def test_calibrated_to_the_seed_numbers(runs: dict[str, Path]) -> None:
    """The incident's four numbers, read from the JSONL the way a user would, within 5 %."""
    for (name, c), seed in SEED_POINTS.items():
        measured = _bench(runs[name])[c]["output_throughput"]
        assert measured == pytest.approx(seed, rel=0.05), (name, c)
        assert measured == pytest.approx(seed, rel=0.01), (name, c)  # and no drift


def test_remedy_helps_with_the_same_overhead(runs: dict[str, Path]) -> None:
    fixed = _bench(runs["pp8-fixed"])[32]["output_throughput"]
    assert fixed > 1.3 * _bench(runs["pp8"])[32]["output_throughput"]


def test_truth_is_the_solver_fixed_point() -> None:
    assert solve(TRUTH, tol=0.01) is TRUTH


def test_bad_arguments_are_toolkit_errors(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="unknown layout"):
        write_run(tmp_path, layout_name="pp3")
    with pytest.raises(ToolkitError, match=r"0\.5\.7, 0\.5\.23"):
        write_run(tmp_path, layout_name="pp8", version="0.4.0")
    with pytest.raises(ToolkitError, match="concurrency"):
        write_run(tmp_path, layout_name="pp8", concurrencies=(0,))


@pytest.mark.skipif(
    not (INCIDENT / "pp8" / "server.log").exists(), reason="data/incident not generated"
)
def test_committed_incident_data_is_what_the_command_writes(tmp_path: Path) -> None:
    fresh = write_incident(tmp_path / "incident")
    for run in fresh:
        for name in FILES:
            committed = INCIDENT / run.name / name
            assert committed.read_bytes() == (run / name).read_bytes(), f"{run.name}/{name}"
        notes = read_run_config(run).notes
        assert "Regenerate: python -m toolkit.synth data/incident" in notes


@pytest.mark.skipif(
    not (INCIDENT / "pp8" / "server.log").exists(), reason="data/incident not generated"
)
def test_committed_incident_data_loads_clean_and_matches_the_seed() -> None:
    for run in ("tp8", "pp8", "pp8-fixed"):
        log = load_sglang_log(INCIDENT / run / "server.log", cache=False)
        assert log.coverage()["incomplete_batches"] == 0
        assert all(UVICORN.match(m) for m in log.unrecognized(100)["message"])
    for (name, c), seed in SEED_POINTS.items():
        measured = _bench(INCIDENT / name)[c]["output_throughput"]
        assert measured == pytest.approx(seed, rel=0.05), (name, c)


@pytest.mark.parametrize("name", ["tp8", "pp8"])
def test_the_process_listing_names_one_scheduler_per_gpu(name: str) -> None:
    """Each GPU of the trace holds one scheduler, titled as SGLang titles it and found by its
    UUID: the listing is the server's own, so it names no foreign process."""
    from toolkit.analyze.processes import judge_processes
    from toolkit.load.run import load_run

    run = load_run(INCIDENT / name)
    judged = judge_processes(run.compute_apps)
    assert sorted(judged["gpu"].to_list()) == list(range(8))
    assert judged["server"].all()
    assert judged["process_name"].str.starts_with("sglang::scheduler_").all()
