"""Children of a capture are stopped with everything they started."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers.fake_sglang import wait_until
from helpers.fake_tools import alive

from toolkit.capture.processes import Children
from toolkit.errors import CaptureError


def test_stop_all_ends_each_child_and_its_own_children(tmp_path) -> None:
    children = Children()
    pids = tmp_path / "pids"
    script = (
        "import os, subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{p.pid}}')\n"
        "time.sleep(600)\n"
    )
    children.start([sys.executable, "-c", script])
    assert wait_until(lambda: pids.exists() and " " in pids.read_text())
    parent, grandchild = map(int, pids.read_text().split())
    children.stop_all()
    assert wait_until(lambda: not alive(parent) and not alive(grandchild))
    assert children.pids == []


def test_a_child_that_ignores_sigterm_is_killed() -> None:
    children = Children()
    script = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print(1, flush=True)\n"
        "time.sleep(600)"
    )
    proc = children.start([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"1"
    assert children.stop(proc, wait_s=0.5) == -9


def test_a_missing_program_is_a_capture_error() -> None:
    with pytest.raises(CaptureError, match="no-such-tool-here: command not found"):
        Children().start(["no-such-tool-here"])
