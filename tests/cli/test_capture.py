"""``ppscope capture`` end to end against a fake SGLang server, a fake ``nvidia-smi`` and a
fake benchmark client: the run directory it writes is one ``parse`` and ``diagnose`` read,
with the benchmark runs on the log's clock; Ctrl-C leaves a valid partial run and no child."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO
from helpers.fake_sglang import FakeSGLang, wait_until
from helpers.fake_tools import alive, bench_cmd, install_nvidia_smi

from toolkit.cli.main import main
from toolkit.load.run import load_run
from toolkit.load.run_config import read_run_config
from toolkit.run_analysis import RunAnalysis


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``nvidia-smi`` first on PATH; the folder where its runs leave their pids."""
    pids = tmp_path / "pids"
    install_nvidia_smi(tmp_path / "bin", pids)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_SMI_PIDS", str(pids))
    return pids


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeSGLang]:
    """A fake server whose log runs an hour ahead of the capture (another time zone)."""
    with FakeSGLang(tmp_path / "live.log", log_offset_s=3600.0) as fake:
        yield fake


def _capture(run: Path, server: FakeSGLang, *more: str) -> list[str]:
    return [
        "capture",
        "-o",
        str(run),
        "--server",
        server.url,
        "--log",
        str(server.log_path),
        "--pause",
        "0.3",
        *more,
    ]


def test_a_captured_run_is_read_with_its_phases_on_the_logs_clock(
    tmp_path: Path, tools: Path, server: FakeSGLang, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "runs" / "tp1"
    argv = _capture(run, server, "--concurrency", "1,4,8", "--num-prompts", "12")
    assert main([*argv, "--bench-cmd", bench_cmd()]) == 0
    progress = capsys.readouterr().err
    assert "phase 3/3: done" in progress and "gpu: nvidia-smi" in progress

    names = {p.name for p in run.iterdir()}
    assert {"server.log", "gpu.csv", "gpus.txt", "topology.txt", "metrics.jsonl"} <= names
    assert {"server_info.jsonl", "phases.jsonl", "bench.jsonl", "run.toml"} <= names
    loaded = load_run(run)
    assert loaded.files.keys() >= {"sglang-log", "nvidia-smi-csv", "sglang-bench-jsonl"}
    assert loaded.files.keys() >= {"ppscope-phases", "nvidia-smi-list", "nvidia-smi-topo"}

    config = read_run_config(run)
    assert config.label == "TP1" and config.model == "fake-org/fake-model-8b"
    assert config.hardware == "2x NVIDIA H100 80GB HBM3" and config.interconnect == "nvlink"
    assert config.command is None  # /server_info states no launch command
    assert config.clock_offset_s == pytest.approx(3600.0, abs=1.0)

    info = [json.loads(line) for line in (run / "server_info.jsonl").read_text().splitlines()]
    assert [(i["phase"], i["when"]) for i in info] == [
        (None, "start"),
        *[(p, w) for p in range(3) for w in ("before", "after")],
        (None, "end"),
    ]
    scrapes = (run / "metrics.jsonl").read_text().splitlines()
    assert scrapes and all(set(json.loads(line)) == {"ts", "text"} for line in scrapes)

    analysis = RunAnalysis(run)
    phases = analysis.phases
    assert phases["offered"].to_list() == [1, 4, 8]
    assert phases["bench_run"].to_list() == [0, 1, 2]
    marks = loaded.phase_marks
    assert marks is not None
    for phase, mark in zip(phases.iter_rows(named=True), marks.iter_rows(named=True), strict=True):
        assert mark["start"].timestamp() - 1 <= phase["start"].timestamp()
        assert phase["end"].timestamp() <= mark["end"].timestamp() + 1
    gpu = loaded.gpu_span
    assert gpu is not None and marks["start"][0] <= gpu[1] and gpu[0] <= marks["end"][2]

    assert main(["parse", "-q", str(run)]) == 0
    parsed = capsys.readouterr().out
    assert "[ppscope-phases]\n  3 phases at concurrency 1, 4, 8" in parsed
    assert main(["diagnose", "-q", "--json", str(run)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs"][0]["label"] == "TP1"
    assert loaded.server_info is not None and loaded.metrics is not None

    report = tmp_path / "reports" / "tp1.html"
    assert main(["report", "-q", str(run), "-o", str(report)]) == 0
    assert report.stat().st_size > 0 and "TP1" in report.read_text()


def test_a_failed_phase_stops_the_sweep(
    tmp_path: Path, tools: Path, server: FakeSGLang, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    fails = f"{sys.executable} -c 'import sys; print(\"no module named sglang\"); sys.exit(1)'"
    assert main([*_capture(run, server, "--concurrency", "1,8"), "--bench-cmd", fails]) == 1
    err = capsys.readouterr().err
    assert "phase 1/2 failed (exit 1)" in err and "no module named sglang" in err
    marks = load_run(run).phase_marks
    assert marks is not None and marks["exit_code"].to_list() == [1]
    assert read_run_config(run).label == "TP1"


@pytest.mark.parametrize(
    ("problem", "message"),
    [("used", "a folder that holds files"), ("down", "no answer from /server_info")],
)
def test_bad_input_is_one_line(
    tmp_path: Path,
    tools: Path,
    server: FakeSGLang,
    capsys: pytest.CaptureFixture[str],
    problem: str,
    message: str,
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    if problem == "used":
        (run / "old.log").write_text("x\n")
    argv = _capture(run, server)
    if problem == "down":
        argv[argv.index("--server") + 1] = "http://127.0.0.1:9"
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert [p.name for p in run.iterdir()] == (["old.log"] if problem == "used" else [])


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stopped_capture_leaves_a_valid_run_and_no_child(
    tmp_path: Path, tools: Path, server: FakeSGLang, sig: signal.Signals
) -> None:
    run = tmp_path / "run"
    bench_pids = tmp_path / "bench-pids"
    bench_pids.mkdir()
    argv = _capture(run, server, "--concurrency", "2,4", "--num-prompts", "4", "--pause", "0")
    argv += ["--bench-cmd", bench_cmd(pid_dir=bench_pids, hold_s=600)]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from toolkit.cli.main import main; sys.exit(main())",
            *argv,
        ],
        cwd=REPO,
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert wait_until(lambda: any(bench_pids.iterdir()), timeout_s=120)
        assert wait_until(lambda: (run / "gpu.csv").exists() and (run / "gpu.csv").stat().st_size)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err.decode()
    assert b"interrupted: stopping" in err
    started = [int(p.name) for d in (bench_pids, tools) for p in d.iterdir()]
    assert len(started) >= 4  # the client, the sampler, -L and topo -m
    assert wait_until(lambda: not any(alive(pid) for pid in started))

    config = read_run_config(run)
    assert config.label == "TP1" and config.hardware == "2x NVIDIA H100 80GB HBM3"
    marks = load_run(run).phase_marks
    assert marks is not None and marks.height == 1
    assert marks.row(0, named=True)["interrupted"] and marks["exit_code"][0] is None
    assert not (run / "bench.jsonl").exists()
    assert main(["parse", "-q", str(run)]) == 0


@pytest.mark.parametrize("pause", ["-1", "nan", "inf", "soon"])
def test_a_pause_that_is_no_time_is_refused(
    tmp_path: Path, pause: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    with pytest.raises(SystemExit) as stop:
        main(["capture", "-o", str(run), "--server", "http://127.0.0.1:9", "--pause", pause])
    assert stop.value.code == 2 and "--pause" in capsys.readouterr().err
    assert not run.exists()
