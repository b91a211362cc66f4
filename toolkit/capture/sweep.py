"""The concurrency sweep: one benchmark run per concurrency, each a phase with its times.

By default each phase runs ``python3 -m sglang.bench_serving`` against the server, appending
its result to ``bench.jsonl``; a command of the user's own is a template whose ``{concurrency}``,
``{num_prompts}``, ``{url}``, ``{output}`` and ``{run_dir}`` are filled in per phase. A template
is split like a shell line but runs without a shell. The client's own output goes to
``.capture/bench-c<C>.log`` (a hidden folder: loaders skip it, so a printed result block is
not read twice).

``phases.jsonl`` gets one object per phase when it ends: ``{"phase", "concurrency",
"num_prompts", "start", "end", "exit_code", "results", "command"}``, times in the capture's
local time. ``results`` counts the lines the phase added to ``bench.jsonl``, ``completed`` the
requests they say completed (when they say); ``metrics_errors`` the ``/metrics`` scrapes that
failed during the phase (``"metrics_missing": true`` instead when the server has no
``/metrics``). ``exit_code`` is null for a phase stopped early (Ctrl-C, a signal, a
full disk), with ``"interrupted": true``. A phase whose benchmark failed or completed no
request (the server died) has ``"failed": true`` and a ``reason``; the sweep stops there.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.capture.clock import iso, now
from toolkit.capture.halt import Halt
from toolkit.capture.processes import Children
from toolkit.errors import CaptureError

__all__ = [
    "FIELDS",
    "Phase",
    "bench_argv",
    "default_num_prompts",
    "run_phase",
]

FIELDS = ("concurrency", "num_prompts", "url", "output", "run_dir")
"""The names a ``--bench-cmd`` template may use in braces."""

BENCH_FILE = "bench.jsonl"
PHASE_FILE = "phases.jsonl"
CLIENT_LOGS = ".capture"


def default_num_prompts(concurrency: int) -> int:
    """Requests per phase by default: four waves of the concurrency, at least 16."""
    return max(16, 4 * concurrency)


def bench_argv(
    template: str | None,
    *,
    concurrency: int,
    num_prompts: int,
    url: str,
    run_dir: Path,
    extra: str | None = None,
) -> list[str]:
    """The command of one phase: ``template`` filled in, else ``sglang.bench_serving``.

    >>> bench_argv("bench --c {concurrency} -o {output}", concurrency=8, num_prompts=32,
    ...            url="http://h:30000", run_dir=Path("run"))
    ['bench', '--c', '8', '-o', 'run/bench.jsonl']
    """
    values = {
        "concurrency": str(concurrency),
        "num_prompts": str(num_prompts),
        "url": url,
        "output": str(run_dir / BENCH_FILE),
        "run_dir": str(run_dir),
    }
    if template is None:
        argv = [
            "python3",
            "-m",
            "sglang.bench_serving",
            "--backend",
            "sglang",
            "--base-url",
            url,
            "--dataset-name",
            "random",
            "--max-concurrency",
            values["concurrency"],
            "--num-prompts",
            values["num_prompts"],
            "--output-file",
            values["output"],
        ]
        return argv + (shlex.split(extra) if extra else [])
    try:
        words = shlex.split(template)
    except ValueError as e:
        raise CaptureError(f"--bench-cmd: {e}: {template!r}") from None
    try:
        argv = [word.format(**values) for word in words]
    except KeyError as e:
        known = ", ".join("{" + f + "}" for f in FIELDS)
        raise CaptureError(f"--bench-cmd: unknown field {{{e.args[0]}}} (known: {known})") from None
    except (ValueError, IndexError) as e:
        raise CaptureError(f"--bench-cmd: {e} in {template!r} (write a brace as {{{{)") from None
    if not argv:
        raise CaptureError("--bench-cmd is empty")
    return argv + (shlex.split(extra) if extra else [])


@dataclass
class Phase:
    """One benchmark run of the sweep, as ``phases.jsonl`` records it."""

    phase: int
    concurrency: int
    num_prompts: int
    command: list[str]
    start: str | None = None
    end: str | None = None
    exit_code: int | None = None
    results: int = 0
    interrupted: bool = False
    completed: int | None = None  # requests the results say completed
    metrics_errors: int | None = None  # /metrics scrapes that failed during the phase
    metrics_missing: bool = False  # the server has no /metrics
    reason: str | None = None  # why the phase failed

    @property
    def failed(self) -> bool:
        return self.reason is not None

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "phase": self.phase,
            "concurrency": self.concurrency,
            "num_prompts": self.num_prompts,
            "start": self.start,
            "end": self.end,
            "exit_code": self.exit_code,
            "results": self.results,
            "command": shlex.join(self.command),
        }
        if self.completed is not None:
            out["completed"] = self.completed
        if self.metrics_errors is not None:
            out["metrics_errors"] = self.metrics_errors
        if self.metrics_missing:
            out["metrics_missing"] = True
        if self.interrupted:
            out["interrupted"] = True
        if self.reason is not None:
            out["failed"] = True
            out["reason"] = self.reason
        return out


WAIT_S = 0.5
"""How often a running phase looks whether the capture must stop (a full disk in a thread)."""


def run_phase(
    phase: Phase,
    run_dir: Path,
    children: Children,
    *,
    halt: Halt | None = None,
    errors: Callable[[], int | None] | None = None,
) -> Phase:
    """Run one phase to its end and append its record to ``phases.jsonl``.

    A Ctrl-C while it runs stops the client, records the phase as interrupted and goes on
    up as ``KeyboardInterrupt``; so does ``halt`` being set (as ``CaptureError``). ``errors``
    counts failed ``/metrics`` scrapes (None: there is no ``/metrics``): the phase records how
    many it saw.
    """
    logs = run_dir / CLIENT_LOGS
    logs.mkdir(exist_ok=True)
    before = _lines(run_dir / BENCH_FILE)
    errors_before = errors() if errors is not None else None
    with (logs / f"bench-c{phase.concurrency}.log").open("ab") as out:
        phase.start = iso(now())
        proc = children.start(phase.command, stdout=out, stderr=subprocess.STDOUT)
        try:
            phase.exit_code = _wait(proc, halt)
        except BaseException:
            phase.interrupted = True
            children.stop(proc)
            raise
        finally:
            phase.end = iso(now())
            added = _results(run_dir / BENCH_FILE, before)
            phase.results = len(added)
            said = [r["completed"] for r in added if _count(r.get("completed"))]
            phase.completed = sum(said) if said and len(said) == len(added) else None
            errors_after = errors() if errors is not None else None
            if errors_before is not None and errors_after is not None:
                phase.metrics_errors = errors_after - errors_before
            phase.metrics_missing = errors is not None and errors_after is None
            if not phase.interrupted:
                phase.reason = _failure(phase)
            append_record(run_dir / PHASE_FILE, phase.record())
            children.stop(proc)
    return phase


def _wait(proc: subprocess.Popen[Any], halt: Halt | None) -> int:
    while True:
        try:
            return proc.wait(WAIT_S if halt is not None else None)
        except subprocess.TimeoutExpired:
            if halt is not None and halt.is_set():
                raise CaptureError("the capture was stopped") from None


def _failure(phase: Phase) -> str | None:
    """Why a finished phase failed: its benchmark's exit code, or no request completed."""
    if phase.exit_code != 0:
        return f"exit {phase.exit_code}"
    if phase.completed == 0:
        return f"0 of {phase.num_prompts} requests completed: is the server still up?"
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _results(path: Path, before: int) -> list[dict[str, Any]]:
    """The result lines after the first ``before`` (JSON objects; others count as empty)."""
    try:
        with path.open("rb") as f:
            lines = [line for line in f if line.strip()][before:]
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            record = None
        out.append(record if isinstance(record, dict) else {})
    return out


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON line and flush it to disk."""
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def client_tail(run_dir: Path, concurrency: int, lines: int = 5) -> Sequence[str]:
    """The last lines a phase's client printed."""
    path = run_dir / CLIENT_LOGS / f"bench-c{concurrency}.log"
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0
