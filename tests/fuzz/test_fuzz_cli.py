"""The command line on hostile inputs and argument lists: exit 0, 1 or 2 with at most one
``ppscope:`` line on stderr, never a traceback."""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path

import pytest
from helpers import TEST_DATA
from helpers.fuzz import budget, mutated, seeds
from hypothesis import given
from hypothesis import strategies as st

from toolkit.cli.main import main

pytestmark = pytest.mark.fuzz

CORPUS = seeds(TEST_DATA / "bench", TEST_DATA / "gpu") + seeds(
    TEST_DATA / "sglang", suffixes=(".log",)
)
NAMES = ("server.log", "gpu.csv", "bench.jsonl", "run.toml", "result.json", "trace.txt")
COMMANDS = ("parse", "scaling", "diagnose", "model", "diff", "timeline")
FLAGS = ("--json", "--strict", "--no-cache", "-q", "--what-if", "pp_max_micro_batch_size=4",
         "--what-if", "nonsense", "-o", "--bogus", "-h", "-")  # fmt: skip


def invoke(argv: list[str]) -> tuple[int, str]:
    """``main(argv)``: its exit code (argparse's too) and what it wrote on stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:  # argparse: --help, or a usage error
            code = e.code if isinstance(e.code, int) else 2
    return code, err.getvalue()


def _check(code: int, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err, err
    if code == 2 and err.startswith("ppscope: "):
        assert len([line for line in err.splitlines() if line.startswith("ppscope: ")]) == 1


@st.composite
def run_files(draw: st.DrawFn) -> dict[str, bytes]:
    """The files of a run directory: one to three, cut from the fixtures of every family."""
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    return {name: draw(mutated(CORPUS)) for name in names}


@budget(12)
@given(files=run_files(), command=st.sampled_from(COMMANDS), extra=st.booleans())
def test_commands_on_mutated_run_directories(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes], command: str, extra: bool
) -> None:
    tmp = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)
        _run_command(tmp, files, command, extra)
    shutil.rmtree(tmp, ignore_errors=True)


def _run_command(tmp: Path, files: dict[str, bytes], command: str, extra: bool) -> None:
    run = tmp / "run"
    run.mkdir()
    for name, data in files.items():
        (run / name).write_bytes(data)
    file = run / sorted(files)[0]
    argv = {
        "parse": ["parse", "--no-cache", "-q", str(run)],
        "scaling": ["scaling", str(file)],
        "diagnose": ["diagnose", "-q", str(run)],
        "model": ["model", "-q", str(run)],
        "diff": ["diff", "-q", str(run), str(run)],
        "timeline": ["timeline", "-q", str(run), "-o", str(tmp / "t.json")],
    }[command]
    if extra:
        argv.append("--json" if command in ("parse", "scaling", "diagnose", "model") else "-q")
    _check(*invoke(argv))


@budget(25)
@given(
    command=st.sampled_from(COMMANDS),
    words=st.lists(
        st.one_of(st.sampled_from(FLAGS), st.sampled_from(["PATH", "MISSING", "FILE"])),
        max_size=5,
    ),
)
def test_argument_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, words: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path ("-", "x") must not reach the checkout
    log = (TEST_DATA / "sglang" / "v0.5.23-pp8.log").read_bytes()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(log)))  # what "-" reads
    run_dir = tmp_path / "run"
    if not run_dir.exists():
        run_dir.mkdir()
        shutil.copy(TEST_DATA / "sglang" / "v0.5.23-pp8.log", run_dir / "server.log")
    paths = {
        "PATH": str(run_dir),
        "MISSING": str(tmp_path / "nope"),
        "FILE": str(run_dir / "server.log"),
    }
    argv = [command, *(paths.get(w, w) for w in words)]
    if "-o" in argv and argv[-1] == "-o":
        argv.append(str(tmp_path / "out.txt"))
    _check(*invoke(argv))
