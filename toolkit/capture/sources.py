"""Where the server log comes from, followed from the capture's start into one file.

A file is followed like ``tail -F``: from its end at the start, reopened from its beginning
when it is replaced (log rotation) or truncated, waited for when it does not exist yet. A
systemd unit, a docker container or a Kubernetes pod is followed by its own tool, asked for
lines from now on, with the wrapper ppscope reads (``short-iso``, ``--timestamps``).

``from_start`` takes the log from its beginning instead (the file, the container's or pod's
whole log, the unit's lines of this boot), so it holds the server's start: the
``server_args=`` dump that states the layout and flags.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from toolkit.capture.clock import LogClock, now
from toolkit.capture.halt import Halt
from toolkit.capture.processes import Children

__all__ = ["SOURCES", "LogSource", "follow_log", "source_argv"]

POLL_S = 0.2
"""How often a followed file is read for new lines."""

SOURCES = ("log", "journal", "docker", "kubectl")
"""The kinds of log source, as the command line names them."""


def source_argv(kind: str, name: str, since: datetime | None) -> list[str] | None:
    """The command that follows a unit, container or pod from ``since`` (None: from its
    start); None for a file."""
    utc = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if since else None
    if kind == "journal":
        lines = ["-n", "0"] if since else ["-b", "-n", "all"]
        return ["journalctl", "-u", name, "-f", "-o", "short-iso", *lines, "--no-pager"]
    if kind == "docker":
        return ["docker", "logs", "-f", "--timestamps", *(["--since", utc] if utc else []), name]
    if kind == "kubectl":
        window = [f"--since-time={utc}"] if utc else []
        return ["kubectl", "logs", "-f", "--timestamps", *window, name]
    return None


@dataclass
class LogSource:
    """A running log follower: the file it writes, its clock, and how to stop it."""

    description: str
    path: Path
    clock: LogClock
    _stop: Callable[[], None]

    def stop(self) -> None:
        """Stop following; everything read so far is in ``path``."""
        self._stop()


def follow_log(
    kind: str,
    name: str,
    out: Path,
    children: Children,
    *,
    from_start: bool = False,
    halt: Halt | None = None,
) -> LogSource:
    """Start following the log ``name`` of ``kind`` (``SOURCES``) into ``out``, from now on
    or ``from_start``. A write that fails (a full disk) ends the following and sets ``halt``."""
    clock = LogClock()
    sink = _Sink(out.open("ab"), halt)
    argv = source_argv(kind, name, None if from_start else datetime.now().astimezone())
    if argv is None:
        tail = _FileTail(Path(name), sink, clock, at_end=not from_start)
        tail.start()

        def stop_tail() -> None:
            tail.finish()
            sink.close()

        return LogSource(f"{name} (followed)", out, clock, stop_tail)
    proc = children.start(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    reader = threading.Thread(
        target=_copy_lines, args=(proc.stdout, sink, clock), daemon=True, name="log-reader"
    )
    reader.start()

    def stop_command() -> None:
        children.stop(proc)
        reader.join(timeout=5.0)
        sink.close()

    return LogSource(" ".join(argv), out, clock, stop_command)


class _Sink:
    """The output file of a follower; a failed write closes it and sets ``halt``."""

    def __init__(self, file: IO[bytes], halt: Halt | None) -> None:
        self.file, self.halt = file, halt
        self.closed = False

    def write(self, raw: bytes) -> None:
        if self.closed:
            return
        try:
            self.file.write(raw)
            self.file.flush()
        except OSError as e:
            self.close()
            if self.halt is None:
                raise
            self.halt.stop(e)

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):  # what the buffer holds cannot be written either
            self.file.close()


def _copy_lines(stream: IO[bytes] | None, sink: _Sink, clock: LogClock) -> None:
    """Copy a follower's output line by line, noting when each line was read."""
    if stream is None:
        return
    for raw in iter(stream.readline, b""):
        _write(raw, sink, clock)


def _write(raw: bytes, sink: _Sink, clock: LogClock) -> None:
    if sink.closed:
        return
    sink.write(raw)
    clock.seen(raw.decode("utf-8", "replace"), now())


class _FileTail(threading.Thread):
    """``tail -F`` in a thread: whole lines copied as they appear, rotation followed."""

    def __init__(self, path: Path, sink: _Sink, clock: LogClock, *, at_end: bool) -> None:
        super().__init__(daemon=True, name="log-tail")
        self.path, self.sink, self.clock = path, sink, clock
        self._done = threading.Event()
        self._file: IO[bytes] | None = None
        self._inode: tuple[int, int] | None = None
        self._partial = b""
        self._open(at_end=at_end)

    def _open(self, *, at_end: bool) -> None:
        try:
            f = self.path.open("rb")
        except OSError:
            return  # not there yet: looked for again at the next poll
        st = os.fstat(f.fileno())
        if at_end:
            f.seek(0, os.SEEK_END)
        self._file, self._inode = f, (st.st_dev, st.st_ino)

    def run(self) -> None:
        while not self._done.wait(POLL_S):
            self._poll()
        self._poll()
        if self._partial:  # a last line without its newline
            _write(self._partial + b"\n", self.sink, self.clock)
        if self._file is not None:
            self._file.close()

    def finish(self) -> None:
        self._done.set()
        self.join(timeout=10.0)

    def _poll(self) -> None:
        if self._file is None:
            self._open(at_end=False)  # appeared after the start: all of it is new
            if self._file is None:
                return
        self._read()
        try:
            st = self.path.stat()
        except OSError:
            return  # moved away, the new one not yet created
        replaced = (st.st_dev, st.st_ino) != self._inode
        truncated = not replaced and st.st_size < self._file.tell()
        if replaced or truncated:
            self._read()  # the rest of the old file first
            self._file.close()
            self._file = None
            self._open(at_end=False)
            self._read()

    def _read(self) -> None:
        if self._file is None:
            return
        data = self._file.read()
        if not data:
            return
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            _write(line + b"\n", self.sink, self.clock)
