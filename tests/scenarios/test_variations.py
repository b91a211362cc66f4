"""The scenario variations themselves: each writes what it claims, and injects what the scenario
injects. Whether ppscope diagnoses them is ``tests/diagnose/test_scenario_variations.py``."""

from __future__ import annotations

import json
import re
import tomllib
from datetime import datetime
from pathlib import Path

import pytest
from helpers.scenarios import VARIATIONS, build_variant, expected, scenario, variant
from helpers.scenarios.formats import NOISE, WRAPPERS, rank_tag
from helpers.scenarios.writer import OMITTABLE

# One scenario per variation, each one it changes.
ON = {name: "pp8-unexplained" for name in VARIATIONS} | {
    "plain": "pp8-packed",
    "log-ms": "pp8-unexplained",
    "log-seconds": "tp8-prefill-interference",
    "single-phase": "tp8-graph-miss",
    "length-jitter": "pp8-packed",
    "waves": "pp8-packed",
    "journald": "pp8-unexplained",
}

PREFIX = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?(?: (?:PP|TP)\d+)*\] ")
WRAPPED = {
    "plain": re.compile(r""),
    "journald": re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ python3\[\d+\]: "),
    "journald-iso": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000 \S+ python3\[\d+\]: "),
    "docker": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z "),
    "kubectl": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{0,8}[1-9])?Z "),
    "cri": re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?\+02:00 (?:stdout|stderr) F "),
    "python-logger": re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - __main__ - INFO - "),
    "compose": re.compile(r"sglang-1  \| "),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every variation built once on its scenario: name → run directory."""
    root = tmp_path_factory.mktemp("variations")
    return {name: build_variant(ON[name], name, root / name) for name in VARIATIONS}


def _expected(directory: Path) -> dict:
    return json.loads((directory / "expected.json").read_text(encoding="utf-8"))


def _log(directory: Path) -> list[str]:
    return (directory / "server.log").read_text(encoding="utf-8").splitlines()


def test_every_variation_is_described_and_fits_its_scenario() -> None:
    assert set(WRAPPERS) == set(WRAPPED)
    assert {"http", "traceback", "interleave"} == set(NOISE)
    for name, v in VARIATIONS.items():
        assert (
            v.name == name
            and v.doc
            and v.axis
            in {
                "wrapper",
                "log",
                "bench",
                "gpu",
                "missing",
                "noise",
            }
        )
        assert v.fits(scenario(ON[name])), name


@pytest.mark.parametrize("name", list(VARIATIONS))
def test_a_variation_injects_what_its_scenario_injects(runs, name: str) -> None:
    rec, base = _expected(runs[name]), expected(ON[name])
    assert rec["injected"] == base["injected"]
    assert rec["incidental"] == base["incidental"]
    assert rec["variation"]["name"] == name
    assert rec["variation"]["removes"] == list(VARIATIONS[name].removes)
    for cause, impact in rec["impacts"].items():
        assert impact["impact"] >= 0.20, (name, cause, impact)


@pytest.mark.parametrize("name", list(WRAPPERS))
def test_a_wrapper_is_in_front_of_every_line(runs, name: str) -> None:
    shape = WRAPPED[name]
    lines = _log(runs[name])
    assert all(shape.match(line) for line in lines), name
    prefixed = [line[shape.match(line).end() :] for line in lines]
    assert sum(bool(PREFIX.match(x)) for x in prefixed) > 0.9 * len(lines)


def test_the_cri_wrapper_runs_two_hours_ahead_and_names_the_stream(runs) -> None:
    for line in _log(runs["cri"]):
        m = re.match(r"(\S+)\+02:00 (stdout|stderr) F \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", line)
        if m is None:
            continue
        outer = datetime.fromisoformat(m[1][:19])
        inner = datetime.fromisoformat(m[3])
        assert 7199 <= (outer - inner).total_seconds() < 7201
        assert (m[2] == "stdout") == ("HTTP/1.1" in line)


@pytest.mark.parametrize(
    ("name", "interval"), [("decode-interval-10", 10), ("decode-interval-100", 100)]
)
def test_the_decode_log_interval_is_stated_and_kept(runs, name: str, interval: int) -> None:
    directory = runs[name]
    lines = _log(directory)
    assert f"'decode_log_interval': {interval}" in next(x for x in lines if "server_args=" in x)
    toml = tomllib.loads((directory / "run.toml").read_text(encoding="utf-8"))
    assert f"--decode-log-interval {interval}" in toml["command"]
    base = sum("Decode batch" in x for x in _log(runs["long-gaps"]))  # same scenario, 40
    count = sum("Decode batch" in x for x in lines)
    assert count == pytest.approx(base * 40 / interval, rel=0.15)


def test_millisecond_and_second_timestamps(runs) -> None:
    assert all(
        re.match(r"\[\S+ \d\d:\d\d:\d\d\.\d{3}", x) for x in _log(runs["log-ms"]) if x[0] == "["
    )
    assert not any(re.match(r"\[\S+ \S+\.\d{3}", x) for x in _log(runs["log-seconds"]))


def test_benchmark_shapes(runs) -> None:
    waves = [json.loads(x) for x in (runs["waves"] / "bench.jsonl").read_text().splitlines()]
    assert [r["completed"] for r in waves] == [2, 16, 128]  # c=1 kept, c=4 and 32 four waves
    jitter = [
        json.loads(x) for x in (runs["length-jitter"] / "bench.jsonl").read_text().splitlines()
    ]
    last = jitter[-1]
    assert last["random_range_ratio"] == 0.5
    assert 0.5 * 32 * 1000 <= last["total_input_tokens"] < 32 * 1000
    assert (
        "played"
        in _expected(runs["length-jitter"])["impacts"]["pp-underfilled-slots"]["derivation"]
    )
    single = _expected(runs["single-phase"])
    assert [p["c"] for p in single["phases"]] == [64]
    assert single["impacts"]["cuda-graph-miss"]["phase"] == 0
    text = (runs["bench-stdout"] / "bench.log").read_text(encoding="utf-8")
    assert text.count("============ Serving Benchmark Result ============") == 2
    assert "Max request concurrency:                 32        " in text
    assert not (runs["bench-stdout"] / "bench.jsonl").exists()


def test_the_test_run_precedes_each_phase(runs) -> None:
    posts = sum('"POST /v1/completions' in x for x in _log(runs["warmup"]))
    sent = sum(p["num_prompts"] for p in _expected(runs["warmup"])["phases"])
    assert posts == sent + len(_expected(runs["warmup"])["phases"])


def test_gpu_shapes(runs) -> None:
    dmon = (runs["smi-dmon"] / "gpu.dmon").read_text(encoding="utf-8").splitlines()
    assert dmon[0].startswith("#Date") and dmon[1].startswith("#YYYYMMDD")
    assert re.match(r" \d{8}   \d\d:\d\d:\d\d  ", dmon[2])
    dcgmi = (runs["dcgmi"] / "gpu.dcgmi").read_text(encoding="utf-8").splitlines()
    assert dcgmi[0].split() == ["#Entity", "GPUTL", "GRACT", "SMACT", "POWER", "FBUSD"]
    assert dcgmi[1] == "ID" and dcgmi[2].split()[:3] == ["GPU", "0", "N/A"]
    toml = tomllib.loads((runs["dcgmi"] / "run.toml").read_text(encoding="utf-8"))
    assert toml["gpu_trace"] == {"interval_s": 1}
    fast = (runs["gpu-100ms"] / "gpu.csv").read_text(encoding="utf-8").splitlines()
    slow = (runs["gpu-5s"] / "gpu.csv").read_text(encoding="utf-8").splitlines()
    assert len(fast) > 40 * len(slow)


def test_a_gpu_clock_of_its_own(runs) -> None:
    def first(directory: Path) -> datetime:
        row = (directory / "gpu.csv").read_text(encoding="utf-8").splitlines()[1]
        return datetime.strptime(row.split(", ")[0], "%Y/%m/%d %H:%M:%S.%f")

    base = first(runs["noise-http"])  # the same timeline's first sample, on the log's clock
    assert (first(runs["gpu-clock-skew"]) - base).total_seconds() == pytest.approx(45.0)
    declared = runs["gpu-clock-declared"]
    assert (first(declared) - base).total_seconds() == pytest.approx(7200.0)
    toml = tomllib.loads((declared / "run.toml").read_text(encoding="utf-8"))
    assert toml["clock_offset_s"] == -7200.0


@pytest.mark.parametrize(
    ("name", "missing"),
    [("no-gpu", "gpu.csv"), ("no-bench", "bench.jsonl"), ("no-run-toml", "run.toml")],
)
def test_missing_files(runs, name: str, missing: str) -> None:
    assert not (runs[name] / missing).exists()
    assert (runs[name] / "server.log").exists()


def test_missing_lines_and_the_unknown_model(runs) -> None:
    assert set(OMITTABLE) == {"run.toml", "server_args", "bench", "gpu", "access"}
    assert not any("server_args=" in x for x in _log(runs["no-server-args"]))
    assert not any("HTTP/1.1" in x for x in _log(runs["no-access-lines"]))
    unknown = runs["unknown-model"]
    assert "acme-ai/orion-chat-v3" in next(x for x in _log(unknown) if "server_args=" in x)
    assert "acme-ai/orion-chat-v3" in (unknown / "run.toml").read_text(encoding="utf-8")


def test_noise(runs) -> None:
    http = _log(runs["noise-http"])
    assert sum('"GET /health HTTP/1.1" 200 OK' in x for x in http) > 10
    assert any("400 Bad Request" in x for x in http)
    assert any('"POST /v1/chat/completions HTTP/1.1" 200 OK' in x for x in http)
    tb = _log(runs["noise-traceback"])
    assert "Traceback (most recent call last):" in tb
    assert any(x.startswith("Loading safetensors checkpoint shards:") and "] Load weight end" in x
               for x in tb)  # fmt: skip
    lines = _log(runs["interleave"])
    stamps = [m[1] for x in lines if (m := re.match(r"\[(\S+ \S+)", x))]
    assert stamps != sorted(stamps)  # a few lines a few ms out of order
    # but each rank's own lines stay in order
    sc = variant(ON["interleave"], "interleave")
    for stage in range(sc.layout.pp):
        tag = rank_tag(sc.version_tuple, stage, 0, sc.layout.pp, sc.layout.tp)
        own = [m[1] for x in lines if (m := re.match(r"\[(\S+ \S+)" + re.escape(tag) + r"\]", x))]
        assert own == sorted(own)


def test_a_variation_that_would_remove_the_cause_is_refused() -> None:
    with pytest.raises(ValueError, match="does not apply"):
        variant("tp8-kv-pressure", "length-jitter")  # the pool then holds every request
    assert not VARIATIONS["length-jitter"].fits(scenario("pp4-stage-imbalance"))
    with pytest.raises(ValueError, match="does not apply"):
        variant("pp8-packed", "journald")  # pp8-packed is journald already
