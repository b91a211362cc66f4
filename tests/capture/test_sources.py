"""Following a server log: a file like ``tail -F``, a unit through ``journalctl``."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from helpers.fake_sglang import wait_until
from helpers.fake_tools import install_journalctl

from toolkit.capture.clock import LogClock, line_time
from toolkit.capture.processes import Children
from toolkit.capture.sources import follow_log, source_argv
from toolkit.load.sniff import sniff


def _append(path: Path, *lines: str) -> None:
    with path.open("a") as f:
        f.writelines(line + "\n" for line in lines)


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_file_is_followed_from_the_end_through_rotation_and_truncation(tmp_path: Path) -> None:
    live, out = tmp_path / "server.log", tmp_path / "run" / "server.log"
    out.parent.mkdir()
    _append(live, "[2025-05-25 21:40:00] before the capture")
    children = Children()
    source = follow_log("log", str(live), out, children)
    try:
        _append(live, "[2025-05-25 21:40:01] one")
        assert wait_until(lambda: "one" in _text(out))
        live.rename(tmp_path / "server.log.1")  # rotated: a new file takes the name
        _append(tmp_path / "server.log.1", "[2025-05-25 21:40:02] two, late in the old file")
        _append(live, "[2025-05-25 21:40:03] three")
        assert wait_until(lambda: "three" in _text(out))
        live.write_text("[2025-05-25 21:40:04] four\n")  # truncated: shorter than before
        assert wait_until(lambda: "four" in _text(out))
        with live.open("a") as f:
            f.write("[2025-05-25 21:40:05] five, no newline yet")
    finally:
        source.stop()
    lines = out.read_text().splitlines()
    assert [ln.split("] ")[1].split(",")[0] for ln in lines] == [
        "one",
        "two",
        "three",
        "four",
        "five",
    ]
    assert source.clock.lines == 5


def test_a_file_that_appears_later_is_read_from_its_start(tmp_path: Path) -> None:
    live, out = tmp_path / "later.log", tmp_path / "out.log"
    source = follow_log("log", str(live), out, Children())
    try:
        _append(live, "[2025-05-25 21:40:01] first")
        assert wait_until(lambda: "first" in _text(out))
    finally:
        source.stop()


def test_a_unit_is_followed_through_journalctl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install_journalctl(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("FAKE_JOURNAL_ARGV", str(tmp_path / "argv"))
    monkeypatch.setenv("FAKE_JOURNAL_SOURCE", str(tmp_path / "journal"))
    out = tmp_path / "server.log"
    children = Children()
    source = follow_log("journal", "sglang.service", out, children)
    try:
        _append(
            tmp_path / "journal",
            "[2025-05-25 21:40:21] Decode batch, #running-req: 3, #token: 300, token usage: 0.00, "
            "cuda graph: True, gen throughput (token/s): 90.00, #queue-req: 0",
        )
        assert wait_until(lambda: "Decode batch" in _text(out))
    finally:
        source.stop()
    assert not children.pids  # the follower was stopped
    argv = (tmp_path / "argv").read_text()
    assert argv == "-u sglang.service -f -o short-iso -n 0 --no-pager"
    assert out.read_text().startswith("2025-05-25T21:40:21+0000 gpu-host python3[4242]: [2025")
    assert sniff(out) == "sglang-log"


def test_from_start_takes_what_the_file_held_already(tmp_path: Path) -> None:
    live, out = tmp_path / "server.log", tmp_path / "out.log"
    _append(live, "[2025-05-25 21:40:00] server_args=ServerArgs(model_path='m', tp_size=8)")
    source = follow_log("log", str(live), out, Children(), from_start=True)
    try:
        _append(live, "[2025-05-25 21:40:01] later")
        assert wait_until(lambda: "later" in _text(out))
    finally:
        source.stop()
    assert out.read_text().startswith("[2025-05-25 21:40:00] server_args=")


def test_followers_from_the_start() -> None:
    assert source_argv("journal", "sglang", None) == [
        "journalctl", "-u", "sglang", "-f", "-o", "short-iso", "-b", "-n", "all", "--no-pager"
    ]  # fmt: skip
    assert source_argv("docker", "c", None) == ["docker", "logs", "-f", "--timestamps", "c"]
    assert source_argv("kubectl", "p", None) == ["kubectl", "logs", "-f", "--timestamps", "p"]


def test_followers_ask_for_lines_from_now_on() -> None:
    since = datetime(2025, 5, 25, 21, 40, 21).astimezone()
    docker = source_argv("docker", "sglang", since)
    kubectl = source_argv("kubectl", "sglang-0", since)
    assert docker is not None and kubectl is not None
    assert docker[:4] == ["docker", "logs", "-f", "--timestamps"] and docker[-1] == "sglang"
    assert docker[5].endswith("Z")
    assert kubectl[:4] == ["kubectl", "logs", "-f", "--timestamps"]
    assert kubectl[4].startswith("--since-time=") and kubectl[-1] == "sglang-0"
    assert source_argv("log", "server.log", since) is None


def test_the_log_clock_is_found_from_the_lines() -> None:
    read = datetime(2025, 5, 25, 21, 40, 21, 300_000)
    same, ahead = LogClock(), LogClock()
    for i in range(5):
        t = read + timedelta(seconds=i)
        same.seen(f"[{t:%Y-%m-%d %H:%M:%S}] Decode batch, ...", t + timedelta(milliseconds=40))
        later = t + timedelta(hours=2)
        ahead.seen(f"[{later:%Y-%m-%d %H:%M:%S} PP0 TP0] Decode batch, ...", t)
    ahead.seen("a line without a time", read)
    assert same.offset_s == 0.0  # within a second: the same clock
    assert ahead.offset_s == pytest.approx(7200.0, abs=1.0)
    assert LogClock().offset_s is None


def test_line_time_reads_wrapped_lines() -> None:
    line = "2025-05-25T21:40:21.1Z [2025-05-25 21:40:20.123 DP0 PP3 TP0] Prefill batch"
    assert line_time(line) == datetime(2025, 5, 25, 21, 40, 20, 123_000)
    assert line_time("INFO: no bracket") is None
