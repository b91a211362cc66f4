"""Child processes of a capture: each in a session of its own, all stopped on every exit path.

A child started in its own session does not receive the terminal's Ctrl-C; the capture decides
when it stops. ``Children.stop_all`` sends SIGTERM to each child's process group (a shell and
what it started go together), waits, then sends SIGKILL to what is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from toolkit.errors import CaptureError

__all__ = ["Children"]

STOP_WAIT_S = 5.0
"""How long a child gets to exit after SIGTERM before SIGKILL."""


class Children:
    """The processes a capture started, stopped together."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[Any]] = []

    def start(
        self,
        argv: Sequence[str],
        *,
        stdout: IO[Any] | int | None = None,
        stderr: IO[Any] | int | None = subprocess.DEVNULL,
        cwd: Path | None = None,
    ) -> subprocess.Popen[Any]:
        """Start ``argv`` in a session of its own; a missing program is a ``CaptureError``."""
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                cwd=cwd,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise CaptureError(f"{argv[0]}: command not found") from None
        except PermissionError:
            raise CaptureError(f"{argv[0]}: permission denied") from None
        self._procs.append(proc)
        return proc

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def stop(self, proc: subprocess.Popen[Any], wait_s: float = STOP_WAIT_S) -> int | None:
        """Stop one child and its process group; its exit code (None if it had to be killed)."""
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        else:
            _signal_group(proc, signal.SIGKILL)  # what the child left running in its group
        if proc in self._procs:
            self._procs.remove(proc)
        return proc.returncode

    def stop_all(self) -> None:
        """Stop every child still known, newest first: SIGTERM to all, then SIGKILL."""
        procs = list(reversed(self._procs))
        for proc in procs:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        for proc in procs:
            self.stop(proc)


def _signal_group(proc: subprocess.Popen[Any], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the child leads its own group (start_new_session)
