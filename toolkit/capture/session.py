"""One capture from start to end: followers started, the sweep run, everything stopped.

Whatever ends a capture (the sweep done, a phase that failed, Ctrl-C, SIGTERM, an error), every
child process is stopped, every file is flushed and ``run.toml`` is written, so the run
directory is valid and complete up to that moment.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolkit.capture.clock import now
from toolkit.capture.gpu import GpuSampler, gpu_tool, record_inventory, start_sampler
from toolkit.capture.metrics import MetricsPoller, ServerInfo
from toolkit.capture.processes import Children
from toolkit.capture.profile import FIRST_WAIT_S, profile_folder, profiling
from toolkit.capture.sources import LogSource, follow_log
from toolkit.capture.sweep import (
    Phase,
    bench_argv,
    client_tail,
    default_num_prompts,
    run_phase,
)
from toolkit.capture.writer import (
    command_of,
    hardware_of,
    interconnect_of,
    label_of,
    model_of,
    write_run_toml,
)
from toolkit.errors import CaptureError

__all__ = ["CaptureOptions", "CaptureResult", "capture"]

LOG_FILE = "server.log"


@dataclass(frozen=True)
class CaptureOptions:
    """What to capture, as ``ppscope capture`` takes it."""

    run_dir: Path
    server: str
    concurrency: Sequence[int]
    log: tuple[str, str] | None = None  # (kind, name): ("journal", "sglang.service")
    log_from_start: bool = False  # the whole log (with the server's start), not from now on
    bench_cmd: str | None = None
    bench_args: str | None = None
    num_prompts: int | None = None
    label: str | None = None
    pause_s: float = 5.0
    profile_steps: int | None = None  # a torch profile of this many steps in each phase


@dataclass
class CaptureResult:
    """What a capture recorded."""

    run_dir: Path
    phases: list[Phase] = field(default_factory=list)
    interrupted: bool = False
    failed: Phase | None = None
    files: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.interrupted and self.failed is None


def capture(options: CaptureOptions, say: Callable[[str], None] = lambda _: None) -> CaptureResult:
    """Record a run directory: the server log, GPU telemetry, metrics and a concurrency sweep.

    ``say`` receives one line per step (progress). A Ctrl-C (``KeyboardInterrupt``) ends the
    capture early: the result says so and the directory holds everything recorded until then.

    Raises
    ------
    CaptureError
        The server does not answer, the run directory holds files already, or a follower's
        program is missing.
    """
    url = options.server.rstrip("/")
    run_dir = options.run_dir
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        what = "a file" if not run_dir.is_dir() else "a folder that holds files"
        raise CaptureError(f"{run_dir}: {what}; name a new or empty run directory")
    info = ServerInfo(url, run_dir / "server_info.jsonl")
    first = info.check()
    run_dir.mkdir(parents=True, exist_ok=True)
    say(f"server {url} answers {info.endpoint}; recording into {run_dir}")
    result = CaptureResult(run_dir)
    children = Children()
    source: LogSource | None = None
    sampler: GpuSampler | None = None
    poller: MetricsPoller | None = None
    inventory: dict[str, Path] = {}
    try:
        info.record(None, "start")
        if options.log is not None:
            source = follow_log(
                *options.log, run_dir / LOG_FILE, children, from_start=options.log_from_start
            )
            say(f"server log: {source.description} → {LOG_FILE}")
        else:
            say("no server log source given: the run will hold no SGLang log")
        tool = gpu_tool()
        if tool is None:
            say("no nvidia-smi or dcgmi on PATH: no GPU trace")
        else:
            inventory = record_inventory(run_dir, children)
            sampler = start_sampler(tool, run_dir, children)
            say(f"gpu: {tool} every 100 ms → {sampler.path.name}")
        poller = MetricsPoller(url, run_dir / "metrics.jsonl")
        poller.start()
        _sweep(options, url, run_dir.resolve(), info, children, result, say)
    except KeyboardInterrupt:
        result.interrupted = True
        say("interrupted: stopping and writing what was recorded")
    finally:
        with _no_interrupts():
            if poller is not None:
                poller.finish()
            if sampler is not None:
                sampler.stop(children)
            if source is not None:
                source.stop()
            children.stop_all()
            if poller is not None and not poller.scrapes:
                (run_dir / "metrics.jsonl").unlink(missing_ok=True)
                if poller.disabled:
                    say("the server has no /metrics (start it with --enable-metrics)")
            info.record(None, "end")
            config = _config(options, info.latest or first, inventory, source, sampler)
            write_run_toml(run_dir, config)
    result.files = sorted(p.name for p in run_dir.iterdir() if not p.name.startswith("."))
    return result


def _sweep(
    options: CaptureOptions,
    url: str,
    run_dir: Path,
    info: ServerInfo,
    children: Children,
    result: CaptureResult,
    say: Callable[[str], None],
) -> None:
    total = len(options.concurrency)
    spent = 2 * FIRST_WAIT_S  # the first phase of a server without /metrics: profile then
    for i, c in enumerate(options.concurrency):
        if i and options.pause_s > 0:
            time.sleep(options.pause_s)  # an idle stretch between phases, in every trace
        n = options.num_prompts or default_num_prompts(c)
        argv = bench_argv(
            options.bench_cmd,
            concurrency=c,
            num_prompts=n,
            url=url,
            run_dir=run_dir,
            extra=options.bench_args,
        )
        phase = Phase(i, c, n, argv)
        result.phases.append(phase)
        info.record(i, "before")
        say(f"phase {i + 1}/{total}: concurrency {c}, {n} requests …")
        started = time.monotonic()
        folder = profile_folder(run_dir, i, c)
        with profiling(
            url, folder, options.profile_steps, half=n // 2, fallback_s=spent / 2, say=say
        ):
            run_phase(phase, run_dir, children)
        info.record(i, "after")
        spent = time.monotonic() - started
        if phase.exit_code != 0:
            result.failed = phase
            say(f"phase {i + 1}/{total} failed (exit {phase.exit_code}); the sweep stops here")
            for line in client_tail(run_dir, c):
                say(f"  {line}")
            return
        say(f"phase {i + 1}/{total}: done in {spent:.0f} s, {phase.results} result(s)")


def _config(
    options: CaptureOptions,
    info: dict[str, Any],
    inventory: dict[str, Path],
    source: LogSource | None,
    sampler: GpuSampler | None,
) -> dict[str, Any]:
    """The keys of ``run.toml``."""
    values: dict[str, Any] = {
        "label": options.label or label_of(info),
        "model": model_of(info),
        "command": command_of(info),
        "hardware": hardware_of(inventory.get("gpus")),
        "interconnect": interconnect_of(inventory.get("topology")),
    }
    offset = source.clock.offset_s if source is not None else None
    if offset:
        values["clock_offset_s"] = offset
    zone = now().astimezone().tzname()
    values["notes"] = (
        f"recorded by ppscope capture from {options.server.rstrip('/')} "
        f"(concurrency {','.join(map(str, options.concurrency))}; capture clock {zone})"
    )
    if sampler is not None and sampler.tool == "dcgmi" and sampler.first_round is not None:
        values["gpu_trace"] = {"interval_s": sampler.interval_s, "start": sampler.first_round}
    return values


@contextmanager
def _no_interrupts() -> Iterator[None]:
    """A second Ctrl-C or SIGTERM does not cut the cleanup short (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
