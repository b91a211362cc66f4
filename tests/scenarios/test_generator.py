"""The scenario generator itself: independent of ppscope, fast, and its files are what they
claim to be (formats by version, numbers that agree across log, benchmark, GPU trace and
``expected.json``). Whether ppscope diagnoses the scenarios is tested elsewhere."""

from __future__ import annotations

import ast
import inspect
import itertools
import json
import re
import tomllib
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest
from helpers import REPO
from helpers.independence import toolkit_imports
from helpers.scenarios import SCENARIOS, build, expected, names, scenario

PACKAGE = REPO / "tests" / "helpers" / "scenarios"

# ppscope's public finding ids (and the one for a slowdown no layout explains).
FINDING_IDS = {
    "pp-underfilled-slots",
    "running-cap",
    "kv-cache-pressure",
    "cuda-graph-miss",
    "config-not-applied",
    "stage-desync",
    "stage-imbalance",
    "scaling-collapse",
    "queue-backlog",
    "gpu-idle-bubbles",
    "prefill-interference",
    "pp-empty-async-slots",
    "pp-low-concurrency",
    "pp-lockstep-logging",
    "unexplained-slowdown",
}
RUN_TOML_KEYS = {
    "label",
    "model",
    "command",
    "hardware",
    "interconnect",
    "clock_offset_s",
    "synthetic",
    "notes",
    "gpu_trace",
}

JOURNAL = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<host>\S+) python3\[\d+\]: ")
PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?)"
    r"(?P<ranks>(?: (?:DP|PP|ATTN_CP|MOE_DP|TP|EP)\d+)*)\] (?P<msg>.*)$"
)
UNPREFIXED = ("Capturing batches", "Loading safetensors")


# -- building -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every scenario built once: name → run directory."""
    root = tmp_path_factory.mktemp("scenarios")
    return {name: build(name, root / name) for name in names()}


def run_dir(runs: dict[str, Path], name: str) -> Path:
    return runs[name]


def read_expected(directory: Path) -> dict:
    return json.loads((directory / "expected.json").read_text(encoding="utf-8"))


# -- parsing what was written -----------------------------------------------------------------


def log_lines(directory: Path, pattern: str = "server*.log") -> list[tuple[str | None, str]]:
    """(host or None, line without the journald wrapper) of every server log in a run."""
    out = []
    for path in sorted(directory.glob(pattern)):
        for line in path.read_text(encoding="utf-8").splitlines():
            m = JOURNAL.match(line)
            out.append((m["host"], line[m.end() :]) if m else (None, line))
    return out


def records(
    directory: Path, pattern: str = "server*.log"
) -> list[tuple[datetime, dict[str, int], str]]:
    """(time, rank tags, message) of every prefixed log line."""
    out = []
    for _, line in log_lines(directory, pattern):
        m = PREFIX.match(line)
        if m is None:
            continue
        ts = m["ts"]
        when = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S.%f" if "." in ts else "%Y-%m-%d %H:%M:%S")
        ranks = {t[: -len(n)]: int(n) for t in m["ranks"].split() for n in [re.sub(r"\D", "", t)]}
        out.append((when, ranks, m["msg"]))
    return out


def decode_pattern(version: tuple[int, ...]) -> re.Pattern[str]:
    head = "Decode batch. " if version < (0, 5, 5) else "Decode batch, "
    tail = ", " if (0, 5, 5) <= version < (0, 5, 9) else ""
    return re.compile(
        "^" + re.escape(head) + r"#running-req: (?P<running>\d+), #token: (?P<token>\d+), "
        r"token usage: (?P<usage>\d\.\d\d), cuda graph: (?P<graph>True|False), "
        r"gen throughput \(token/s\): (?P<gen>\d+\.\d\d), #queue-req: (?P<queue>\d+)"
        + re.escape(tail)
        + "$"
    )


def decode_lines(directory: Path, stage: int = 0) -> list[tuple[datetime, dict[str, str]]]:
    """Decode lines of one stage's TP0 (all ranks print the same), parsed strictly."""
    sc = scenario(read_expected(directory)["scenario"])
    pattern = decode_pattern(sc.version_tuple)
    out = []
    for when, ranks, msg in records(directory):
        if msg.startswith("Decode batch") and ranks.get("PP", 0) == stage:
            m = pattern.match(msg)
            assert m, f"decode line out of format for {sc.version}: {msg!r}"
            out.append((when, m.groupdict()))
    return out


