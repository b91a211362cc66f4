"""What a capture needs, checked before it records anything: every problem named at once.

The run directory must be new or empty; the server must answer ``/server_info`` (or
``/get_server_info``); the benchmark must be there (``sglang.bench_serving`` importable by the
``python3`` that runs it, or the program of ``--bench-cmd`` found and executable, its template
valid); the log source must be there (the file readable, or ``journalctl``, ``docker`` or
``kubectl`` on PATH). Nothing is written and no child is left running by the checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.capture.metrics import ServerInfo
from toolkit.capture.sweep import bench_argv, default_num_prompts
from toolkit.errors import CaptureError

if TYPE_CHECKING:
    from toolkit.capture.session import CaptureOptions

__all__ = ["preflight"]

TOOLS = {"journal": "journalctl", "docker": "docker", "kubectl": "kubectl"}
"""The program each kind of log source is followed with."""
CHECK_TIMEOUT_S = 30.0
"""Longest wait for ``python3`` to say whether it finds ``sglang.bench_serving``."""
# Finds the module's file without importing sglang (whose import takes seconds).
_FIND_BENCH = (
    "import importlib.util, os, sys\n"
    "s = importlib.util.find_spec('sglang')\n"
    "paths = list(s.submodule_search_locations or []) if s else []\n"
    "sys.exit(0 if any(os.path.exists(os.path.join(p, 'bench_serving.py')) or "
    "os.path.isdir(os.path.join(p, 'bench_serving')) for p in paths) else 3)\n"
)


def preflight(options: CaptureOptions, info: ServerInfo) -> dict[str, Any]:
    """The server's first ``/server_info`` answer, once every check passed.

    Raises
    ------
    CaptureError
        One line per problem found.
    """
    problems = [*_run_dir(options.run_dir), *_bench(options), *_log(options.log)]
    first: dict[str, Any] | None = None
    try:
        first = info.check()
    except CaptureError as e:
        problems.insert(0, str(e))
    if problems or first is None:
        raise CaptureError("\n".join(problems))
    return first


def _run_dir(run_dir: Path) -> list[str]:
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        what = "a file" if not run_dir.is_dir() else "a folder that holds files"
        return [f"{run_dir}: {what}; name a new or empty run directory"]
    return []


def _bench(options: CaptureOptions) -> list[str]:
    """The benchmark command of the first phase, checked without running it."""
    c = options.concurrency[0] if options.concurrency else 1
    try:
        argv = bench_argv(
            options.bench_cmd,
            concurrency=c,
            num_prompts=options.num_prompts or default_num_prompts(c),
            url=options.server.rstrip("/"),
            run_dir=options.run_dir,
            extra=options.bench_args,
        )
    except CaptureError as e:
        return [str(e)]
    program = argv[0]
    found = _program(program)
    if found is None:
        flag = "--bench-cmd" if options.bench_cmd else "the default benchmark"
        return [f"{program}: command not found ({flag})"]
    if options.bench_cmd is None and not _has_bench_serving(found):
        return [
            f"sglang.bench_serving: not importable by {program} "
            "(install sglang here, or give --bench-cmd)"
        ]
    return []


def _program(name: str) -> str | None:
    """The executable ``name`` runs: a path as given, else found on PATH."""
    if os.sep in name:
        path = Path(name)
        return name if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(name)


def _has_bench_serving(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", _FIND_BENCH],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _log(log: tuple[str, str] | None) -> list[str]:
    if log is None:
        return []
    kind, name = log
    if kind in TOOLS:
        tool = TOOLS[kind]
        return [] if shutil.which(tool) else [f"--{kind} {name}: {tool} not found on PATH"]
    path = Path(name)
    if not path.exists():
        return [f"--log {name}: no such file (is the server writing its log there?)"]
    if not path.is_file() or not os.access(path, os.R_OK):
        return [f"--log {name}: not a readable file"]
    return []
