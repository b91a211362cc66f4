"""``ppscope capture --profile`` against the fake SGLang server: one ``/start_profile`` per
phase, sent once half its requests finished, with the steps and activities asked for; the
traces the server writes into ``profile/phase-<i>-c<c>`` are the run's profile."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fake_sglang import FakeSGLang, wait_until
from helpers.fake_tools import bench_cmd, install_nvidia_smi

from toolkit.cli.main import main
from toolkit.load.run import load_run
from toolkit.run_analysis import RunAnalysis


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeSGLang]:
    install_nvidia_smi(tmp_path / "bin", tmp_path / "pids")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    with FakeSGLang(tmp_path / "live.log", step_s=0.02) as fake:
        yield fake


def test_each_phase_is_profiled_in_its_middle(
    tmp_path: Path, server: FakeSGLang, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    argv = ["capture", "-o", str(run), "--server", server.url, "--log", str(server.log_path)]
    argv += ["--concurrency", "2,4", "--num-prompts", "8", "--pause", "0.2", "--profile", "5"]
    assert main([*argv, "--bench-cmd", bench_cmd(output_len=40)]) == 0
    err = capsys.readouterr().err
    assert "profiling 5 steps → phase-0-c2" in err and "phase-1-c4" in err

    asked = server.profiles
    assert [p["num_steps"] for p in asked] == [5, 5]
    assert [p["activities"] for p in asked] == [["CPU", "GPU"]] * 2
    folders = [Path(p["output_dir"]) for p in asked]
    assert folders == [
        run.resolve() / "profile" / "phase-0-c2",
        run.resolve() / "profile" / "phase-1-c4",
    ]
    assert wait_until(lambda: all(any(f.glob("*.trace.json.gz")) for f in folders))

    loaded = load_run(run)
    assert loaded.profile is not None and loaded.profile.phases == ["phase-0-c2", "phase-1-c4"]
    ctx = RunAnalysis(run)
    assert [ctx.profile_phase(p) for p in loaded.profile.phases] == [0, 1]
    assert ctx.stage_account is not None and ctx.stage_account["step"].max() == 4


def test_without_the_flag_nothing_is_profiled(tmp_path: Path, server: FakeSGLang) -> None:
    run = tmp_path / "run"
    argv = ["capture", "-o", str(run), "--server", server.url, "--concurrency", "2"]
    assert main([*argv, "--num-prompts", "4", "-q", "--bench-cmd", bench_cmd()]) == 0
    assert server.profiles == [] and not (run / "profile").exists()