def phase_of(directory: Path) -> list[tuple[datetime, datetime]]:
    """Wall-clock span of each benchmark phase: its requests' access lines (in order, as many
    as the phase sent) and the benchmark's duration."""
    bench = [json.loads(x) for x in (directory / "bench.jsonl").read_text().splitlines()]
    posts = [when for when, _, msg in records(directory) if "POST /v1/completions" in msg]
    spans, k = [], 0
    for rec in bench:
        start = posts[k]
        spans.append((start, datetime.fromtimestamp(start.timestamp() + rec["duration"])))
        k += rec["completed"]
    assert k == len(posts)
    return spans


# -- the package stands alone -------------------------------------------------------------------


def test_imports_nothing_from_toolkit() -> None:
    assert not toolkit_imports(PACKAGE)


def test_names_are_stable_and_each_model_is_different() -> None:
    assert names()[:3] == ["pp8-packed", "pp8-running-cap", "tp8-kv-pressure"]
    required = {
        "pp8-packed",
        "pp8-running-cap",
        "tp8-kv-pressure",
        "tp8-graph-miss",
        "pp4-stage-imbalance",
        "tp8-prefill-interference",
        "pp4x-tp2-hybrid",
        "pp16-multinode",
        "pp8-several-causes",
        "tp8-healthy-high",
        "pp8-healthy-low",
        "pp8-healthy-full",
        "pp8-unexplained",
        "pp8-old-format-0.5.5",
        "tp8-old-format-0.4.6",
    }
    assert required <= set(names())
    models = [scenario(n).model.path for n in names()]
    assert len(set(models)) == len(models)
    assert len({scenario(n).hardware.gpu_name for n in names()}) >= 6


def test_unknown_name_says_which_exist() -> None:
    with pytest.raises(KeyError, match="pp8-packed"):
        scenario("pp8-nonsense")


def test_every_scenario_is_small(runs) -> None:
    for name, directory in runs.items():
        size = sum(p.stat().st_size for p in directory.iterdir())
        assert size < 700_000, f"{name} wrote {size} bytes"


def test_building_twice_gives_the_same_files(runs, tmp_path: Path) -> None:
    again = build("pp4-stage-imbalance", tmp_path / "again")
    first = run_dir(runs, "pp4-stage-imbalance")
    for path in sorted(first.iterdir()):
        assert (again / path.name).read_bytes() == path.read_bytes(), path.name


# -- expected.json -----------------------------------------------------------------------------


def test_injected_causes_cost_at_least_30_percent(runs) -> None:
    for name in names():
        exp = read_expected(run_dir(runs, name))
        assert set(exp["injected"]) <= FINDING_IDS
        assert set(exp["incidental"]) <= FINDING_IDS
        assert exp["healthy"] == (not exp["injected"])
        assert set(exp["impacts"]) == set(exp["injected"])
        for cause, cost in exp["impacts"].items():
            assert cost["impact"] >= 0.30, f"{name}: {cause} {cost['impact']}"
            assert 0 <= cost["phase"] < len(exp["phases"])
            assert cost["derivation"].endswith(f"{cost['impact']:.3f}") or cause in (
                "stage-imbalance",
            )


def test_healthy_runs_have_nothing_worth_5_percent(runs) -> None:
    healthy = [n for n in names() if read_expected(run_dir(runs, n))["healthy"]]
    assert set(healthy) == {"tp8-healthy-high", "pp8-healthy-low", "pp8-healthy-full"}
    for name in healthy:
        checks = read_expected(run_dir(runs, name))["checks"]
        assert checks["stage_imbalance"] < 0.05, name
        assert checks["prefill_share_max"] < 0.05, name
        assert checks["retractions"] == 0
        assert checks["queue_at_decode_max"] == 0
        assert checks["eager_share_max"] == 0
    full = read_expected(run_dir(runs, "pp8-healthy-full"))
    assert 0 < full["checks"]["stage_imbalance"] < 0.05  # the lm_head's small, honest share


def test_docstrings_derive_the_same_numbers() -> None:
    def flat(text: str) -> str:
        return " ".join(text.split())

    for name, fn in SCENARIOS.items():
        doc = flat(inspect.getdoc(fn) or "")
        for cause, cost in expected(name)["impacts"].items():
            assert flat(cost["derivation"]) in doc, f"{name}: {cause} derivation not in docstring"


