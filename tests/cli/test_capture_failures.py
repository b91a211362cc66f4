"""``ppscope capture`` when its world fails, against the project's fake SGLang server, fake
``nvidia-smi`` and fake benchmark client: a closed terminal (SIGHUP), a second Ctrl-C, a
``/metrics`` that answers short or not at all, a server that dies mid-sweep, a full disk, and
what is missing before it starts."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO
from helpers.fake_sglang import FakeSGLang, wait_until
from helpers.fake_tools import alive, bench_cmd, install_nvidia_smi

from toolkit.capture import preflight as preflight_module
from toolkit.capture import session
from toolkit.cli.main import main
from toolkit.load.run import load_run
from toolkit.load.run_config import read_run_config


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
    with FakeSGLang(tmp_path / "live.log") as fake:
        yield fake


def _argv(run: Path, server: FakeSGLang) -> list[str]:
    return ["capture", "-o", str(run), "--server", server.url, "--log", str(server.log_path)]


def _phases(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "phases.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------- signals
@pytest.mark.parametrize(
    ("signals", "code"),
    [((signal.SIGHUP,), 129), ((signal.SIGINT, signal.SIGINT), 130)],
    ids=["sighup", "second-ctrl-c"],
)
def test_a_hang_up_or_a_second_ctrl_c_stops_like_sigterm(
    tmp_path: Path,
    tools: Path,
    server: FakeSGLang,
    signals: tuple[signal.Signals, ...],
    code: int,
) -> None:
    run = tmp_path / "run"
    bench_pids = tmp_path / "bench-pids"
    bench_pids.mkdir()
    argv = [*_argv(run, server), "--concurrency", "2,4", "--num-prompts", "4", "--pause", "0"]
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
        for sig in signals:
            proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err.decode()
    assert b"Traceback" not in err and b"interrupted: stopping" in err
    started = [int(p.name) for d in (bench_pids, tools) for p in d.iterdir()]
    assert len(started) >= 4  # the client, the sampler, -L and topo -m
    assert wait_until(lambda: not any(alive(pid) for pid in started))
    assert read_run_config(run).label == "TP1"
    (phase,) = _phases(run)
    assert phase["interrupted"] and phase["exit_code"] is None
    assert main(["parse", "-q", str(run)]) == 0


# ----------------------------------------------------------------------------- /metrics
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("fault", ["short", "error"])
def test_a_failing_metrics_endpoint_is_reported_and_recorded(
    tmp_path: Path,
    tools: Path,
    server: FakeSGLang,
    capsys: pytest.CaptureFixture[str],
    fault: str,
) -> None:
    run = tmp_path / "run"
    server.metrics_fault = fault
    cmd = bench_cmd(hold_s=1.5)  # each phase outlasts a scrape period
    argv = [*_argv(run, server), "--concurrency", "1,2", "--num-prompts", "4", "--pause", "0"]
    assert main([*argv, "--bench-cmd", cmd]) == 0
    err = capsys.readouterr().err
    assert "/metrics failed" in err and "/metrics scrapes failed" in err
    phases = _phases(run)
    assert all(p["metrics_errors"] >= 1 for p in phases), phases
    assert not (run / "metrics.jsonl").exists()  # not one scrape was whole
    assert main(["parse", "-q", str(run)]) == 0


def test_metrics_that_recover_are_kept(
    tmp_path: Path, tools: Path, server: FakeSGLang, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    server.metrics_fault = "short"
    threading.Timer(2.0, lambda: setattr(server, "metrics_fault", None)).start()
    argv = [*_argv(run, server), "--concurrency", "1", "--num-prompts", "4"]
    assert main([*argv, "--bench-cmd", bench_cmd(hold_s=4.0)]) == 0
    assert "/metrics failed (no whole answer)" in capsys.readouterr().err
    scrapes = (run / "metrics.jsonl").read_text().splitlines()
    assert scrapes and all(json.loads(s)["text"].startswith("# HELP") for s in scrapes)
    assert load_run(run).metrics is not None


def test_a_server_without_metrics_is_said_and_recorded(
    tmp_path: Path, tools: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    with FakeSGLang(tmp_path / "live.log", metrics=False) as server:
        argv = [*_argv(run, server), "--concurrency", "1", "--num-prompts", "4"]
        assert main([*argv, "--bench-cmd", bench_cmd(hold_s=1.5)]) == 0
    assert "the server has no /metrics" in capsys.readouterr().err
    (phase,) = _phases(run)
    assert phase["metrics_missing"] is True and "metrics_errors" not in phase
    assert not (run / "metrics.jsonl").exists()


# ----------------------------------------------------------------------------- dead server
def test_a_server_that_dies_mid_sweep_fails_the_phase_and_scaling_leaves_it_out(
    tmp_path: Path, tools: Path, server: FakeSGLang, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"

    def kill_after_first_phase() -> None:
        if wait_until(lambda: (run / "phases.jsonl").exists(), timeout_s=120):
            server.stop()

    killer = threading.Thread(target=kill_after_first_phase)
    killer.start()
    argv = [*_argv(run, server), "--concurrency", "1,4,8", "--num-prompts", "4"]
    try:
        assert main([*argv, "--pause", "1", "--bench-cmd", bench_cmd()]) == 1
    finally:
        killer.join()
    err = capsys.readouterr().err
    assert "phase 2/3 failed (0 of 4 requests completed" in err
    first, second = _phases(run)
    assert first["completed"] == 4 and "failed" not in first
    assert second["failed"] is True and second["completed"] == 0 and second["exit_code"] == 0
    assert read_run_config(run).label == "TP1"

    assert main(["scaling", str(run), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (points,) = doc["layouts"].values()
    assert [p["concurrency"] for p in points] == [1]
    assert any("no request completed" in note and "bench.jsonl:2" in note for note in doc["notes"])


# ----------------------------------------------------------------------------- full disk
class _FullDisk:
    """A file whose writes fail with ENOSPC once ``left[name]`` writes to its name went
    through (counted over every opening)."""

    def __init__(self, file: Any, name: str, left: dict[str, int]) -> None:
        self._file, self._name, self._left = file, name, left

    def write(self, data: Any) -> int:
        if self._left[self._name] <= 0:
            raise OSError(errno.ENOSPC, "No space left on device", self._file.name)
        self._left[self._name] -= 1
        return self._file.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def __enter__(self) -> _FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()


def _fill_disk(monkeypatch: pytest.MonkeyPatch, names: dict[str, int]) -> None:
    """Writes to the files ``names`` fail with ENOSPC after that many writes each."""
    real = Path.open
    left = dict(names)

    def open_(self: Path, *args: Any, **kwargs: Any) -> Any:
        f = real(self, *args, **kwargs)
        mode = args[0] if args else kwargs.get("mode", "r")
        if self.name in names and any(m in mode for m in "wa"):
            return _FullDisk(f, self.name, left)
        return f

    monkeypatch.setattr(Path, "open", open_)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize("full", ["metrics.jsonl", "server.log", "phases.jsonl"])
def test_a_full_disk_stops_the_capture_cleanly_with_one_error_line(
    tmp_path: Path,
    tools: Path,
    server: FakeSGLang,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    full: str,
) -> None:
    run = tmp_path / "run"
    bench_pids = tmp_path / "bench-pids"
    bench_pids.mkdir()
    _fill_disk(monkeypatch, {full: 2})
    argv = [*_argv(run, server), "--concurrency", "1,2,2,2,2,2", "--num-prompts", "4"]
    cmd = bench_cmd(pid_dir=bench_pids, hold_s=1.0)
    assert main([*argv, "--pause", "0.5", "--bench-cmd", cmd]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("ppscope:")]
    assert errors == [f"ppscope: capture stopped: {run / full}: no space left on device"]
    assert read_run_config(run).label == "TP1"  # run.toml written all the same
    started = [int(p.name) for d in (bench_pids, tools) for p in d.iterdir()]
    assert wait_until(lambda: not any(alive(pid) for pid in started))
    assert len(_phases(run)) < 6  # the sweep stopped early


def test_a_disk_too_full_for_run_toml_is_still_one_line(
    tmp_path: Path,
    tools: Path,
    server: FakeSGLang,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run = tmp_path / "run"
    _fill_disk(monkeypatch, {"metrics.jsonl": 0})
    real = Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == ".run.toml.part":
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    argv = [*_argv(run, server), "--concurrency", "1", "--num-prompts", "4"]
    assert main([*argv, "--bench-cmd", bench_cmd(hold_s=2.0)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [ln for ln in err.splitlines() if ln.startswith("ppscope:")] == [
        f"ppscope: capture stopped: {run / 'metrics.jsonl'}: no space left on device"
    ]
    assert "run.toml not written" in err and not (run / "run.toml").exists()


# ----------------------------------------------------------------------------- pre-flight
def test_everything_missing_is_named_before_anything_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No server, no ``python3`` that finds ``sglang.bench_serving``, no ``kubectl``: one line
    each, exit 2, no run directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python3 = bin_dir / "python3"  # a python3 without sglang
    python3.write_text("#!/bin/sh\nexit 3\n")
    python3.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    run = tmp_path / "run"
    argv = ["capture", "-o", str(run), "--server", "http://127.0.0.1:9", "--kubectl", "sglang-0"]
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3, lines
    assert "no answer from /server_info" in lines[0]
    assert "sglang.bench_serving: not importable by python3" in lines[1]
    assert "--kubectl sglang-0: kubectl not found on PATH" in lines[2]
    assert not run.exists()


@pytest.mark.parametrize(
    ("more", "message"),
    [
        (["--bench-cmd", "/nowhere/bench --c {concurrency}"], "/nowhere/bench: command not found"),
        (["--bench-cmd", "bench {nope}"], "unknown field {nope}"),
        (["--log", "/nowhere/server.log"], "--log /nowhere/server.log: no such file"),
    ],
)
def test_a_missing_benchmark_or_log_is_named_with_a_live_server(
    tmp_path: Path,
    tools: Path,
    server: FakeSGLang,
    capsys: pytest.CaptureFixture[str],
    more: list[str],
    message: str,
) -> None:
    run = tmp_path / "run"
    argv = ["capture", "-o", str(run), "--server", server.url, *more]
    if "--bench-cmd" not in more:
        argv += ["--bench-cmd", bench_cmd()]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not run.exists()


def test_bench_serving_is_found_without_importing_sglang(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "sglang"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise SystemExit('sglang was imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))  # before any installed sglang
    assert not preflight_module._has_bench_serving(sys.executable)
    (package / "bench_serving.py").write_text("")
    assert preflight_module._has_bench_serving(sys.executable)  # and sglang never ran


# ----------------------------------------------------------------------------- any exit path
def test_an_unexpected_error_still_stops_every_child_and_writes_run_toml(
    tmp_path: Path, tools: Path, server: FakeSGLang, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    bench_pids = tmp_path / "bench-pids"
    bench_pids.mkdir()
    real = session.run_phase

    def run_phase(*args: Any, **kwargs: Any) -> Any:
        real(*args, **kwargs)
        raise RuntimeError("a bug after the first phase")

    monkeypatch.setattr(session, "run_phase", run_phase)
    argv = [*_argv(run, server), "--concurrency", "1,2", "--num-prompts", "4"]
    with pytest.raises(RuntimeError, match="a bug"):
        main([*argv, "--bench-cmd", bench_cmd(pid_dir=bench_pids)])
    started = [int(p.name) for d in (bench_pids, tools) for p in d.iterdir()]
    assert len(started) >= 4
    assert wait_until(lambda: not any(alive(pid) for pid in started))
    assert read_run_config(run).label == "TP1"
