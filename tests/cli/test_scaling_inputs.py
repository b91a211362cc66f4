"""`ppscope scaling` accounts for every input: used, skipped with the flag that fixes it, or
grouped; runs of different servers never share a curve or an efficiency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.cli.main import main

# The block sglang.bench_serving printed before it had a ``Concurrency:`` row: a run without a
# cap states its rate, its completed requests, its duration and its mean end-to-end latency.
BLOCK = """============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    {rate}
Max request concurrency:                 {cap}
Successful requests:                     {completed}
Benchmark duration (s):                  {duration:.2f}
Total input tokens:                      {input_tokens}
Total generated tokens:                  {output_tokens}
Request throughput (req/s):              {req_s:.2f}
Output token throughput (tok/s):         {tok_s:.2f}
----------------End-to-End Latency----------------
Mean E2E Latency (ms):                   {e2e:.2f}
==================================================
"""


def _block(path: Path, *, cap: int | None, rate: float, e2e: float, tok_s: float) -> Path:
    completed, duration = 200, 100.0
    path.write_text(
        BLOCK.format(
            rate=rate,
            cap="not set" if cap is None else cap,
            completed=completed,
            duration=duration,
            input_tokens=completed * 1000,
            output_tokens=completed * 256,
            req_s=completed / duration,
            tok_s=tok_s,
            e2e=e2e,
        )
    )
    return path


def _jsonl(path: Path, model: str, tok_s: float) -> Path:
    record = {
        "backend": "sglang-oai",
        "dataset_name": "random",
        "request_rate": 4.0,
        "max_concurrency": None,
        "duration": 100.0,
        "completed": 400,
        "total_input_tokens": 409600,
        "total_output_tokens": 204800,
        "output_throughput": tok_s,
        "server_info": {"model_path": model, "tp_size": 8, "pp_size": 1},
    }
    path.write_text(json.dumps(record) + "\n")
    return path


def test_results_without_a_cap_are_rate_driven_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [_block(tmp_path / "b0.log", cap=16, rate=float("inf"), e2e=8000.0, tok_s=300.0)]
    for i, rate in enumerate((2.0, 4.0, 6.0), 1):
        files.append(
            _block(tmp_path / f"b{i}.log", cap=None, rate=rate, e2e=5000.0 * i, tok_s=300.0 * i)
        )
    assert main(["scaling", "-q", "--json", *map(str, files)]) == 0
    doc = json.loads(capsys.readouterr().out)
    (points,) = doc["layouts"].values()
    # completed × mean latency / duration: the mean number in flight (Little's law)
    expected = [16] + [round(200 * 5.0 * i / 100.0) for i in (1, 2, 3)]
    assert sorted(p["concurrency"] for p in points) == sorted(expected)
    rate = doc["inputs"]["rate_driven"]
    assert [Path(r["path"]).name for r in rate] == ["b1.log", "b2.log", "b3.log"]
    assert [r["concurrency_observed"] for r in rate] == pytest.approx([10.0, 20.0, 30.0])
    assert [f["used"] for f in doc["inputs"]["files"]] == [1, 1, 1, 1]
    assert main(["scaling", "-q", *map(str, files)]) == 0
    text = capsys.readouterr().out
    assert "4 points" in text and "rate-driven" in text
    assert all(f"b{i}.log" in text for i in (1, 2, 3))
    assert "grouped as one server" in text  # nothing in them names the server


def test_a_run_that_yields_no_point_is_listed_with_its_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = _block(tmp_path / "ok.log", cap=8, rate=float("inf"), e2e=4000.0, tok_s=250.0)
    bare = tmp_path / "bare.log"  # no cap, no latency: nothing says how many were in flight
    bare.write_text(
        "\n".join(
            line
            for line in _block(bare, cap=None, rate=2.0, e2e=1.0, tok_s=90.0)
            .read_text()
            .splitlines()
            if "E2E" not in line and "End-to-End" not in line
        )
        + "\n"
    )
    assert main(["scaling", "-q", str(ok), str(bare)]) == 0
    text = capsys.readouterr().out
    assert "bare.log run 1: no concurrency" in text and "--concurrency bare.log=N" in text
    assert main(["scaling", "-q", str(ok), str(bare), "--concurrency", "bare.log=4"]) == 0
    assert "2 points" in capsys.readouterr().out


def test_different_servers_never_share_a_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _jsonl(tmp_path / "a.jsonl", "/models/Llama-3-70B", 2048.0)
    b = _jsonl(tmp_path / "b.jsonl", "/models/Kimi-K2", 900.0)
    args = ["scaling", "-q", "--json", str(a), str(b)]
    assert main([*args, "--concurrency", "a.jsonl=32", "--concurrency", "b.jsonl=64"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["layouts"]) == 2  # one curve per server, each its own baseline
    assert all(len(points) == 1 for points in doc["layouts"].values())
    assert all(p["efficiency"] == 1.0 for ps in doc["layouts"].values() for p in ps)
    (group,) = doc["inputs"]["groups"]
    assert group["how"] == "split" and len(group["labels"]) == 2
    assert any("Llama-3-70B" in label for label in doc["layouts"])


def test_anonymous_results_in_different_folders_are_different_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    a = _block(tmp_path / "x" / "r.log", cap=8, rate=float("inf"), e2e=4000.0, tok_s=250.0)
    b = _block(tmp_path / "y" / "r.log", cap=16, rate=float("inf"), e2e=4000.0, tok_s=260.0)
    assert main(["scaling", "-q", "--json", str(a), str(b)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert sorted(doc["layouts"]) == ["unknown (x)", "unknown (y)"]


def test_a_missing_path_among_several_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = _block(tmp_path / "ok.log", cap=8, rate=float("inf"), e2e=4000.0, tok_s=250.0)
    gone = tmp_path / "gone"
    assert main(["scaling", "-q", str(ok), str(gone)]) == 1
    out, err = capsys.readouterr()
    assert "1 point" in out and "gone" in out
    assert f"skipped {gone}: no such file or directory" in err
    assert main(["scaling", "-q", str(gone)]) == 2
