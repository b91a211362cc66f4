"""`ppscope scaling`: the gap table as text, and the JSON users script against."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main

DATA = TEST_DATA / "bench"


def test_seed_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", "--json", str(DATA / "csv" / "seed.csv")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"verdict", "layouts", "gap", "crossover", "knee", "notes", "inputs"}
    assert doc["notes"] == []  # a sweep that names no model: nothing to say
    assert list(doc["layouts"]) == ["PP8", "TP8"]
    pp8 = {p["concurrency"]: p for p in doc["layouts"]["PP8"]}
    assert set(pp8[32]) == {"concurrency", "output_tok_s", "efficiency"}
    assert pp8[32]["output_tok_s"] == 248.1
    assert pp8[32]["efficiency"] == pytest.approx(0.23, abs=0.005)
    assert {p["concurrency"]: p["efficiency"] for p in doc["layouts"]["TP8"]}[32] == pytest.approx(
        0.69, abs=0.005
    )
    gap = {g["concurrency"]: g for g in doc["gap"]}
    assert set(gap[1]) == {"concurrency", "ratio", "leader"}
    assert (gap[32]["leader"], gap[32]["ratio"]) == ("TP8", pytest.approx(2.33, abs=0.005))
    assert (gap[1]["leader"], gap[1]["ratio"]) == ("PP8", pytest.approx(1.30, abs=0.005))
    assert 1 < doc["crossover"] < 32
    assert doc["knee"] == {"PP8": 32, "TP8": None}


def test_seed_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", str(DATA / "csv" / "seed.csv")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(line for line in lines if line.lstrip().startswith("concurrency"))
    assert header.split() == [
        "concurrency",
        "PP8",
        "tok/s",
        "TP8",
        "tok/s",
        "gap",
        "PP8:TP8",
        "leader",
        "PP8",
        "eff",
        "TP8",
        "eff",
    ]
    row32 = next(line for line in lines if line.split()[:1] == ["32"])
    assert row32.split() == ["32", "248.1", "577.8", "2.33×", "TP8", "0.23", "0.69"]
    rows = [line for line in lines if line.split()[:1] in (["1"], ["32"])]
    assert len({len(line) for line in [header, *rows]}) == 1  # aligned columns
    assert "crossover: between 1 and 32" in out
    assert "knee (efficiency < 50%): PP8 at 32; TP8 none" in out


def test_one_layout_and_repeats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", str(DATA / "sglang" / "v0.5.10.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "gap" not in out.splitlines()[2]
    assert "medians of repeated runs: TP8 at 32 (2 runs)" in out
    assert main(["scaling", "--json", str(DATA / "sglang" / "v0.5.10.jsonl")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["gap"] == [] and doc["crossover"] is None


def test_run_directories(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(DATA / "runs", tmp_path / "runs")
    paths = [tmp_path / "runs" / "pp8", tmp_path / "runs" / "tp8"]
    assert main(["scaling", "--json", *map(str, paths)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc["layouts"]) == ["PP8", "TP8"]
    assert {g["concurrency"]: g["leader"] for g in doc["gap"]} == {1: "PP8", 32: "TP8"}


def test_non_finite_numbers_become_null(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "zero.csv"
    path.write_text("config,concurrency,tok/s\nA,1,0\nA,2,10\nB,1,5\nB,2,inf\n")
    assert main(["scaling", "--json", str(path)]) == 0
    text = capsys.readouterr().out
    assert "Infinity" not in text and "NaN" not in text
    doc = json.loads(text)
    assert [p["efficiency"] for p in doc["layouts"]["A"]] == [None, None]


def test_errors_go_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scaling", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["scaling", "--json", str(DATA / "csv" / "not-bench.csv")]) == 2
    err = capsys.readouterr().err
    assert "'utilization.gpu [%]'" in err
    assert main(["scaling", str(DATA / "sglang" / "v0.2.7.jsonl")]) == 2
    assert "no run has both a concurrency and an output tok/s" in capsys.readouterr().err


def test_layouts_of_different_models_are_said_to_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep = tmp_path / "sweep.csv"
    sweep.write_text(
        "config,model,concurrency,tok/s\n"
        "TP8,meta-llama/Llama-3.1-70B,1,30\nTP8,meta-llama/Llama-3.1-70B,32,600\n"
        "PP8,Qwen/Qwen3-235B-A22B,1,35\nPP8,Qwen/Qwen3-235B-A22B,32,250\n"
    )
    assert main(["scaling", "--json", str(sweep)]) == 0
    (note,) = json.loads(capsys.readouterr().out)["notes"]
    assert "different models" in note and "Llama-3.1-70B" in note and "Qwen3-235B" in note
    assert main(["scaling", str(sweep)]) == 0
    assert "the gap compares models too" in capsys.readouterr().out
