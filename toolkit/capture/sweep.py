"""The concurrency sweep: one benchmark run per concurrency, each a phase with its times.

By default each phase runs ``python3 -m sglang.bench_serving`` against the server, appending
its result to ``bench.jsonl``; a command of the user's own is a template whose ``{concurrency}``,
``{num_prompts}``, ``{url}``, ``{output}`` and ``{run_dir}`` are filled in per phase. A template
is split like a shell line but runs without a shell. The client's own output goes to
``.capture/bench-c<C>.log`` (a hidden folder: loaders skip it, so a printed result block is
not read twice).

``phases.jsonl`` gets one object per phase when it ends: ``{"phase", "concurrency",
"num_prompts", "start", "end", "exit_code", "results", "command"}``, times in the capture's
local time. ``results`` counts the lines the phase added to ``bench.jsonl``; ``exit_code`` is
null for a phase stopped by Ctrl-C, with ``"interrupted": true``.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.capture.clock import iso, now
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
        if self.interrupted:
            out["interrupted"] = True
        return out


def run_phase(phase: Phase, run_dir: Path, children: Children) -> Phase:
    """Run one phase to its end and append its record to ``phases.jsonl``.

    A Ctrl-C while it runs stops the client, records the phase as interrupted and goes on
    up as ``KeyboardInterrupt``.
    """
    logs = run_dir / CLIENT_LOGS
    logs.mkdir(exist_ok=True)
    before = _lines(run_dir / BENCH_FILE)
    with (logs / f"bench-c{phase.concurrency}.log").open("ab") as out:
        phase.start = iso(now())
        proc = children.start(phase.command, stdout=out, stderr=subprocess.STDOUT)
        try:
            phase.exit_code = proc.wait()
        except BaseException:
            phase.interrupted = True
            children.stop(proc)
            raise
        finally:
            phase.end = iso(now())
            phase.results = max(0, _lines(run_dir / BENCH_FILE) - before)
            append_record(run_dir / PHASE_FILE, phase.record())
            children.stop(proc)
    return phase


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
