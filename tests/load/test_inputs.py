"""What every reader checks first: pipes, devices, directories and unreadable files are one-line
errors; lines are physical lines whatever the terminators."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolkit.errors import ToolkitError, UnknownFormat
from toolkit.load.inputs import check_input, head_lines, split_lines
from toolkit.load.text import scan_lines


def deny_reading(monkeypatch: pytest.MonkeyPatch, victim: Path) -> None:
    """Make ``victim`` unreadable to this process (tests run as root, which reads mode 000)."""
    real_open = Path.open

    def guarded(self: Path, *args, **kwargs):
        if Path(self) == victim:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", guarded)


def test_a_regular_file_passes(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_text("x\n")
    assert check_input(path) == path


def test_a_fifo_is_rejected_without_opening_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(UnknownFormat, match="named pipe"):
        check_input(fifo)


def test_a_device_is_rejected() -> None:
    with pytest.raises(UnknownFormat, match="character device"):
        check_input("/dev/zero")


def test_a_socket_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        with pytest.raises(UnknownFormat, match="socket"):
            check_input(path)


def test_missing_and_directories(tmp_path: Path) -> None:
    with pytest.raises(ToolkitError, match="no such file"):
        check_input(tmp_path / "nope")
    with pytest.raises(ToolkitError, match="a directory"):
        check_input(tmp_path)


def test_unreadable_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.log"
    path.write_text("x\n")
    deny_reading(monkeypatch, path)
    with pytest.raises(UnknownFormat, match="permission denied") as e:
        check_input(path)
    assert "\n" not in str(e.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files of mode 000")
def test_mode_000_file(tmp_path: Path) -> None:
    path = tmp_path / "secret.log"
    path.write_text("x\n")
    path.chmod(0)
    with pytest.raises(UnknownFormat, match="permission denied"):
        check_input(path)


@given(st.lists(st.text(alphabet="ab\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029 "), max_size=8))
def test_split_lines_keeps_physical_lines(lines: list[str]) -> None:
    lines = [line.rstrip("\r") for line in lines]
    assert split_lines("".join(f"{line}\n" for line in lines)) == lines
    assert split_lines("".join(f"{line}\r\n" for line in lines)) == lines


def test_head_lines_counts_like_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"one\x0btwo\r\nthree\x1cfour\rfive\n\xe2\x80\xa8\nlast")
    assert head_lines(path) == ["one\x0btwo", "three\x1cfour\rfive", "\u2028", "last"]


@pytest.mark.parametrize(
    "data", [b"x\x01\x00\x00", b"x^2 grew\nnext\n", b"x\x9cabc\n", b"\x28\xb5\x2f\xfdabc\n"]
)
def test_text_that_starts_like_a_compressed_stream(tmp_path: Path, data: bytes) -> None:
    """polars inflates files with a zlib or zstd header itself; their lines must stay."""
    path = tmp_path / "server.log"
    path.write_bytes(data)
    lines = scan_lines(path, tmp_path).collect()
    assert lines.get_column("lineno").to_list() == list(
        range(1, data.count(b"\n") + 1 + (not data.endswith(b"\n")))
    )