def test_expected_json_names_model_hardware_and_layout(runs) -> None:
    for name in names():
        exp = read_expected(run_dir(runs, name))
        sc = scenario(name)
        assert exp["model"] == sc.model.path
        assert exp["gpu_name"] == sc.hardware.gpu_name
        lay = exp["layout"]
        assert sum(lay["layers_per_stage"]) == sc.model.layers
        assert len(lay["layers_per_stage"]) == lay["pp"]


# -- run.toml ---------------------------------------------------------------------------------


def test_run_toml_is_what_users_write(runs) -> None:
    for name in names():
        directory = run_dir(runs, name)
        config = tomllib.loads((directory / "run.toml").read_text(encoding="utf-8"))
        assert set(config) <= RUN_TOML_KEYS
        assert config["synthetic"] is True
        assert "Generated scenario" in config["notes"]
        assert config["interconnect"] in ("pcie", "nvlink")
        assert "sglang.launch_server" in config["command"]
        assert scenario(name).model.path in config["command"]


# -- the server log ---------------------------------------------------------------------------


def test_every_log_line_has_a_known_shape(runs) -> None:
    for name in names():
        lines = log_lines(run_dir(runs, name))
        assert lines
        for _, line in lines:
            assert PREFIX.match(line) or line.startswith(UNPREFIXED), f"{name}: {line[:120]!r}"


def test_log_is_in_time_order(runs) -> None:
    for name in names():
        directory = run_dir(runs, name)
        for path in directory.glob("server*.log"):
            stamps = [r[0] for r in records(directory, path.name)]
            assert stamps == sorted(stamps), name


def test_startup_block_has_what_the_loader_reads(runs) -> None:
    for name in names():
        sc = scenario(name)
        text = "\n".join(line for _, line in log_lines(run_dir(runs, name)))
        lay = sc.layout
        assert text.count("KV Cache is allocated.") == lay.gpus
        assert f"#tokens: {sc.launch.pool}," in text
        summary = f"max_total_num_tokens={sc.launch.pool}, chunked_prefill_size={sc.launch.chunk}"
        assert text.count(summary) == lay.pp
        assert f"max_running_requests={sc.launch.mrr_resolved}," in text
        assert text.count("The server is fired up and ready to roll!") == 1
        if sc.version_tuple >= (0, 5, 16):
            assert re.search(r"Capture target decode CUDA graph end\. bs=\[1, 2, 4, 8", text)
        else:
            assert re.search(r"Capture cuda graph bs \[1, 2, 4, 8", text)
            assert "Capture cuda graph end. Time elapsed:" in text


def test_server_args_dump_parses_and_carries_the_flags(runs) -> None:
    for name in names():
        sc = scenario(name)
        for _, line in log_lines(run_dir(runs, name)):
            m = PREFIX.match(line)
            if m and m["msg"].startswith("server_args="):
                dump = m["msg"][len("server_args=") :]
                break
        else:
            pytest.fail(f"{name}: no server_args")
        if sc.version_tuple >= (0, 5, 20):
            args = ast.literal_eval(dump)
        else:
            call = ast.parse(dump, mode="eval").body
            assert isinstance(call, ast.Call) and call.func.id == "ServerArgs"
            args = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        assert args["model_path"] == sc.model.path
        assert args["tp_size"] == sc.launch.tp and args["pp_size"] == sc.launch.pp
        assert args["chunked_prefill_size"] == sc.launch.chunk
        assert args["max_running_requests"] == sc.launch.mrr
        cap_key = (
            "pp_max_micro_batch_size" if sc.version_tuple >= (0, 5, 5) else "max_micro_batch_size"
        )
        assert args[cap_key] == sc.launch.cap
        assert ("pp_async_batch_depth" in args) == (sc.version_tuple >= (0, 5, 7))
        assert args["disable_overlap_schedule"] == (sc.launch.pp > 1)


