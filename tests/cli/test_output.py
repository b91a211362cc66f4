"""Text output: tables that fit 100 columns, progress only on a terminal, ``-o`` files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from helpers import TEST_DATA

from toolkit.cli.main import main
from toolkit.cli.output import Progress, aligned

SGLANG = TEST_DATA / "sglang"


def test_a_wide_table_is_cut_into_blocks_that_repeat_the_key() -> None:
    header = ["concurrency", *(f"layout{i} tok/s" for i in range(12))]
    rows = [[str(c), *(f"{c * 10.5:.1f}" for _ in range(12))] for c in (1, 2, 32)]
    lines = aligned(header, rows, width=100)
    assert max(len(line) for line in lines) <= 100
    blocks = "\n".join(lines).split("\n\n")
    assert len(blocks) > 1
    assert all(block.lstrip().startswith("concurrency") for block in blocks)
    assert all(h in "\n".join(lines) for h in header)


def test_numbers_flush_right_text_flush_left() -> None:
    lines = aligned(["label", "tok/s"], [["PP8", "34.3"], ["TP8 long", "577.8"]])
    assert lines[1] == "PP8        34.3"
    assert lines[2] == "TP8 long  577.8"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_share_with_an_estimate_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [0.0]  # a clock the test moves: each step takes 4 s
    monkeypatch.setattr("toolkit.cli.output.time.monotonic", lambda: now[0])
    tty = _Tty()
    with Progress(5, stream=tty, title="diagnose") as progress:
        for name in ("pp8", "tp8"):
            with progress.step(name):
                now[0] += 4.0
        assert progress.line() == "diagnose tp8: 40 % · ~12 s left"
    assert "diagnose pp8: 0 %" in tty.getvalue()
    assert "diagnose tp8: 20 % · ~16 s left" in tty.getvalue()  # drawn as tp8 started


def test_progress_elsewhere_is_a_plain_line_per_step() -> None:
    pipe = io.StringIO()
    with Progress(2, stream=pipe, title="parse") as progress:
        for name in ("a.log", "b.log"):
            with progress.step(name):
                pass
    assert pipe.getvalue().splitlines() == ["parse: [1/2] a.log", "parse: [2/2] b.log"]
    for stream in (_Tty(), io.StringIO()):
        with Progress(1, stream=stream, quiet=True) as progress, progress.step("a.log"):
            pass
        assert stream.getvalue() == ""


def test_output_flag_writes_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "parse.json"
    log = SGLANG / "v0.5.23-pp8.log"
    assert main(["parse", "--json", "--no-cache", str(log), "-o", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert json.loads(out.read_text())["files"][0]["format"] == "sglang-log"


def test_many_launches_are_summarized(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = "[2026-01-01 00:00:{s:02d}] server_args=ServerArgs(tp_size=1, pp_size=2)\n"
    body = "".join(one.format(s=i % 60) for i in range(300))
    (tmp_path / "restarts.log").write_text(body)
    assert main(["parse", "--no-cache", str(tmp_path / "restarts.log")]) == 0
    text = capsys.readouterr().out
    assert text.count("launch at line") == 6
    assert "294 more launches" in text and "300 in all" in text


def test_one_unreadable_file_does_not_stop_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "server.log").write_bytes((SGLANG / "v0.5.23-pp8.log").read_bytes())
    (tmp_path / "run.toml").write_text("labl = 'typo'\n")
    assert main(["parse", "--no-cache", "--json", str(tmp_path)]) == 1
    files = json.loads(capsys.readouterr().out)["files"]
    formats = {Path(f["path"]).name: f["format"] for f in files}
    assert formats == {"server.log": "sglang-log", "run.toml": "error"}
    error = next(f for f in files if f["format"] == "error")["error"]
    assert "labl" in error
