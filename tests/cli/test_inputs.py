"""Every command meets a pipe, a device or an unreadable file with one line and a non-zero exit:
no hang, no traceback. Directory walks read regular files only, so a pipe in a run directory
is passed over."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main

LOG = TEST_DATA / "sglang" / "v0.5.23-pp8.log"


def _deny(monkeypatch: pytest.MonkeyPatch, victim: Path) -> None:
    """``victim`` cannot be opened (tests run as root, who reads files of mode 000)."""
    real_open = Path.open

    def guarded(self: Path, *args, **kwargs):
        if Path(self).resolve() == victim.resolve():
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded)


def _fifo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(LOG, run / "server.log")
    fifo = run / "pipe.log"
    os.mkfifo(fifo)
    return fifo, run


def _unreadable_in_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    run = tmp_path / "run"
    run.mkdir()
    target = run / "server.log"
    shutil.copy(LOG, target)
    _deny(monkeypatch, target)
    return target, run


def _device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(LOG, run / "server.log")
    device = run / "zero.log"
    os.symlink("/dev/zero", device)
    return device, run


def _unreadable_run_toml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(LOG, run / "server.log")
    toml = run / "run.toml"
    toml.write_text('label = "x"\n')
    _deny(monkeypatch, toml)
    return toml, run


INPUTS: dict[str, Callable[[Path, pytest.MonkeyPatch], tuple[Path, Path]]] = {
    "fifo": _fifo,
    "device": _device,
    "unreadable": _unreadable_in_run,
    "unreadable-run-toml": _unreadable_run_toml,
}
# command → argv for (file, run directory), and whether it reads the file or the directory
COMMANDS: dict[str, Callable[[Path, Path, Path], list[str]]] = {
    "parse": lambda f, run, out: ["parse", "--no-cache", str(f)],
    "parse-strict": lambda f, run, out: ["parse", "--no-cache", "--strict", str(f)],
    "parse-dir": lambda f, run, out: ["parse", "--no-cache", str(run)],
    "scaling": lambda f, run, out: ["scaling", str(f)],
    "scaling-dir": lambda f, run, out: ["scaling", str(run)],
    "diagnose": lambda f, run, out: ["diagnose", "-q", str(run)],
    "model": lambda f, run, out: ["model", "-q", str(run)],
    "diff": lambda f, run, out: ["diff", "-q", str(run), str(run)],
    "timeline": lambda f, run, out: ["timeline", "-q", str(run), "-o", str(out / "t.json")],
    "report": lambda f, run, out: ["report", "-q", str(run), "-o", str(out / "r.html")],
}


NAMED = ("parse", "parse-strict", "scaling")
"""Commands given the bad file itself; the others are given its run directory."""


def _cases() -> list[tuple[str, str]]:
    cases = []
    for kind in sorted(INPUTS):
        for command in sorted(COMMANDS):
            if kind in ("fifo", "device") and command == "report":
                continue  # the walk skips the pipe: this would render a whole report
            cases.append((kind, command))
    return cases


@pytest.mark.parametrize(("kind", "command"), _cases())
def test_bad_inputs_give_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    command: str,
) -> None:
    bad, run = INPUTS[kind](tmp_path, monkeypatch)
    out = tmp_path / "out"
    code = main(COMMANDS[command](bad, run, out))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if kind in ("fifo", "device") and command not in NAMED:
        return  # a directory walk reads regular files only: it did not hang on this one
    assert code in (1, 2), err
    lines = [line for line in err.splitlines() if line.startswith("ppscope: ")]
    if code == 2:
        assert len(lines) == 1, err
        assert len(lines[0]) < 200