def test_rank_tags_by_version(runs) -> None:
    for name in names():
        sc = scenario(name)
        tp, pp = sc.launch.tp, sc.launch.pp
        for _, line in log_lines(run_dir(runs, name)):
            m = PREFIX.match(line)
            if not m or not m["ranks"]:
                continue
            tags = [re.sub(r"\d", "", t) for t in m["ranks"].split()]
            want = []
            if sc.version_tuple >= (0, 5, 6):
                want = ["PP"] * (pp > 1) + ["TP"] * (tp > 1)
            else:
                want = ["TP"] * (tp > 1) + ["PP"] * (pp > 1)
            assert tags == want, f"{name}: {m['ranks']!r}"
    hybrid = "\n".join(line for _, line in log_lines(run_dir(runs, "pp4x-tp2-old-format-0.5.5")))
    assert " TP0 PP1] Decode batch, " in hybrid and " TP1 PP1] Decode" not in hybrid


def test_only_tp_rank_0_prints_batch_lines_and_every_stage_prints_each(runs) -> None:
    for name in names():
        sc = scenario(name)
        per_stage: dict[int, list[str]] = defaultdict(list)
        for _, ranks, msg in records(run_dir(runs, name)):
            if msg.startswith(("Decode batch", "Prefill batch")):
                assert ranks.get("TP", 0) == 0, name
                per_stage[ranks.get("PP", 0)].append(msg)
        assert sorted(per_stage) == list(range(sc.launch.pp))
        first = per_stage[0]
        for stage, msgs in per_stage.items():
            # Lock-step: every stage logs the same micro-batch with the same numbers.
            assert msgs == first, f"{name}: stage {stage} differs"


def test_decode_lines_have_their_fields_in_order(runs) -> None:
    for name in names():
        lines = decode_lines(run_dir(runs, name))
        assert len(lines) >= 10, name
        sc = scenario(name)
        for _, f in lines:
            assert int(f["running"]) <= sc.launch.slot_cap
            assert int(f["token"]) <= sc.launch.pool
            assert abs(float(f["usage"]) - int(f["token"]) / sc.launch.pool) <= 0.0051


def test_prefill_lines_by_version(runs) -> None:
    shapes = {
        "tp8-old-format-0.4.6": r"^Prefill batch\. #new-seq: \d+, #new-token: \d+, "
        r"#cached-token: 0, token usage: \d\.\d\d, #running-req: \d+, #queue-req: \d+$",
        "pp8-old-format-0.5.5": r"^Prefill batch, #new-seq: \d+, #new-token: \d+, "
        r"#cached-token: 0, token usage: \d\.\d\d, #running-req: \d+, #queue-req: \d+, $",
        "tp8-graph-miss": r"^Prefill batch, .*#queue-req: \d+, cuda graph: False, "
        r"input throughput \(token/s\): \d+\.\d\d$",
        "pp8-packed": r"^Prefill batch, .*#queue-req: \d+, #pending-token: \d+, "
        r"cuda graph: False, input throughput \(token/s\): \d+\.\d\d$",
    }
    for name, shape in shapes.items():
        msgs = [m for _, _, m in records(run_dir(runs, name)) if m.startswith("Prefill batch")]
        assert msgs
        for msg in msgs:
            assert re.match(shape, msg), f"{name}: {msg!r}"


def test_token_count_is_running_requests_times_context(runs) -> None:
    """``#token`` = Σ running × (ISL + generated): with 32 requests of ISL 1000 in 4 slots of
    8, each line 40 micro-steps (10 rounds) after the last adds 40 × 8 tokens."""
    directory = run_dir(runs, "pp8-packed")
    (start, end) = phase_of(directory)[2]
    tokens = [int(f["token"]) for t, f in decode_lines(directory) if start <= t <= end]
    assert len(tokens) > 20
    for tok in tokens:
        generated = (tok - 32 * 1000) / 32
        assert 0 <= generated <= 512
    steps = [b - a for a, b in itertools.pairwise(tokens)]
    assert all(s == 40 * 8 for s in steps)
    # TP: one batch of 64, so 40 steps add 40 × 64.
    directory = run_dir(runs, "tp8-healthy-high")
    (start, end) = phase_of(directory)[3]
    tokens = [int(f["token"]) for t, f in decode_lines(directory) if start <= t <= end]
    assert {b - a for a, b in itertools.pairwise(tokens)} == {40 * 64}
    assert all(0 <= (t - 64 * 128) / 64 <= 1024 for t in tokens)


def test_gen_throughput_is_tokens_over_the_window(runs) -> None:
    """Millisecond timestamps (SGLANG_LOG_MS): gen throughput × window = #token growth."""
    directory = run_dir(runs, "tp8-prefill-interference")
    lines = decode_lines(directory)
    assert all(t.microsecond % 1000 == 0 for t, _ in lines)
    checked = 0
    for (t0, a), (t1, b) in itertools.pairwise(lines):
        grown = int(b["token"]) - int(a["token"])
        if grown == 40 * int(b["running"]):  # same requests throughout the window
            window = (t1 - t0).total_seconds()
            assert float(b["gen"]) * window == pytest.approx(grown, rel=0.01, abs=2)
            checked += 1
    assert checked > 50


def test_sweep_phases_are_separated_by_idle_gaps(runs) -> None:
    for name in names():
        spans = phase_of(run_dir(runs, name))
        assert len(spans) == len(scenario(name).phases)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert (start - end).total_seconds() >= 10


def test_access_line_per_request(runs) -> None:
    for name in names():
        sc = scenario(name)
        msgs = [m for _, _, m in records(run_dir(runs, name))]
        posts = [
            m
            for m in msgs
            if re.fullmatch(
                r'INFO:     127\.0\.0\.1:\d+ - "POST /v1/completions HTTP/1\.1" 200 OK', m
            )
        ]
        assert len(posts) == sum(p.num_prompts for p in sc.phases)


# -- the benchmark ----------------------------------------------------------------------------


def test_bench_has_one_record_per_phase_matching_the_arithmetic(runs) -> None:
    for name in names():
        directory = run_dir(runs, name)
        exp = read_expected(directory)
        bench = [json.loads(x) for x in (directory / "bench.jsonl").read_text().splitlines()]
        assert len(bench) == len(exp["phases"])
        for rec, ph in zip(bench, exp["phases"], strict=True):
            assert rec["max_concurrency"] == ph["c"]
            assert rec["completed"] == ph["num_prompts"]
            assert rec["random_input_len"] == ph["isl"] and rec["random_output_len"] == ph["osl"]
            assert rec["total_output_tokens"] == ph["num_prompts"] * ph["osl"]
            assert rec["output_throughput"] == pytest.approx(ph["bench_tok_s"], rel=1e-6)
            assert rec["output_throughput"] * rec["duration"] == pytest.approx(
                rec["total_output_tokens"], rel=1e-5
            )
            steady = (
                ph["retractions"] == 0
                and ph["queue_at_decode"] == 0
                and sum(ph["slot_sizes"]) == min(ph["c"], ph["num_prompts"])
                and ph["num_prompts"] % ph["c"] == 0
            )
            if steady:
                # One wave: prefill, then OSL−1 steps of T: bench = decode × (1 − share) ×
                # OSL/(OSL−1), and a token every T.
                osl = ph["osl"]
                want = ph["decode_tok_s"] * (1 - ph["prefill_share"]) * osl / (osl - 1)
                assert rec["output_throughput"] == pytest.approx(want, rel=0.01), name
                assert rec["median_itl_ms"] == pytest.approx(ph["round_ms"], rel=0.04), name
                if ph["prefill_share"] < 0.1:  # else the first admitted wait out the burst
                    assert rec["median_tpot_ms"] == pytest.approx(ph["round_ms"], rel=0.06), name


def test_bench_keys_follow_the_version(runs) -> None:
    for name in names():
        sc = scenario(name)
        rec = json.loads((run_dir(runs, name) / "bench.jsonl").read_text().splitlines()[0])
        assert ("server_info" in rec) == (sc.version_tuple >= (0, 5, 5))
        assert ("total_throughput" in rec) == (sc.version_tuple >= (0, 5, 10))
        assert ("p95_ttft_ms" in rec) == (sc.version_tuple >= (0, 5, 23))
        assert rec["backend"] == "sglang-oai" and rec["request_rate"] == float("inf")


# -- the GPU trace ----------------------------------------------------------------------------


def gpu_rows(path: Path) -> tuple[list[str], list[list[str]]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split(", "), [line.split(", ") for line in lines[1:]]


def test_gpu_csv_has_one_row_per_gpu_per_sample(runs) -> None:
    for name in names():
        sc = scenario(name)
        files = sorted(run_dir(runs, name).glob("gpu*.csv"))
        assert len(files) == sc.layout.nnodes
        for path in files:
            header, rows = gpu_rows(path)
            assert header[:3] == ["timestamp", "index", "name"]
            assert header[-3:] == ["utilization.gpu [%]", "memory.used [MiB]", "power.draw [W]"]
            n = min(sc.layout.gpus // sc.layout.nnodes, sc.hardware.gpus)
            assert len(rows) % n == 0
            for k in range(0, len(rows), n):
                sample = rows[k : k + n]
                assert [r[1] for r in sample] == [str(i) for i in range(n)]
                assert {r[0][:19] for r in sample} == {sample[0][0][:19]}
            for r in rows:
                datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f")
                assert r[2] == sc.hardware.gpu_name
                assert r[-3].endswith(" %") and 0 <= int(r[-3][:-2]) <= 100
                assert r[-2].endswith(" MiB") and r[-1].endswith(" W")


def test_gpu_busy_follows_the_stage_arithmetic(runs) -> None:
    """pp4-stage-imbalance at c=32: stage s is busy 4·t_s(8)/T, PP3 all the time."""
    directory = run_dir(runs, "pp4-stage-imbalance")
    exp = read_expected(directory)
    busy = exp["phases"][1]["stage_busy"]
    assert busy.index(max(busy)) == 3 and max(busy) > 0.95 and min(busy) < 0.5
    start, end = phase_of(directory)[1]
    _, rows = gpu_rows(directory / "gpu.csv")
    util: dict[int, list[int]] = defaultdict(list)
    for r in rows:
        when = datetime.strptime(r[0], "%Y/%m/%d %H:%M:%S.%f")
        # well inside the decode part of the phase (its prefill takes the first seconds)
        if (when - start).total_seconds() > 10 and (end - when).total_seconds() > 3:
            util[int(r[1])].append(int(r[-3][:-2]))
    for gpu, values in util.items():
        mean = sum(values) / len(values)
        assert mean == pytest.approx(100 * busy[gpu], abs=5), gpu


# -- the injected causes show in the files --------------------------------------------------------


def test_graph_miss_shows_only_above_the_captured_size(runs) -> None:
    for name in ("tp8-graph-miss", "tp8-old-format-0.4.6"):
        for _, f in decode_lines(run_dir(runs, name)):
            if int(f["running"]) > 32:
                assert f["graph"] == "False"
            elif int(f["running"]) > 1:
                assert f["graph"] == "True"


def test_kv_pressure_fills_the_pool_and_retracts(runs) -> None:
    directory = run_dir(runs, "tp8-kv-pressure")
    lines = decode_lines(directory)
    assert max(float(f["usage"]) for _, f in lines) >= 0.95
    assert max(int(f["queue"]) for _, f in lines) > 0
    retract = re.compile(
        r"^KV cache pool is full\. Retract requests\. #retracted_reqs: \d+, "
        r"#new_token_ratio: \d\.\d{4} -> \d\.\d{4}$"
    )
    msgs = [m for _, _, m in records(directory) if m.startswith("KV cache pool is full")]
    assert msgs and all(retract.match(m) for m in msgs)


def test_running_cap_queues_while_the_pool_is_free(runs) -> None:
    lines = decode_lines(run_dir(runs, "pp8-running-cap"))
    capped = [f for _, f in lines if int(f["queue"]) > 0]
    assert capped and all(int(f["running"]) == 8 and float(f["usage"]) < 0.2 for f in capped)


def test_healthy_logs_show_no_fault(runs) -> None:
    for name in ("tp8-healthy-high", "pp8-healthy-low", "pp8-healthy-full"):
        directory = run_dir(runs, name)
        for _, f in decode_lines(directory):
            assert f["graph"] == "True" and f["queue"] == "0"
        assert not any(m.startswith("KV cache pool is full") for _, _, m in records(directory))


def test_multinode_writes_a_log_and_a_trace_per_node(runs) -> None:
    directory = run_dir(runs, "pp16-multinode")
    assert sorted(p.name for p in directory.glob("server*.log")) == [
        "server-node0.log",
        "server-node1.log",
    ]
    for node, host in enumerate(("h100-a07", "h100-a08")):
        path = directory / f"server-node{node}.log"
        hosts = {m["host"] for line in path.read_text().splitlines() if (m := JOURNAL.match(line))}
        assert hosts == {host}
        stages = {
            int(s) for s in re.findall(r" PP(\d+)\] Decode batch", path.read_text(encoding="utf-8"))
        }
        assert stages == set(range(8 * node, 8 * node + 8))
        assert f"'node_rank': {node}" in path.read_text(encoding="utf-8")
    assert "The server is fired up" not in (directory / "server-node1.log").read_text()
